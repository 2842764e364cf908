import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Received } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, openSession, turn } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

/** The output of the turn's one server-side tool call. */
function toolOutput(events: readonly Received[]): string {
  const results = events.filter((e) => e.type === 'troupe.tool_call.result');
  expect(results).toHaveLength(1);
  expect(results[0]).toMatchObject({ outcome: 'ok' });
  return results[0]!.output as string;
}

describe('session state of the quizmaster', () => {
  it('keeps the quiz across turns of a session and starts fresh in a new one', async () => {
    const first = await openSession(t, 'character=quizmaster');
    expect(toolOutput(await turn(first, "Let's do a quiz!"))).toBe(
      'Quiz on geography started. Question 1 of 3: What is the capital of France?',
    );
    expect(toolOutput(await turn(first, 'Paris'))).toBe(
      'Correct! Question 2 of 3: How many legs does a spider have?',
    );
    const score = await turn(first, "What's my score?");
    expect(toolOutput(score)).toBe('Score: 1 correct of 1 answered (3 questions in all).');
    expect(doneOf(score).status).toBe('completed');

    // A second session at the same time has its own state.
    const second = await openSession(t, 'character=quizmaster');
    expect(toolOutput(await turn(second, "What's my score?"))).toBe(
      'No quiz has been started yet.',
    );
    expect(toolOutput(await turn(first, "What's my score?"))).toBe(
      'Score: 1 correct of 1 answered (3 questions in all).',
    );
    await Promise.all([first.close(), second.close()]);
  });

  it('starts a switched-to character with fresh state', async () => {
    const c = await openSession(t, 'character=quizmaster');
    await turn(c, "Let's do a quiz!");
    c.send({ type: 'session.update', session: { character: 'weather' } });
    await c.next('session.updated');
    c.send({ type: 'session.update', session: { character: 'quizmaster' } });
    await c.next(
      'session.updated',
      (e) => (e.session as { character: string }).character === 'quizmaster',
    );
    expect(toolOutput(await turn(c, "What's my score?"))).toBe('No quiz has been started yet.');
    await c.close();
  });
});
