/**
 * Engine bench: how fast the turn engine's hot parts are, and what a tool turn
 * costs in CPU next to openai-node's `runTools` and the AI SDK's `streamText`.
 *
 * 1. StreamAssembler throughput on in-memory chunk sequences (openai, vLLM shapes).
 * 2. Tool round overhead: stream end of round 0 → request of round 1, minus handler time.
 * 3. CPU and wall time per two-round tool turn, Troupe vs runTools vs streamText.
 * 4. MCP call overhead: a trivial tool on an stdio MCP server vs a local tool (lib/mcp-call-bench.ts).
 *
 * Prints a table and writes loadtest/reports/engine-bench.json. Targets are
 * printed as PASS/FAIL; the exit code only says whether the bench itself ran.
 *
 * Section 3 starts each engine's own code from a cold JIT: with a longer
 * warm-up every engine's CPU per turn falls by ~25%, the ratios barely move.
 * For steady-state numbers run longer:
 *
 * @example npm run bench
 * @example npm run bench -- --warmup 1000 --turns 600
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startSimChild } from './lib/children.js';
import { HELP_FLAG, readCommandLine, type CommandInfo } from '../src/cli/command-line.js';
import { benchBackgroundResult } from './background-bench.js';
import {
  ASM_TEXT_CHUNKS,
  benchAssembler,
  openaiShapeChunks,
  vllmShapeChunks,
  type AssemblerResult,
} from './lib/engine-bench/assembler.js';
import { BENCH_SCRIPT, fmt, pad } from './lib/engine-bench/common.js';
import { createEngines } from './lib/engine-bench/engines.js';
import {
  H2H_BLOCKS,
  H2H_TARGET_RATIO,
  H2H_TURNS,
  H2H_WARMUP_TURNS,
  headToHead,
  ratios,
  type EngineResult,
  type HeadToHeadOptions,
  type Ratios,
} from './lib/engine-bench/head-to-head.js';
import {
  OVERHEAD_TARGET_P99_MS,
  OVERHEAD_TURNS,
  OVERHEAD_WARMUP_TURNS,
  overheadChild,
  overheadInProcess,
  type OverheadResult,
} from './lib/engine-bench/round-overhead.js';
import { benchHandoff, formatHandoffBench } from './handoff-bench.js';
import { benchMcpCalls, mcpBenchLines } from './lib/mcp-call-bench.js';
import { engineBenchSection } from './report/engine-section.js';
import { renderHtmlReport } from './report/html.js';
import { reportMachine } from './report/machine.js';

const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPORT_PATH = path.join(ROOT_DIR, 'loadtest', 'reports', 'engine-bench.json');
const HTML_PATH = path.join(ROOT_DIR, 'loadtest', 'reports', 'engine-bench.html');

/**
 * `global.gc` when node runs with --expose-gc, else none. Not forced on: a
 * full GC between blocks measurably raises the CPU per turn of every engine
 * after it (~1.5× here), so it is only used when asked for.
 */
function findGc(): { gc: (() => void) | null; how: string } {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return { gc: exposed, how: 'global.gc' };
  return { gc: null, how: 'none (run node with --expose-gc to force one)' };
}

// ---------------------------------------------------------------------------
// Report

function machine(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cpuCount: cpus.length,
    availableParallelism: os.availableParallelism(),
    node: process.version,
    v8: process.versions.v8,
    platform: `${process.platform} ${os.release()}`,
    arch: process.arch,
    totalMemGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
  };
}

