/**
 * GA response options a session does not run yet are refused naming the
 * field — never run as if they were absent — and the session goes on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { nextError, openSession, turn } from '../helpers/session.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

describe('response options not offered yet', () => {
  it.each([
    [{ conversation: 'none' }, 'response.conversation', /out-of-band.*"auto"/],
    [
      { input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x' }] }] },
      'response.input',
      /conversation.item.create/,
    ],
    [{ tools: [{ type: 'function', name: 'f' }] }, 'response.tools', /session.update/],
  ])('refuses %j naming %s, and the next response runs', async (response, param, message) => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'response.create', event_id: 'oob', response });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param, event_id: 'oob' });
    expect(error.message).toMatch(message);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    const events = await turn(c, 'Hello there!');
    expect(events.at(-1)!.response).toMatchObject({ status: 'completed' });
    await c.close();
  });
});
