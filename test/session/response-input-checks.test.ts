import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { nextError, openSession, turn } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

const call = (callId: string, name = 'get_current_weather') => ({
  type: 'function_call',
  call_id: callId,
  name,
  arguments: '{}',
});
const output = (callId: string) => ({ type: 'function_call_output', call_id: callId, output: '1' });

/** response.create out of band with this input; the error it gets. */
async function refused(input: object[]) {
  const c = await openSession(t, 'character=weather');
  c.send({
    type: 'response.create',
    event_id: 'evt_in',
    response: { conversation: 'none', input },
  });
  const error = await nextError(c, 'invalid_value');
  expect(error.event_id).toBe('evt_in');
  // The session goes on.
  await turn(c, 'Hello');
  await c.close();
  return error;
}

describe('response.input is checked as conversation.item.create checks items', () => {
  it('refuses a call_id given twice', async () => {
    const error = await refused([call('c1'), output('c1'), call('c1'), output('c1')]);
    expect(error.param).toBe('response.input[2].call_id');
    expect(error.message).toBe(
      'response.create: response.input[2].call_id: a call "c1" is already in response.input; give each call its own call_id.',
    );
  });

  it('refuses a call of a tool that does not exist, as conversation.item.create does', async () => {
    const error = await refused([call('c1', 'nowhere'), output('c1')]);
    expect(error.param).toBe('response.input[0].name');
    expect(error.message).toContain('no tool "nowhere" in this session');

    const c = await openSession(t, 'character=weather');
    c.send({ type: 'conversation.item.create', item: call('c2', 'nowhere') });
    const same = await nextError(c, 'invalid_value');
    expect(same.param).toBe('item.name');
    expect(same.message).toContain('no tool "nowhere" in this session');
    await c.close();
  });

  it('refuses an assistant message with input_text parts and an image outside a user message', async () => {
    const assistant = {
      type: 'message',
      role: 'assistant',
      content: [{ type: 'input_text', text: 'Hi' }],
    };
    const error = await refused([assistant]);
    expect(error.param).toBe('response.input[0].content[0].type');
    expect(error.message).toContain('message takes "output_text"');

    const image = {
      type: 'message',
      role: 'system',
      content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }],
    };
    expect((await refused([image])).param).toBe('response.input[0].content[0]');
  });
});
