/**
 * Resume store bench: what writing a session's state costs per turn, against
 * a real redis-server on 127.0.0.1 (Debian's, started here on a free port,
 * like the deploy tests). A real server and simulator hold conversations of
 * a few sizes; each is then written as the server writes it after a turn —
 * the state in parts (`session.snapshotParts()`), only the changed ones (the
 * turn just ended) sent, Redis's atomic save (EVALSHA) — and timed: the
 * synchronous part (what the event loop spends) and the whole write (the
 * await on Redis included, which the session never waits for). The same
 * turns are also written whole (the record in one value, the layout
 * before), write by write in alternation, so load weighs on both alike. Also counts the store writes per turn and per delta while the
 * conversations are held: they follow the session's changes (at most one
 * per 50 ms), never its deltas.
 *
 * Prints a table; writes loadtest/reports/resume-bench.json.
 *
 * @example npm run bench:resume
 * @example npm run bench:resume -- --writes 2000
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { loadCharacters } from '../src/characters/registry.js';
import { loadConfig } from '../src/config/index.js';
import { createLlmClient } from '../src/llm/client.js';
import { createMetrics } from '../src/metrics/index.js';
import { createLogger, startServer } from '../src/server/index.js';
import { createResumer } from '../src/server/resume.js';
import {
  createMemoryResumeStore,
  createRedisResumeStore,
  type ResumeStore,
} from '../src/server/resume-store.js';
import { joinParts, sessionStateSource } from '../src/server/session-state.js';
import { restoreSession, type SessionState } from '../src/session/session.js';
import { startSimulator } from '../src/testing/simulator/index.js';
import { hasProgram, startRedis } from './lib/engines.js';
import { CONVERSATION, LOADTEST_SCRIPT } from './lib/scenarios.js';
import { percentile } from './lib/stats.js';

/** Conversation sizes measured, in turns (two items each, plus the greeting). */
const SIZES = [5, 20, 50] as const;
const TARGET_P99_MS = 1;

const { values } = parseArgs({
  options: { writes: { type: 'string', default: '1000' }, help: { type: 'boolean' } },
});
if (values.help) {
  console.log('Usage: npm run bench:resume -- [--writes N]  (writes timed per size, default 1000)');
  process.exit(0);
}
const WRITES = Number(values.writes);
if (!Number.isInteger(WRITES) || WRITES < 10) {
  console.error(`bench:resume: --writes ${values.writes}: expected a whole number of 10 or more`);
  process.exit(2);
}
if (!hasProgram('redis-server')) {
  console.error('bench:resume needs redis-server: apt-get install redis-server');
  process.exit(1);
}

const silent = createLogger({ level: 'silent', content: false });

