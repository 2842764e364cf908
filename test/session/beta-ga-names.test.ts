import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, nextError, openSession, userMessage } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

const CONFLICTS: Array<[Record<string, unknown>, string]> = [
  [{ output_modalities: ['text'], modalities: ['text', 'audio'] }, 'modalities'],
  [{ max_output_tokens: 100, max_response_output_tokens: 200 }, 'max_response_output_tokens'],
];

describe('a value under both its beta and GA names', () => {
  it.each(CONFLICTS)(
    'refuses session.update with %j, naming the beta field',
    async (fields, beta) => {
      const c = await openSession(t, 'character=plain');
      c.send({ type: 'session.update', event_id: 'evt_both', session: fields });
      const error = await nextError(c, 'invalid_value');
      expect(error).toMatchObject({ param: `session.${beta}`, event_id: 'evt_both' });
      expect(error.message).toContain('(its GA name)');
      await c.close();
    },
  );

  it.each(CONFLICTS)('refuses response.create with %j', async (fields, beta) => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'response.create', event_id: 'evt_r', response: fields });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: `response.${beta}`, event_id: 'evt_r' });
    await c.close();
  });

  it('takes the same value under both names', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'session.update',
      session: { max_output_tokens: 100, max_response_output_tokens: 100 },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({ max_output_tokens: 100 });
    await c.close();
  });
});

describe("beta's response.output_audio_format", () => {
  it('is taken as response.audio.output.format, checked as the session format is', async () => {
    const c = await openSession(t, 'character=plain');
    c.send(userMessage('Hello there!'));
    c.send({ type: 'response.create', response: { output_audio_format: 'pcm16' } });
    expect(doneOf(await c.untilDone()).status).toBe('completed');

    c.send({
      type: 'response.create',
      event_id: 'evt_rate',
      response: { audio: { output: { format: { type: 'audio/pcmu', rate: 16000 } } } },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({
      param: 'response.audio.output.format.rate',
      event_id: 'evt_rate',
    });
    expect(error.message).toContain('audio/pcmu is taken at 8000 Hz only, got 16000');
    await c.close();
  });
});
