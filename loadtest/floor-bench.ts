/**
 * Floor bench: server CPU per forwarded delta, Troupe against the least any
 * Node server does for the same delta (lib/floor-child.ts: undici reads
 * the LLM's stream, `ws` sends each text delta, nothing else). The same
 * simulator, client and conversation drive both, one after the other, round
 * after round, so load on the machine weighs on both alike. Troupe's own
 * cost per delta is its figure less the floor's; the floor is what Node's
 * HTTP client, the WebSocket library and the kernel's loopback take.
 *
 * Prints a table; writes loadtest/reports/floor-bench.json.
 *
 * @example npm run bench:floor
 * @example npm run bench:floor -- --sessions 200 --seconds 30 --rounds 3
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { epochNow, readStamps } from '../src/testing/simulator/stamp.js';
import { splitPerDelta, summarizeGc, type GcStats } from './lib/child-ipc.js';
import { startFloorChild, startServerChild, startSimChild, type Child } from './lib/children.js';
import { CONVERSATION, LOADTEST_SCRIPT } from './lib/scenarios.js';
import { percentile } from './lib/stats.js';
import type { CpuSplit } from './report/model.js';
import { gcLine, splitText } from './report/table.js';

const USAGE = `npm run bench:floor -- [options]
  --sessions N   concurrent sessions (default 200)
  --seconds S    measured seconds per phase (default 30)
  --warmup S     seconds before measuring, sessions already running (default 10)
  --rounds N     rounds of floor then Troupe (default 3)
  --think MS     pause between a reply and the next line (default 1000)
  --ttft MS      simulator time to first token (default 200)
  --tps N        simulator tokens per second per stream (default 50)
  --reply-words N  every reply N words (default: the load test's conversation); with
                 one word a turn is one delta, and the CPU per turn is what a turn
                 costs beside its deltas
  --only T       run one target only: floor or troupe
  --cpu-prof DIR write a V8 CPU profile of each server process into DIR/<target>-<round>`;

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '30' },
    warmup: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    think: { type: 'string', default: '1000' },
    ttft: { type: 'string', default: '200' },
    tps: { type: 'string', default: '50' },
    'reply-words': { type: 'string' },
    only: { type: 'string' },
    'cpu-prof': { type: 'string' },
    help: { type: 'boolean' },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const count = (name: keyof typeof values): number => {
  const n = Number(values[name]);
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`--${name} must be a positive number, got ${String(values[name])}.\n${USAGE}`);
    process.exit(2);
  }
  return n;
};
const SESSIONS = count('sessions');
const SECONDS = count('seconds');
const WARMUP = count('warmup');
const ROUNDS = count('rounds');
const THINK_MS = count('think');
const REPLY_WORDS = values['reply-words'] === undefined ? undefined : count('reply-words');
if (REPLY_WORDS !== undefined && !Number.isInteger(REPLY_WORDS)) {
  console.error(`--reply-words must be a whole number, got ${REPLY_WORDS}.\n${USAGE}`);
  process.exit(2);
}
/** Sessions open over this long at the start of a phase. */
const RAMP_MS = 5_000;
const TARGETS = (['floor', 'troupe'] as const).filter(
  (t) => values.only === undefined || values.only === t,
);
if (TARGETS.length === 0) {
  console.error(`--only takes floor or troupe, got ${values.only}.\n${USAGE}`);
  process.exit(2);
}

type TargetName = 'floor' | 'troupe';
interface Quantiles {
  p50: number;
  p95: number;
  p99: number;
}

/** p50 / p95 / p99 of samples (sorted here). */
function quantiles(samples: number[]): Quantiles {
  samples.sort((a, b) => a - b);
  const at = (q: number): number => percentile(samples, q) ?? NaN;
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99) };
}
interface Phase {
  target: TargetName;
  round: number;
  deltas: number;
  deltasPerS: number;
  /** Replies ended (response.done) over the measured seconds. */
  turns: number;
  /**
   * Deltas per reply, counted over the replies that ended in the measured
   * seconds (a reply's deltas can straddle the window's edges).
   */
  deltasPerTurn: number;
  cpuPercent: number;
  usPerDelta: number;
  /** `usPerDelta` split: user and system, and off the main thread (null without deltas). */
  split: CpuSplit | null;
  usPerTurn: number;
  /** Added latency per delta (ms): the simulator's send → the client's receipt. */
  added: Quantiles;
  /** Time to first token (ms): the client's response.create → the first delta. */
  ttft: Quantiles;
  errors: number;
  load: number;
  /** The server's GC pauses over the measured seconds. */
  gc: GcStats;
}

