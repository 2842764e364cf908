/**
 * Engine bench, section 2: the tool round's overhead — the last chunk of
 * round 0 to the request of round 1, less the handler's time — with the
 * simulator in the same process and in its own.
 */
import { createLlmClient } from '../../../src/llm/client.js';
import type { TurnSummary } from '../../../src/llm/turn-runner.js';
import { startSimulator } from '../../../src/testing/simulator/index.js';
import {
  BENCH_SCRIPT,
  FINAL_TEXT,
  MODEL,
  percentiles,
  weatherCallCount,
  type Percentiles,
} from './common.js';
import { troupeToolset, troupeTurn } from './engines.js';

/** Section 2: turns measured / warm-up turns, per simulator placement. */
export const OVERHEAD_TURNS = 1_000;
export const OVERHEAD_WARMUP_TURNS = 50;
/** Section 2 target: p99 of the tool round overhead. */
export const OVERHEAD_TARGET_P99_MS = 2;

export interface OverheadResult {
  label: string;
  formula: string;
  ms: Percentiles;
  failures: number;
  firstProblem: string | null;
}

/** The runner-side overhead of a summary: round 1 request start − round 0 end − handler time. */
function runnerSideOverhead(s: TurnSummary): number {
  const r0 = s.rounds[0]!;
  return s.rounds[1]!.requestAt - r0.lastChunkAt! - r0.handlerMs;
}

function checkSummary(s: TurnSummary, calls: number): string | null {
  if (s.status !== 'completed') return `turn ${s.status}`;
  if (s.rounds.length !== 2 || s.rounds[0]!.lastChunkAt === null)
    return `${s.rounds.length} rounds`;
  if (calls !== 1) return `tool ran ${calls} times`;
  if (s.text !== FINAL_TEXT) return `final text ${JSON.stringify(s.text.slice(0, 60))}`;
  return null;
}

export async function overheadInProcess(): Promise<{
  simSide: OverheadResult;
  runnerSide: OverheadResult;
}> {
  const sim = await startSimulator({
    port: 0,
    profile: 'openai',
    script: BENCH_SCRIPT,
    latency: {},
  });
  try {
    const llm = await createLlmClient({
      baseURL: sim.url,
      apiKey: 'bench',
      model: MODEL,
      maxRetries: 0,
    });
    const toolset = troupeToolset();
    const simSide: number[] = [];
    const runnerSide: number[] = [];
    let failures = 0;
    let firstProblem: string | null = null;
    for (let i = 0; i < OVERHEAD_WARMUP_TURNS + OVERHEAD_TURNS; i++) {
      sim.clearRequests();
      const before = weatherCallCount();
      const summary = await troupeTurn(llm, toolset);
      const chat = sim.requests.filter((r) => r.path === '/v1/chat/completions');
      const problem =
        checkSummary(summary, weatherCallCount() - before) ??
        (chat.length !== 2 ? `${chat.length} requests` : null);
      if (i < OVERHEAD_WARMUP_TURNS) continue;
      if (problem !== null) {
        failures++;
        firstProblem ??= problem;
        continue;
      }
      const r0 = summary.rounds[0]!;
      const receivedAt = chat[1]!.receivedAt;
      simSide.push(receivedAt - r0.lastChunkAt! - r0.handlerMs);
      runnerSide.push(runnerSideOverhead(summary));
    }
    return {
      simSide: {
        label: '(a) in-process sim',
        formula: 'sim receivedAt(round 1) − rounds[0].lastChunkAt − handlerMs',
        ms: percentiles(simSide),
        failures,
        firstProblem,
      },
      runnerSide: {
        label: "(a') in-process sim, runner side",
        formula: 'rounds[1].requestAt − rounds[0].lastChunkAt − handlerMs',
        ms: percentiles(runnerSide),
        failures,
        firstProblem,
      },
    };
  } finally {
    await sim.close();
  }
}

export async function overheadChild(
  url: string,
): Promise<{ simSide: OverheadResult; runnerSide: OverheadResult }> {
  const llm = await createLlmClient({ baseURL: url, apiKey: 'bench', model: MODEL, maxRetries: 0 });
  const toolset = troupeToolset();
  const requestLog = `${url.replace(/\/v1\/?$/, '')}/sim/requests`;
  await fetch(requestLog, { method: 'DELETE' });
  const runnerSide: number[] = [];
  // Per measured turn: where its round-1 request sits in the simulator's log, and the runner's stamps.
  const pending: Array<{ index: number; lastChunkAt: number; handlerMs: number }> = [];
  let chatRequests = 0;
  let failures = 0;
  let firstProblem: string | null = null;
  for (let i = 0; i < OVERHEAD_WARMUP_TURNS + OVERHEAD_TURNS; i++) {
    const before = weatherCallCount();
    const summary = await troupeTurn(llm, toolset);
    const first = chatRequests;
    chatRequests += summary.requests;
    const problem = checkSummary(summary, weatherCallCount() - before);
    if (i < OVERHEAD_WARMUP_TURNS) continue;
    if (problem !== null) {
      failures++;
      firstProblem ??= problem;
      continue;
    }
    const r0 = summary.rounds[0]!;
    pending.push({ index: first + 1, lastChunkAt: r0.lastChunkAt!, handlerMs: r0.handlerMs });
    runnerSide.push(runnerSideOverhead(summary));
  }
  // The simulator stamps arrivals on its own clock; both clocks are epoch ms
  // from performance.timeOrigin, so the difference is the time on the wire and in the client.
  const { requests } = (await (await fetch(requestLog)).json()) as {
    requests: Array<{ path: string; receivedAt: number }>;
  };
  const chat = requests.filter((r) => r.path === '/v1/chat/completions');
  const simSide = pending.flatMap((p) => {
    const arrived = chat[p.index]?.receivedAt;
    return arrived === undefined ? [] : [arrived - p.lastChunkAt - p.handlerMs];
  });
  return {
    simSide: {
      label: '(b) child-process sim',
      formula:
        'sim receivedAt(round 1) − rounds[0].lastChunkAt − handlerMs (two processes, one clock)',
      ms: percentiles(simSide),
      failures,
      firstProblem,
    },
    runnerSide: {
      label: "(b') child-process sim, runner side",
      formula: 'rounds[1].requestAt − rounds[0].lastChunkAt − handlerMs',
      ms: percentiles(runnerSide),
      failures,
      firstProblem,
    },
  };
}
