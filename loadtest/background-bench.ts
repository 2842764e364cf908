/**
 * Background tool result → client: a real Troupe server (in this process, on
 * loopback) and the LLM simulator (no latency); a character's background tool
 * is held until the bench lets it finish, with the conversation idle. Measured:
 * the handler finishing → the first text delta of the follow-up response at a
 * WebSocket client. Target: within 50 ms.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { loadConfig } from '../src/config/index.js';
import { createLogger, startServer } from '../src/server/index.js';
import { startSimulator, type SimScript } from '../src/testing/simulator/index.js';
import { percentile } from './lib/stats.js';

const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Follow-ups measured, after the warm-up ones. */
const RUNS = 30;
const WARMUP = 5;
/** The goal for the result reaching the client. */
export const BACKGROUND_TARGET_MS = 50;

const gates = globalThis as unknown as { __troupeBenchGate?: (done: () => void) => void };

const CHARACTER = `import { z } from 'zod';
import { defineCharacter, defineTool } from ${JSON.stringify(path.join(ROOT_DIR, 'src/index.ts'))};
export default defineCharacter({
  name: 'Bench',
  instructions: { prompt: 'Benchmark.' },
  tools: [
    defineTool({
      name: 'slow_search',
      description: 'A search that runs in the background.',
      parameters: z.object({}),
      background: true,
      handler: () => new Promise((resolve) => globalThis.__troupeBenchGate(() => resolve('found it'))),
    }),
  ],
});
`;

const SCRIPT: SimScript = {
  rules: [
    { when: { background: true }, reply: { parts: [{ text: 'Here it is: found it.' }] } },
    {
      when: { round: 0 },
      reply: { parts: [{ toolCall: { name: 'slow_search', arguments: {} } }] },
    },
    { reply: { parts: [{ text: 'Searching.' }] } },
  ],
};

/** Percentiles of the handler's end → first follow-up text delta at the client, ms. */
export interface BackgroundBenchResult {
  runs: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  targetMs: number;
}

/** Runs the bench; prints nothing. */
export async function benchBackgroundResult(): Promise<BackgroundBenchResult> {
  await mkdir(path.join(ROOT_DIR, '.tmp'), { recursive: true });
  const dir = await mkdtemp(path.join(ROOT_DIR, '.tmp', 'bench-bg-'));
  await writeFile(path.join(dir, 'bench.ts'), CHARACTER);
  const sim = await startSimulator({ profile: 'openai', script: SCRIPT });
  const config = loadConfig({
    CHARACTERS_DIR: dir,
    CHARACTERS_WATCH: 'false',
    LOG_LEVEL: 'silent',
    // This process also runs the simulator and the clients: its busy share is theirs too.
    OVERLOAD_BUSY: '0',
    PORT: '0',
    HOST: '127.0.0.1',
    LLM_BASE_URL: sim.url,
    STT_PROVIDER: 'none',
    TTS_PROVIDER: 'none',
  });
  const server = await startServer({
    config,
    logger: createLogger({ ...config.log, level: 'silent' }),
  });
  const samples: number[] = [];
  try {
    const ws = new WebSocket(`${server.wsUrl}?character=bench`);
    const waiters: Array<(e: { type: string }) => boolean> = [];
    ws.on('message', (data) => {
      const e = JSON.parse(data.toString()) as { type: string };
      for (let i = 0; i < waiters.length; i++) {
        if (waiters[i]!(e)) waiters.splice(i--, 1);
      }
    });
    const next = (type: string) =>
      new Promise<number>((resolve) =>
        waiters.push((e) => (e.type === type ? (resolve(performance.now()), true) : false)),
      );
    const created = next('session.created');
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    await created;
    for (let i = 0; i < WARMUP + RUNS; i++) {
      const running = new Promise<() => void>((resolve) => (gates.__troupeBenchGate = resolve));
      const acked = next('response.done');
      ws.send(
        JSON.stringify({
          type: 'conversation.item.create',
          item: {
            type: 'message',
            role: 'user',
            content: [{ type: 'input_text', text: 'search' }],
          },
        }),
      );
      ws.send(JSON.stringify({ type: 'response.create' }));
      const finish = await running;
      await acked;
      // Idle now: the handler finishes, the follow-up's first delta is timed at the client.
      const firstDelta = next('response.output_text.delta');
      const followUpDone = next('response.done');
      const finishedAt = performance.now();
      finish();
      const at = await firstDelta;
      await followUpDone;
      if (i >= WARMUP) samples.push(at - finishedAt);
    }
    ws.close();
  } finally {
    await server.shutdown(1_000);
    await sim.close();
    await rm(dir, { recursive: true, force: true });
  }
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    runs: samples.length,
    p50Ms: percentile(sorted, 0.5) ?? 0,
    p95Ms: percentile(sorted, 0.95) ?? 0,
    maxMs: sorted.at(-1) ?? 0,
    targetMs: BACKGROUND_TARGET_MS,
  };
}