/** Drives `SESSIONS` scripted conversations against `url` until `stop` is called. */
function drive(url: string): {
  deltas: () => number;
  turns: () => number;
  /** Deltas of the replies that have ended. */
  turnDeltas: () => number;
  errors: () => number;
  /** Added latencies and times to first token (ms) from now on. */
  measure: () => { added: number[]; ttft: number[] };
  stop: () => Promise<void>;
} {
  let deltas = 0;
  let turns = 0;
  let turnDeltas = 0;
  let samples: { added: number[]; ttft: number[] } | undefined;
  let errors = 0;
  let stopping = false;
  const sockets: WebSocket[] = [];
  const closed: Promise<void>[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const timer = setTimeout(
      () => {
        if (stopping) return;
        const ws = new WebSocket(`${url}?character=plain&greeting=0`);
        sockets.push(ws);
        closed.push(new Promise((resolve) => ws.once('close', () => resolve())));
        let turn = i;
        let askedAt: number | undefined;
        let replyDeltas = 0;
        const ask = (): void => {
          if (stopping || ws.readyState !== WebSocket.OPEN) return;
          const text = CONVERSATION[turn++ % CONVERSATION.length]!.user;
          ws.send(
            JSON.stringify({
              type: 'conversation.item.create',
              item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
            }),
          );
          ws.send(JSON.stringify({ type: 'response.create' }));
          askedAt = epochNow();
        };
        ws.on('message', (data) => {
          const now = epochNow();
          const event = JSON.parse(String(data)) as { type: string; delta?: string };
          const type = event.type;
          if (type === 'response.output_text.delta') {
            deltas++;
            replyDeltas++;
            if (samples !== undefined) {
              for (const t of readStamps(event.delta ?? '').sentAt) samples.added.push(now - t);
              if (askedAt !== undefined) samples.ttft.push(now - askedAt);
            }
            askedAt = undefined;
          } else if (type === 'session.created') ask();
          else if (type === 'response.done') {
            turns++;
            turnDeltas += replyDeltas;
            replyDeltas = 0;
            setTimeout(ask, THINK_MS);
          } else if (type === 'error') errors++;
        });
        ws.on('error', () => errors++);
      },
      (i * RAMP_MS) / SESSIONS,
    );
    timer.unref();
  }
  return {
    deltas: () => deltas,
    turns: () => turns,
    turnDeltas: () => turnDeltas,
    errors: () => errors,
    measure: () => (samples = { added: [], ttft: [] }),
    async stop() {
      stopping = true;
      for (const ws of sockets) ws.close(1000);
      await Promise.all(closed);
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function phase(target: TargetName, round: number, sim: Child): Promise<Phase> {
  const profDir = values['cpu-prof'];
  const cpuProfDir =
    profDir === undefined ? undefined : path.resolve(profDir, `${target}-${round}`);
  const child =
    target === 'floor'
      ? await startFloorChild(sim.url, cpuProfDir)
      : await startServerChild({
          ...(cpuProfDir === undefined ? {} : { cpuProfDir }),
          env: {
            PORT: '0',
            LLM_BASE_URL: sim.url,
            CHARACTERS_DIR: 'characters',
            CHARACTERS_WATCH: 'false',
            CHARACTERS_MCP: 'false',
            LOG_LEVEL: 'warn',
            MAX_SESSIONS: String(SESSIONS * 2 + 10),
            // The forwarder refuses nobody: neither does Troupe here, so both carry the same load.
            OVERLOAD_LAG_MS: '0',
            OVERLOAD_BUSY: '0',
            STT_PROVIDER: 'none',
            TTS_PROVIDER: 'none',
          },
        });
  try {
    const run = drive(child.url);
    await sleep(RAMP_MS + WARMUP * 1000);
    await child.stats();
    const from = run.deltas();
    const fromTurns = run.turns();
    const fromTurnDeltas = run.turnDeltas();
    const samples = run.measure();
    const load = os.loadavg()[0]!;
    await sleep(SECONDS * 1000);
    const stats = await child.stats();
    const deltas = run.deltas() - from;
    const turns = run.turns() - fromTurns;
    const turnDeltas = run.turnDeltas() - fromTurnDeltas;
    await run.stop();
    return {
      target,
      round,
      deltas,
      deltasPerS: deltas / SECONDS,
      turns,
      deltasPerTurn: turns > 0 ? turnDeltas / turns : NaN,
      cpuPercent: stats.cpuPercent,
      usPerDelta: deltas > 0 ? (stats.cpuS * 1e6) / deltas : NaN,
      split: deltas > 0 ? splitPerDelta(stats, deltas) : null,
      usPerTurn: turns > 0 ? (stats.cpuS * 1e6) / turns : NaN,
      added: quantiles(samples.added),
      ttft: quantiles(samples.ttft),
      errors: run.errors(),
      load,
      gc: stats.gc,
    };
  } finally {
    await child.close();
  }
}

/** `--reply-words`: one reply to every line, of that many words. */
const script =
  REPLY_WORDS === undefined
    ? LOADTEST_SCRIPT
    : {
        rules: [],
        fallback: {
          parts: [{ text: Array.from({ length: REPLY_WORDS }, (_, i) => `word${i}`).join(' ') }],
        },
      };
const sim = await startSimChild({
  script,
  latency: { ttftMs: count('ttft'), tokensPerSec: count('tps') },
  // As in the load test: every fragment carries its send time, and each delta's added latency is measured.
  stamp: true,
});
const phases: Phase[] = [];
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const target of TARGETS) {
      const p = await phase(target, round, sim);
      phases.push(p);
      console.log(
        `round ${round} ${target.padEnd(6)} ${p.usPerDelta.toFixed(1).padStart(6)} µs per delta${splitText(p.split ?? undefined)} · ` +
          `${p.usPerTurn.toFixed(0)} µs per turn (${p.deltasPerTurn.toFixed(1)} deltas) · ` +
          `${p.deltasPerS.toFixed(0)} deltas/s · CPU ${p.cpuPercent.toFixed(0)}% · ` +
          `added p50 ${p.added.p50.toFixed(2)} p95 ${p.added.p95.toFixed(2)} p99 ${p.added.p99.toFixed(2)} ms · ` +
          `TTFT p50 ${p.ttft.p50.toFixed(1)} p95 ${p.ttft.p95.toFixed(1)} ms · ` +
          `errors ${p.errors} · load ${p.load.toFixed(2)}\n        ${gcLine(summarizeGc(p.gc, SECONDS))}`,
      );
    }
  }
} finally {
  await sim.close();
}