/** Holds a conversation of each size through a real server; returns their last stored states. */
async function holdConversations(): Promise<{
  states: Map<number, SessionState>;
  writesPerTurn: number;
  writesPerDelta: number;
}> {
  const sim = await startSimulator({
    script: LOADTEST_SCRIPT,
    latency: { ttftMs: 0, tokensPerSec: 2_000 },
  });
  // Written as text at every change, as Redis is.
  const memory = createMemoryResumeStore({ readsLive: false });
  let writes = 0;
  /** Each key's record as the writes built it: the head and the parts. */
  const latest = new Map<string, { head: string; parts: string[] }>();
  const store: ResumeStore = {
    ...memory,
    save(key, update, ttlS) {
      writes++;
      const held = latest.get(key) ?? { head: '', parts: [] };
      held.parts.length = update.keep;
      held.parts.push(...update.parts);
      held.head = update.head;
      latest.set(key, held);
      return memory.save(key, update, ttlS);
    },
  };
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LLM_BASE_URL: sim.url,
    CHARACTERS_DIR: 'characters',
    CHARACTERS_WATCH: 'false',
    LOG_LEVEL: 'silent',
    // This process also runs the simulator and the clients: its busy share is theirs too.
    OVERLOAD_BUSY: '0',
    STT_PROVIDER: 'none',
    TTS_PROVIDER: 'none',
  });
  const server = await startServer({ config, logger: silent, resumeStore: store });
  const states = new Map<number, SessionState>();
  let turns = 0;
  let deltas = 0;
  try {
    const ws = new WebSocket(`${server.wsUrl}?character=plain`, { perMessageDeflate: false });
    const events: Array<(e: { type: string }) => void> = [];
    ws.on('message', (d) => {
      const e = JSON.parse(String(d)) as { type: string };
      if (e.type === 'response.output_text.delta') deltas++;
      for (const f of events.splice(0)) f(e);
    });
    const next = (type: string): Promise<void> =>
      new Promise((resolve) => {
        const wait = (e: { type: string }): void => {
          if (e.type === type) resolve();
          else events.push(wait);
        };
        events.push(wait);
      });
    await next('session.created');
    const before = writes;
    for (let t = 1; t <= SIZES.at(-1)!; t++) {
      const line = CONVERSATION[t % CONVERSATION.length]!.user;
      const done = next('response.done');
      ws.send(
        JSON.stringify({
          type: 'conversation.item.create',
          item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: line }] },
        }),
      );
      ws.send(JSON.stringify({ type: 'response.create' }));
      await done;
      turns++;
      if ((SIZES as readonly number[]).includes(t)) {
        // The last write of this turn: after the debounce.
        const wrote = writes;
        await new Promise((r) => setTimeout(r, 200));
        if (writes === wrote && latest.size === 0) throw new Error('nothing was written');
        const held = [...latest.values()].at(-1)!;
        const record = JSON.parse(held.head) as { state: SessionState };
        states.set(t, joinParts(record.state, held.parts) as SessionState);
      }
    }
    const measured = writes - before;
    ws.close();
    return { states, writesPerTurn: measured / turns, writesPerDelta: measured / deltas };
  } finally {
    await server.close();
    await sim.close();
  }
}

/** Redis's CPU time so far (user + system), seconds. */
async function redisCpuS(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string): number => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1]);
  return field('used_cpu_user') + field('used_cpu_sys');
}

function summary(samples: number[]): { p50: number; p99: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const r = (v: number | null): number => Math.round((v ?? 0) * 1000) / 1000;
  return {
    p50: r(percentile(sorted, 0.5)),
    p99: r(percentile(sorted, 0.99)),
    max: r(sorted.at(-1) ?? 0),
  };
}

