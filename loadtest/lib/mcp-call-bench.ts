/**
 * The engine bench's MCP section: what a call of an MCP tool costs over a
 * local tool. A trivial tool on an stdio MCP server (a child process built
 * with the official SDK) is called through Troupe's executor, the way a turn
 * calls it, one call at a time; the same executor calling an in-process tool
 * that returns the same text is the baseline.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpPool } from '../../src/mcp/pool.js';
import { connectMcpServers, withMcpTools } from '../../src/mcp/tools.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { executeToolCall } from '../../src/tools/executor.js';
import { NO_TOOLS, createToolset, type Toolset } from '../../src/tools/library.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { z } from 'zod';
import { percentile } from './stats.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SERVER = path.join(HERE, 'mcp-trivial-server.ts');

/** Calls measured, and warm-up calls before them. */
export const MCP_BENCH_CALLS = 2_000;
export const MCP_BENCH_WARMUP = 200;

/** Latencies of one kind of call, in ms. */
export interface CallLatency {
  label: string;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  failures: number;
}

/** What the MCP section measured. */
export interface McpBenchResult {
  calls: number;
  warmup: number;
  rows: CallLatency[];
  /** MCP p50 and p99 minus the local tool's. */
  overheadMs: { p50: number; p99: number };
}

/** Runs the section: connect once, warm up, then measure each kind of call. */
export async function benchMcpCalls(
  calls = MCP_BENCH_CALLS,
  warmup = MCP_BENCH_WARMUP,
): Promise<McpBenchResult> {
  const pool = new McpPool();
  const mcp = await connectMcpServers(
    [{ label: 'bench', command: process.execPath, args: ['--import', 'tsx', SERVER] }],
    { file: path.join(HERE, 'bench-character.ts'), ownTools: [], pool },
  );
  if (mcp.tools.length !== 1) {
    await pool.closeAll();
    throw new Error(`the bench MCP server did not list its tool: ${JSON.stringify(mcp.problems)}`);
  }
  try {
    const viaMcp = withMcpTools(new Map([['default', NO_TOOLS]]), mcp.tools).get('default')!;
    const local = createToolset([
      defineTool({
        name: 'ping',
        description: 'Answers pong.',
        parameters: z.object({}),
        handler: () => 'pong',
      }),
    ]);
    const rows = [
      await measure('local tool (in process)', local, calls, warmup),
      await measure('MCP tool (stdio server)', viaMcp, calls, warmup),
    ];
    const [base, remote] = rows as [CallLatency, CallLatency];
    return {
      calls,
      warmup,
      rows,
      overheadMs: { p50: remote.p50 - base.p50, p99: remote.p99 - base.p99 },
    };
  } finally {
    await pool.closeAll();
  }
}

async function measure(
  label: string,
  toolset: Toolset,
  calls: number,
  warmup: number,
): Promise<CallLatency> {
  const log = createMemoryLogger();
  const session = { id: 'bench', character: 'bench', state: {} };
  const signal = new AbortController().signal;
  const samples: number[] = [];
  let failures = 0;
  for (let i = 0; i < warmup + calls; i++) {
    const result = await executeToolCall(
      { id: `call_${i}`, name: 'ping', arguments: '{}' },
      toolset,
      {
        signal,
        session,
        log,
      },
    );
    if (result.outcome !== 'ok' || result.output !== 'pong') failures++;
    if (i >= warmup) samples.push(result.durationMs);
  }
  samples.sort((a, b) => a - b);
  const at = (p: number) => percentile(samples, p) ?? Number.NaN;
  return {
    label,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: samples.at(-1) ?? Number.NaN,
    failures,
  };
}

/** The section's lines of the printed table. */
export function mcpBenchLines(r: McpBenchResult): string[] {
  const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : '—');
  const cell = (s: string, w: number) => s.padStart(w);
  return [
    `4. MCP call overhead (ms per call through the executor, ${r.calls} sequential calls after ${r.warmup} warm-up)`,
    `   ${'tool'.padEnd(32)}${cell('p50', 8)}${cell('p90', 8)}${cell('p99', 8)}${cell('max', 8)}  check`,
    ...r.rows.map(
      (row) =>
        `   ${row.label.padEnd(32)}${cell(ms(row.p50), 8)}${cell(ms(row.p90), 8)}${cell(ms(row.p99), 8)}${cell(ms(row.max), 8)}  ${row.failures ? `FAILED (${row.failures} calls)` : 'ok'}`,
    ),
    `   MCP overhead over a local tool: p50 ${ms(r.overheadMs.p50)} ms, p99 ${ms(r.overheadMs.p99)} ms (trivial tool: the JSON-RPC round trip over stdio)`,
  ];
}