const median = (target: TargetName, of: (p: Phase) => number = (p) => p.usPerDelta): number =>
  percentile(
    phases
      .filter((p) => p.target === target)
      .map(of)
      .sort((a, b) => a - b),
    0.5,
  ) ?? NaN;
const floor = median('floor');
const troupe = median('troupe');
const perTurn = (p: Phase): number => p.usPerTurn;
const floorTurn = median('floor', perTurn);
const troupeTurn = median('troupe', perTurn);
console.log(
  `\nserver CPU per delta, median of ${ROUNDS} (${SESSIONS} sessions, think ${THINK_MS} ms, ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'CPU'}, Node ${process.version})`,
);
console.log(`  floor (undici + ws, nothing else)     ${floor.toFixed(1)} µs`);
console.log(`  Troupe                                ${troupe.toFixed(1)} µs`);
console.log(`  Troupe's own (Troupe − floor)         ${(troupe - floor).toFixed(1)} µs`);
console.log(
  `server CPU per turn: floor ${floorTurn.toFixed(0)} µs, Troupe ${troupeTurn.toFixed(0)} µs, Troupe's own ${(troupeTurn - floorTurn).toFixed(0)} µs`,
);
const out = path.join('loadtest', 'reports', 'floor-bench.json');
await mkdir(path.dirname(out), { recursive: true });
await writeFile(
  out,
  JSON.stringify(
    {
      sessions: SESSIONS,
      seconds: SECONDS,
      thinkMs: THINK_MS,
      replyWords: REPLY_WORDS ?? null,
      phases,
      floorPerTurn: floorTurn,
      troupePerTurn: troupeTurn,
      floor,
      troupe,
      own: troupe - floor,
    },
    null,
    2,
  ),
);
console.log(`report: ${out}`);