function printTable(report: {
  machine: Record<string, unknown>;
  gc: string;
  assembler: AssemblerResult[];
  overhead: { rows: OverheadResult[] };
  headToHead: HeadToHeadOptions & { results: EngineResult[]; ratios: Ratios };
}): void {
  const m = report.machine;
  const lines: string[] = [];
  lines.push(
    `Troupe engine bench — ${String(m.cpuModel)} × ${String(m.cpuCount)}, Node ${String(m.node)}, gc between blocks: ${report.gc}`,
  );
  lines.push('');
  lines.push(
    '1. Assembler throughput (StreamAssembler, chunks in memory, fresh assembler per pass)',
  );
  lines.push(`   ${pad('shape', 44)}${pad('chunks/pass', 13, true)}${pad('M chunks/s', 12, true)}`);
  for (const a of report.assembler) {
    lines.push(
      `   ${pad(a.shape, 44)}${pad(String(a.chunksPerPass), 13, true)}${pad(fmt(a.mChunksPerSec), 12, true)}`,
    );
  }
  lines.push('');
  lines.push(
    `2. Tool round overhead excl. handler (ms, ${OVERHEAD_TURNS} turns after ${OVERHEAD_WARMUP_TURNS} warm-up)   target p99 ≤ ${OVERHEAD_TARGET_P99_MS} ms`,
  );
  lines.push(
    `   ${pad('measure', 40)}${pad('p50', 8, true)}${pad('p90', 8, true)}${pad('p99', 8, true)}${pad('max', 8, true)}  target`,
  );
  for (const r of report.overhead.rows) {
    // The target is judged on (b): simulator in its own process, arrival stamped there.
    const info = !r.label.startsWith('(b) ');
    const verdict =
      r.failures > 0
        ? `FAILED (${r.failures} turns: ${r.firstProblem})`
        : info
          ? '(info)'
          : r.ms.p99 <= OVERHEAD_TARGET_P99_MS
            ? 'PASS'
            : 'FAIL';
    lines.push(
      `   ${pad(r.label, 40)}${pad(fmt(r.ms.p50, 3), 8, true)}${pad(fmt(r.ms.p90, 3), 8, true)}${pad(fmt(r.ms.p99, 3), 8, true)}${pad(fmt(r.ms.max, 3), 8, true)}  ${verdict}`,
    );
  }
  lines.push(
    '   (b) is the measure: last chunk of round 0 → round-1 request arriving at the simulator, in its own process.',
    "   (b') stops at the runner's own request call; (a) shares one event loop and heap with the simulator (GC of both).",
  );
  lines.push('');
  lines.push(
    `3. CPU per two-round tool turn (${report.headToHead.turns} turns each after ${report.headToHead.warmupTurns} warm-up, ${report.headToHead.blocks} interleaved blocks, child-process sim)`,
  );
  lines.push(
    `   ${pad('engine', 20)}${pad('CPU µs p50', 12, true)}${pad('mean', 8, true)}${pad('p90', 8, true)}${pad('wall ms p50', 13, true)}${pad('mean', 8, true)}${pad('p90', 8, true)}  check`,
  );
  for (const r of report.headToHead.results) {
    const check = r.failures > 0 ? `FAILED (${r.failures} turns: ${r.firstProblem})` : 'ok';
    lines.push(
      `   ${pad(r.label, 20)}${pad(fmt(r.cpuUs.p50, 0), 12, true)}${pad(fmt(r.cpuUs.mean, 0), 8, true)}${pad(fmt(r.cpuUs.p90, 0), 8, true)}${pad(fmt(r.wallMs.p50), 13, true)}${pad(fmt(r.wallMs.mean), 8, true)}${pad(fmt(r.wallMs.p90), 8, true)}  ${check}`,
    );
  }
  const q = report.headToHead.ratios;
  lines.push(
    `   Troupe ÷ runTools   (mean CPU): ${fmt(q.vsRunTools)}   (p50: ${fmt(q.vsRunToolsP50)})`,
  );
  lines.push(
    `   Troupe ÷ streamText (mean CPU): ${fmt(q.vsStreamText)}   (p50: ${fmt(q.vsStreamTextP50)})`,
  );
  lines.push(
    `   target Troupe ≤ ${H2H_TARGET_RATIO}× the better of the two (${q.betterEngine}, ${fmt(q.betterMeanUs, 0)} µs → ≤ ${fmt(q.betterMeanUs * H2H_TARGET_RATIO, 0)} µs): ${fmt(q.vsBetter)}× ${q.verdict}`,
  );
  console.log(lines.join('\n'));
}

// ---------------------------------------------------------------------------

/** `npm run bench`: its help and flags. */
const BENCH_COMMAND: CommandInfo = {
  usage: 'npm run bench -- [flags]',
  summary:
    'The engine benchmark: assembler throughput, tool round overhead, CPU per tool turn next to openai runTools and the AI SDK, and MCP call overhead.',
  flags: [
    { name: 'turns', value: 'N', help: 'measured turns per engine in section 3 (default 300)' },
    { name: 'warmup', value: 'N', help: 'warm-up turns per engine in section 3 (default 30)' },
    { name: 'blocks', value: 'N', help: 'interleaved blocks in section 3 (default 6)' },
    HELP_FLAG,
  ],
  more: 'Writes loadtest/reports/engine-bench.json and .html.',
  helpCommand: 'npm run bench -- --help',
};

/** Section 3 length from the command line (`npm run bench -- --turns 900 --warmup 600`). */
function parseCli(argv: string[]): HeadToHeadOptions {
  readCommandLine(argv, BENCH_COMMAND, 'bench');
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      turns: { type: 'string' },
      warmup: { type: 'string' },
      blocks: { type: 'string' },
    },
  });
  const count = (flag: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) {
      throw new Error(`--${flag} must be an integer >= ${min} (got "${raw}").`);
    }
    return n;
  };
  return {
    turns: count('turns', values.turns, H2H_TURNS, 1),
    warmupTurns: count('warmup', values.warmup, H2H_WARMUP_TURNS, 0),
    blocks: count('blocks', values.blocks, H2H_BLOCKS, 1),
  };
}

