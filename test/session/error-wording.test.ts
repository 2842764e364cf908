import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { nextError, openSession } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

describe('error wording', () => {
  it('says what a token limit takes when given a fraction', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'session.update', event_id: 'evt_max', session: { max_output_tokens: 1.5 } });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'session.max_output_tokens', event_id: 'evt_max' });
    expect(error.message).toBe(
      'session.update: session.max_output_tokens: expected a whole number from 1 to 1000000, or "inf", got 1.5.',
    );
    await c.close();
  });

  it('says what a temperature takes when given a number too large for JSON', async () => {
    const c = await openSession(t, 'character=plain');
    c.send('{"type":"session.update","event_id":"evt_temp","session":{"temperature":1e400}}');
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'session.temperature', event_id: 'evt_temp' });
    expect(error.message).toBe(
      'session.update: session.temperature: expected a number from 0 to 2, got Infinity (a number too large).',
    );
    await c.close();
  });

  it('writes "an assistant message"', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'assistant', content: [{ type: 'input_text', text: 'x' }] },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error.message).toBe(
      'conversation.item.create: item.content[0].type: an assistant message takes "output_text" or "output_audio" parts.',
    );
    await c.close();
  });
});
