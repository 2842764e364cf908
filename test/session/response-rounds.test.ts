/**
 * `response.done.response.troupe.rounds`: one entry per LLM request of a
 * response, saying where its time went (the model, the tool handlers, and
 * Troupe's own overhead between rounds), to the microsecond.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ResponseRound } from '../../src/session/events.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { chatBodies, doneOf, openSession, turn } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());

/** A user turn on a fresh session with a character; returns its `response.done` troupe info. */
async function troupeOf(
  character: string,
  text: string,
): Promise<{ rounds: ResponseRound[] } & Record<string, unknown>> {
  const c = await openSession(t, `character=${character}`);
  try {
    const done = doneOf(await turn(c, text));
    expect(done.status).toBe('completed');
    return done.troupe as { rounds: ResponseRound[] } & Record<string, unknown>;
  } finally {
    await c.close();
  }
}

/** Whether a number has at most three decimals (microseconds of a millisecond value). */
function hasAtMostThreeDecimals(ms: number): boolean {
  return Math.abs(Math.round(ms * 1000) / 1000 - ms) < 1e-9;
}

/** Checks what every round must satisfy. */
function expectWellFormed(round: ResponseRound): void {
  expect(Object.keys(round).sort()).toEqual(['handler_ms', 'llm_ms', 'llm_ttft_ms', 'overhead_ms']);
  expect(round.llm_ttft_ms).toEqual(expect.any(Number));
  expect(round.llm_ms).toEqual(expect.any(Number));
  expect(round.llm_ttft_ms!).toBeGreaterThanOrEqual(0);
  expect(round.llm_ms!).toBeGreaterThanOrEqual(round.llm_ttft_ms!);
  expect(round.handler_ms).toBeGreaterThanOrEqual(0);
  for (const value of Object.values(round)) {
    if (value !== null) expect(hasAtMostThreeDecimals(value), String(value)).toBe(true);
  }
}

describe('response.done rounds', () => {
  it('reports one round for a text-only response, with no handler time and no overhead', async () => {
    const troupe = await troupeOf('plain', 'hello there');

    expect(troupe.llm_requests).toBe(1);
    expect(troupe.tool_rounds).toBe(0);
    expect(troupe.rounds).toHaveLength(1);
    const [only] = troupe.rounds;
    expectWellFormed(only!);
    expect(only!.handler_ms).toBe(0);
    expect(only!.overhead_ms).toBeNull();
  });

  it("agrees with the response's own llm_ttft_ms on the first round", async () => {
    const troupe = await troupeOf('plain', 'hello there');
    const first = troupe.rounds[0]!;
    // llm_ttft_ms is rounded to 0.1 ms, the round to 0.001 ms.
    expect(Math.abs(first.llm_ttft_ms! - (troupe.llm_ttft_ms as number))).toBeLessThanOrEqual(
      0.051,
    );
    expect(first.llm_ms!).toBeLessThanOrEqual((troupe.duration_ms as number) + 0.05);
  });

  it('reports two rounds for a tool turn: handler time and overhead on the first, none after the last', async () => {
    const troupe = await troupeOf('weather', 'Celsius, please.');

    expect(troupe.llm_requests).toBe(2);
    expect(troupe.tool_rounds).toBe(1);
    expect(chatBodies(t.simulator)).toHaveLength(2);
    expect(troupe.rounds).toHaveLength(2);
    const [toolRound, last] = troupe.rounds as [ResponseRound, ResponseRound];
    expectWellFormed(toolRound);
    expectWellFormed(last);

    expect(toolRound.overhead_ms).toEqual(expect.any(Number));
    expect(toolRound.overhead_ms!).toBeGreaterThanOrEqual(0);
    expect(toolRound.handler_ms).toBeGreaterThanOrEqual(0);
    expect(last.overhead_ms).toBeNull();
    expect(last.handler_ms).toBe(0);
  });

  it("keeps a tool round's handler time within the tool call's duration", async () => {
    const troupe = await troupeOf('weather', 'Celsius, please.');
    const tools = troupe.tools as Array<{ name: string; outcome: string; duration_ms: number }>;

    expect(tools).toHaveLength(1);
    expect(tools[0]).toMatchObject({ name: 'get_current_weather', outcome: 'ok' });
    // duration_ms is rounded to 0.1 ms and includes parsing and validation around the handler.
    expect(troupe.rounds[0]!.handler_ms).toBeLessThanOrEqual(tools[0]!.duration_ms + 0.051);
  });

  it('fits the rounds inside the response: model, handler and overhead time add up to less than its duration', async () => {
    const troupe = await troupeOf('weather', 'Celsius, please.');
    const spent = troupe.rounds.reduce(
      (sum, r) => sum + r.llm_ms! + r.handler_ms + (r.overhead_ms ?? 0),
      0,
    );
    // Each part is rounded to 0.001 ms, the duration to 0.1 ms.
    expect(spent).toBeLessThanOrEqual((troupe.duration_ms as number) + 0.06);
  });
});

describe("the model's time to first token", () => {
  let slow: TestServer;
  beforeAll(async () => {
    // 5 tokens a second: the role-only chunk comes at once, the first token 200 ms after it.
    slow = await startTestServer({ simulator: { latency: { tokensPerSec: 5 } } });
  });
  afterAll(() => slow.close());

  it('runs to the first chunk with output, not to the role-only chunk the stream opens with', async () => {
    const c = await openSession(slow, 'character=plain');
    try {
      const done = doneOf(await turn(c, 'hello there'));
      const troupe = done.troupe as { rounds: ResponseRound[]; llm_ttft_ms: number };
      // Timers never fire early by more than a millisecond; a busy machine only adds.
      expect(troupe.rounds[0]!.llm_ttft_ms!).toBeGreaterThanOrEqual(199);
      expect(troupe.llm_ttft_ms).toBeGreaterThanOrEqual(199);
    } finally {
      await c.close();
    }
  });
});
