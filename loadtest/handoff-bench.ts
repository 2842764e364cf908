/**
 * Handoff bench: the user's message → the first text delta of the character
 * taking over, against a turn with one tool round (the same two LLM
 * requests, without the switch). The difference is what a handoff costs
 * Troupe: the first response's end, the switch of character, session.updated
 * and the second response's start. Sessions run in process against the
 * in-process simulator (no model latency), on the seed characters.
 */
import pino from 'pino';
import { loadCharacters } from '../src/characters/registry.js';
import { loadConfig } from '../src/config/index.js';
import { createLlmClient } from '../src/llm/client.js';
import type { ClientEvent, ServerEvent } from '../src/session/events.js';
import { createSession } from '../src/session/session.js';
import { DEMO_SCRIPT } from '../src/testing/scripts/demo.js';
import { startSimulator } from '../src/testing/simulator/index.js';

/** The goal: a handoff costs at most this over a turn with one tool round (p50). */
export const HANDOFF_TARGET_MS = 5;
/** Measured turns per kind, after the warm-up, interleaved. */
const TURNS = 120;
const WARMUP = 20;

/** One kind of turn, measured. */
export interface HandoffBenchRow {
  label: string;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
}

/** What the handoff bench found. */
export interface HandoffBenchReport {
  targetMs: number;
  turns: number;
  rows: HandoffBenchRow[];
  /** Handoff p50 − tool-round p50, ms. */
  overheadP50Ms: number;
  overheadP90Ms: number;
}

function userTurn(text: string): ClientEvent[] {
  return [
    {
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
    },
    { type: 'response.create' },
  ];
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** Runs the bench; returns its rows (print them with {@link formatHandoffBench}). */
export async function benchHandoff(): Promise<HandoffBenchReport> {
  const log = pino({ level: 'silent' });
  const config = loadConfig({ CHARACTERS_DIR: 'characters' });
  const sim = await startSimulator({ profile: 'openai', script: DEMO_SCRIPT, latency: {} });
  const registry = await loadCharacters({ dir: 'characters', watch: false, log });
  try {
    const llm = await createLlmClient({ baseURL: sim.url, log, maxRetries: 0 });
    const kinds = [
      // One LLM request, a text reply.
      {
        label: 'plain turn (weather)',
        character: 'weather',
        text: 'What is the weather in Glasgow?',
      },
      // Two requests: a tool call, then the reply.
      {
        label: 'one tool round (weather)',
        character: 'weather',
        text: 'And the forecast for 3 days?',
      },
      // Two requests: the transfer, then the new character's reply.
      {
        label: 'handoff (concierge → weather)',
        character: 'concierge',
        text: 'Put me through for the weather in Glasgow.',
      },
    ];
    const times = kinds.map(() => [] as number[]);
    // The handoff itself: the first response's response.done → the second's response.created.
    const switches: number[] = [];
    let n = 0;
    for (let i = 0; i < WARMUP + TURNS; i++) {
      for (const [k, kind] of kinds.entries()) {
        let first: number | undefined;
        let doneAt: number | undefined;
        let switchMs: number | undefined;
        let resolveFirst!: () => void;
        const gotFirst = new Promise<void>((r) => (resolveFirst = r));
        const session = await createSession({
          id: `bench_${n++}`,
          character: registry.get(kind.character)!,
          characters: {
            get: (id) => registry.get(id),
            ids: () => registry.list().map((c) => c.id),
          },
          llm: () => Promise.resolve(llm),
          settings: config.sessions,
          send: (event: ServerEvent) => {
            if (event.type === 'response.done') doneAt = performance.now();
            if (event.type === 'response.created' && doneAt !== undefined) {
              switchMs ??= performance.now() - doneAt;
            }
            if (first === undefined && event.type === 'response.output_text.delta') {
              first = performance.now();
              resolveFirst();
            }
          },
          log,
        });
        session.start();
        const [item, create] = userTurn(kind.text);
        await session.handle(item!);
        const at = performance.now();
        await session.handle(create!, at);
        await gotFirst;
        // The handoff's second response may still run: let it end before the next turn.
        await session.idle();
        await session.idle();
        session.close();
        if (i >= WARMUP) times[k]!.push(first! - at);
        if (i >= WARMUP && switchMs !== undefined) switches.push(switchMs);
      }
    }
    const rows = kinds.map((kind, k) => {
      const sorted = [...times[k]!].sort((a, b) => a - b);
      return {
        label: kind.label,
        p50Ms: quantile(sorted, 0.5),
        p90Ms: quantile(sorted, 0.9),
        p99Ms: quantile(sorted, 0.99),
      };
    });
    const sortedSwitches = [...switches].sort((a, b) => a - b);
    rows.push({
      label: 'the switch: response.done → next response.created',
      p50Ms: quantile(sortedSwitches, 0.5),
      p90Ms: quantile(sortedSwitches, 0.9),
      p99Ms: quantile(sortedSwitches, 0.99),
    });
    return {
      targetMs: HANDOFF_TARGET_MS,
      turns: TURNS,
      rows,
      overheadP50Ms: rows[2]!.p50Ms - rows[1]!.p50Ms,
      overheadP90Ms: rows[2]!.p90Ms - rows[1]!.p90Ms,
    };
  } finally {
    await registry.close();
    await sim.close();
  }
}

/** The bench as lines for the console. */
export function formatHandoffBench(r: HandoffBenchReport): string {
  const f = (x: number) => x.toFixed(2).padStart(8);
  const lines = [
    `Handoff: user's message → first delta of the new character (${r.turns} turns each, in-process sim, no model latency)`,
    `   ${'turn'.padEnd(52)}${'p50 ms'.padStart(8)}${'p90 ms'.padStart(8)}${'p99 ms'.padStart(8)}`,
    ...r.rows.map(
      (row) => `   ${row.label.padEnd(52)}${f(row.p50Ms)}${f(row.p90Ms)}${f(row.p99Ms)}`,
    ),
    `   handoff overhead over a turn with one tool round: p50 ${r.overheadP50Ms.toFixed(2)} ms, p90 ${r.overheadP90Ms.toFixed(2)} ms` +
      `  ${r.overheadP50Ms <= r.targetMs ? 'ok' : 'OVER'} (goal ≤ ${r.targetMs} ms)`,
  ];
  return lines.join('\n');
}

// `tsx loadtest/handoff-bench.ts` runs it alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  benchHandoff()
    .then((r) => console.log(formatHandoffBench(r)))
    .catch((err: unknown) => {
      console.error('handoff-bench failed:', err);
      process.exitCode = 1;
    });
}
