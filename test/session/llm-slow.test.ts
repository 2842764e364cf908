/**
 * A model that goes quiet: the client hears that the reply is late, not lost,
 * and the reply still arrives.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, openSession, turn } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  // The first chunk comes after 5 s; the server calls the model slow after 100 ms (a
  // wide margin, so a busy machine cannot make the chunk come first).
  t = await startTestServer({
    env: { LLM_SLOW_NOTICE_MS: '100' },
    simulator: { latency: { ttftMs: 5_000 } },
  });
});
afterAll(() => t.close());

describe('a slow model', () => {
  it('sends troupe.response.llm_slow while the model is silent, then the reply', async () => {
    const c = await openSession(t, 'character=plain');
    const events = await turn(c, 'Hello there!');
    const slow = events.find((e) => e.type === 'troupe.response.llm_slow');
    const done = doneOf(events);
    expect(slow).toMatchObject({ response_id: done.id, round: 0 });
    expect(slow!.silent_ms as number).toBeGreaterThanOrEqual(100);
    // The notice comes before any text: the model was silent when it was sent.
    const firstText = events.findIndex((e) => e.type === 'response.output_text.delta');
    expect(events.indexOf(slow!)).toBeLessThan(firstText);
    expect(done.status).toBe('completed');
    c.close();
  });
});