async function main(): Promise<void> {
  const h2hOptions = parseCli(process.argv.slice(2));
  const started = performance.now();
  const { gc, how } = findGc();
  // The AI SDK prints warnings to the console by default; they would land in the table.
  globalThis.AI_SDK_LOG_WARNINGS = false;

  process.stderr.write('engine-bench: 1/3 assembler throughput…\n');
  const assembler = benchAssembler([
    { shape: `openai: ${ASM_TEXT_CHUNKS} text + 2 parallel calls`, chunks: openaiShapeChunks() },
    { shape: 'vllm: same, name + usage on every chunk', chunks: vllmShapeChunks() },
  ]);

  process.stderr.write('engine-bench: 2/3 tool round overhead (in-process simulator)…\n');
  const inProcess = await overheadInProcess();

  const sim = await startSimChild({
    profile: 'openai',
    script: BENCH_SCRIPT,
    // The overhead is read from the whole log of its turns (two requests a turn).
    keepRequests: (OVERHEAD_WARMUP_TURNS + OVERHEAD_TURNS) * 2 + 10,
  });
  let child: Awaited<ReturnType<typeof overheadChild>>;
  let h2h: Awaited<ReturnType<typeof headToHead>>;
  try {
    process.stderr.write('engine-bench: 2/3 tool round overhead (child-process simulator)…\n');
    child = await overheadChild(sim.url);
    process.stderr.write('engine-bench: 3/3 CPU per turn, head to head…\n');
    h2h = await headToHead(await createEngines(sim.url), gc, h2hOptions);
  } finally {
    await sim.close();
  }
  process.stderr.write('engine-bench: MCP call overhead (stdio server)…\n');
  const mcp = await benchMcpCalls();

  process.stderr.write('engine-bench: background tool result → client…\n');
  const background = await benchBackgroundResult();

  const report = {
    generatedAt: new Date().toISOString(),
    machine: machine(),
    gc: how,
    durationS: Number(((performance.now() - started) / 1000).toFixed(1)),
    assembler,
    overhead: {
      targetP99Ms: OVERHEAD_TARGET_P99_MS,
      turns: OVERHEAD_TURNS,
      warmupTurns: OVERHEAD_WARMUP_TURNS,
      rows: [child.simSide, child.runnerSide, inProcess.simSide, inProcess.runnerSide],
    },
    background,
    headToHead: {
      ...h2hOptions,
      blockOrders: h2h.order,
      targetRatio: H2H_TARGET_RATIO,
      results: h2h.results,
      ratios: ratios(h2h.results),
    },
    mcp,
  };
  printTable(report);
  console.log(['', ...mcpBenchLines(mcp)].join('\n'));
  // Issue 17: a handoff between characters, over a turn with one tool round.
  process.stderr.write('engine-bench: handoff between characters…\n');
  const handoff = await benchHandoff();
  console.log(`\n${formatHandoffBench(handoff)}`);
  const bgPass = background.p95Ms <= background.targetMs ? 'PASS' : 'FAIL';
  console.log(
    `\nbackground tool result → client (handler end → first follow-up text delta, idle, ${background.runs} runs): ` +
      `p50 ${fmt(background.p50Ms)} ms, p95 ${fmt(background.p95Ms)} ms, max ${fmt(background.maxMs)} ms ` +
      `(target p95 ≤ ${background.targetMs} ms: ${bgPass})`,
  );
  await mkdir(path.dirname(REPORT_PATH), { recursive: true });
  await writeFile(REPORT_PATH, `${JSON.stringify(report, null, 2)}\n`);
  // The same HTML report as the load test's (which shows the latest bench too).
  const section = engineBenchSection(JSON.parse(JSON.stringify(report)) as unknown);
  await writeFile(
    HTML_PATH,
    renderHtmlReport({
      kind: 'troupe-loadtest',
      version: 1,
      generatedAt: report.generatedAt,
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
      machine: reportMachine(),
      target: { url: 'in process: the engines against the LLM simulator', sim: null },
      phases: [],
      comparisons: [],
      targets: [],
      ...(section === undefined ? {} : { engineBench: section }),
    }),
  );
  console.log(
    `\nreport: ${path.relative(process.cwd(), REPORT_PATH)}, ${path.relative(process.cwd(), HTML_PATH)} (${report.durationS} s)`,
  );
}

main().catch((err: unknown) => {
  console.error('engine-bench failed:', err);
  process.exitCode = 1;
});