async function main(): Promise<void> {
  const held = await holdConversations();
  const redis = await startRedis();
  const store = createRedisResumeStore({ url: redis.url, log: silent });
  const resumer = createResumer({
    store,
    ttlS: 900,
    saveDelayMs: 50,
    loadTimeoutMs: 2_000,
    log: silent,
  });
  const config = loadConfig({ CHARACTERS_DIR: 'characters', CHARACTERS_WATCH: 'false' });
  const registry = await loadCharacters({
    dir: 'characters',
    strict: false,
    watch: false,
    log: silent,
    metrics: createMetrics().characters,
  });
  const rows: Array<Record<string, unknown>> = [];
  // Asks Redis its own CPU time (INFO cpu), on a connection of its own.
  const probe = new Redis(redis.url);
  try {
    for (const [turns, state] of held.states) {
      const session = await restoreSession(state, {
        characters: { get: (id) => registry.get(id), ids: () => registry.list().map((c) => c.id) },
        llm: () => createLlmClient({ baseURL: 'http://127.0.0.1:9/v1', log: silent }),
        settings: config.sessions,
        send: () => undefined,
        log: silent,
      });
      // Each write is a turn's: its last group new (two versions of the same
      // group, alternately), the rest as stored — what a turn's end writes.
      const source = sessionStateSource(session);
      let flip = false;
      const turnSource = {
        ...source,
        snapshotParts() {
          const split = session.snapshotParts();
          flip = !flip;
          const last = split.parts.at(-1);
          if (flip && last !== undefined) split.parts[split.parts.length - 1] = `${last} `;
          return split;
        },
      };
      // The same turns written whole (the layout before: the record in one
      // value), alternated write by write with the parts layout, so a busy
      // machine weighs on both alike.
      const wholeSource = { snapshot: source.snapshot, snapshotText: () => session.snapshotText() };
      const layouts = [
        { name: 'parts', tracker: resumer.track(session.id, turnSource, undefined, silent) },
        { name: 'whole', tracker: resumer.track(session.id, wholeSource, undefined, silent) },
      ];
      const times = layouts.map(() => ({ sync: [] as number[], whole: [] as number[] }));
      for (let i = 0; i < 2 * (WRITES + 100); i++) {
        const k = i % 2;
        const { tracker } = layouts[k]!;
        tracker.changed();
        const t0 = performance.now();
        // The write's synchronous part (the state, the diff, the command on
        // the socket), then the round trip, which the session never awaits.
        const written = tracker.flush();
        const t1 = performance.now();
        await written;
        const t2 = performance.now();
        // The first writes warm the JIT and the connection.
        if (i >= 200) {
          times[k]!.sync.push(t1 - t0);
          times[k]!.whole.push(t2 - t0);
        }
      }
      // CPU per write, each layout in a block of its own: CPU time is what a
      // busy machine distorts least (the wall times above wait for the cores).
      const cpu: Record<string, { nodeUs: number; redisUs: number }> = {};
      for (const l of layouts) {
        const redisBefore = await redisCpuS(probe);
        const nodeBefore = process.cpuUsage();
        for (let i = 0; i < WRITES; i++) {
          l.tracker.changed();
          await l.tracker.flush();
        }
        const node = process.cpuUsage(nodeBefore);
        const redisS = (await redisCpuS(probe)) - redisBefore;
        cpu[l.name] = {
          nodeUs: Math.round((node.user + node.system) / WRITES),
          redisUs: Math.round((redisS * 1e6) / WRITES),
        };
      }
      const split = session.snapshotParts();
      const bytes = split.head.length + split.parts.reduce((n, p) => n + p.length, 0);
      const sent = split.head.length + (split.parts.at(-1)?.length ?? 0);
      // The record as stored opens again: the same conversation.
      const claimed = await resumer.claim(layouts[0]!.tracker.token, undefined);
      if (!claimed.ok) throw new Error(`the record did not open again: ${claimed.message}`);
      const back = joinParts(claimed.state, claimed.parts) as SessionState;
      if (back.conversation.history.groups.length !== state.conversation.history.groups.length) {
        throw new Error('the record opened with another number of turns');
      }
      for (const l of layouts) l.tracker.stop();
      session.close();
      const row: Record<string, unknown> = { turns, bytes, sentBytes: sent };
      for (const [k, l] of layouts.entries()) {
        const s = summary(times[k]!.sync);
        const w = summary(times[k]!.whole);
        row[l.name] = { sync: s, write: w, cpu: cpu[l.name] };
        const what =
          l.name === 'parts'
            ? `changed parts (${(sent / 1024).toFixed(1)} KiB)`
            : `whole record (${(bytes / 1024).toFixed(1)} KiB)`;
        console.log(
          `${String(turns).padStart(3)} turns, ${what.padEnd(28)}: on the event loop p50 ${s.p50} ms, p99 ${s.p99} ms · whole write (+ Redis round trip) p50 ${w.p50} ms, p99 ${w.p99} ms, max ${w.max} ms · ${w.p99 <= TARGET_P99_MS ? 'PASS' : 'FAIL'} p99 ≤ ${TARGET_P99_MS} ms · CPU per write: Node ${cpu[l.name]!.nodeUs} µs, Redis ${cpu[l.name]!.redisUs} µs`,
        );
      }
      rows.push(row);
    }
  } finally {
    probe.disconnect();
    await resumer.close();
    await redis.close();
    await registry.close();
  }
  console.log(
    `store writes while holding the conversations: ${held.writesPerTurn.toFixed(2)} per turn, ${held.writesPerDelta.toFixed(3)} per delta (they follow the turn's changes, not its deltas)`,
  );
  console.log(
    `load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')} on ${os.availableParallelism()} cores`,
  );
  const out = path.join('loadtest', 'reports');
  await mkdir(out, { recursive: true });
  await writeFile(
    path.join(out, 'resume-bench.json'),
    `${JSON.stringify(
      {
        kind: 'troupe-resume-bench',
        generatedAt: new Date().toISOString(),
        loadAverage: os.loadavg(),
        writes: WRITES,
        writesPerTurn: held.writesPerTurn,
        writesPerDelta: held.writesPerDelta,
        sizes: rows,
      },
      null,
      2,
    )}\n`,
  );
}

main().catch((err: unknown) => {
  console.error('bench:resume failed:', err instanceof Error ? err.stack : err);
  process.exitCode = 1;
});
