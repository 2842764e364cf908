/**
 * `conversation.item.create` with a `function_call` item (GA): a client
 * records a call and later its output; the model reads both as its own, a
 * call left without output gets a stand-in, an unknown tool is refused.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  lastChat,
  nextError,
  openSession,
  outline,
  textOf,
  userMessage,
} from '../helpers/session.js';

const say = (text: string): SimReply => ({ parts: [{ text }] });

const SCRIPT: SimScript = {
  rules: [
    { when: { user: 'what time', toolResult: '12:34' }, reply: say('It is 12:34.') },
    { when: { toolResult: 'sent no output' }, reply: say('No answer came.') },
  ],
  fallback: say('Okay.'),
};

const GET_TIME = {
  type: 'function',
  name: 'get_time',
  description: 'The time where the user is',
  parameters: { type: 'object', properties: {} },
};

const call = (name: string, callId?: string) => ({
  type: 'conversation.item.create',
  item: {
    type: 'function_call',
    name,
    arguments: '{"city":"Oslo"}',
    ...(callId ? { call_id: callId } : {}),
  },
});

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ script: SCRIPT });
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());

describe('conversation.item.create with a function_call item', () => {
  it("takes a call of the client's tool and its output; the model reads both", async () => {
    const c = await openSession(t, 'character=weather');
    c.send({ type: 'session.update', session: { tools: [GET_TIME] } });
    await c.next('session.updated');
    c.send(userMessage('what time is it?'));
    c.send(call('get_time', 'call_t1'));
    const added = await c.next(
      'conversation.item.done',
      (e) => (e.item as { type: string }).type === 'function_call',
    );
    expect(added.item).toMatchObject({
      type: 'function_call',
      object: 'realtime.item',
      status: 'completed',
      call_id: 'call_t1',
      name: 'get_time',
      arguments: '{"city":"Oslo"}',
    });
    c.send({
      type: 'conversation.item.create',
      item: { type: 'function_call_output', call_id: 'call_t1', output: '12:34' },
    });
    const output = await c.next(
      'conversation.item.done',
      (e) => (e.item as { type: string }).type === 'function_call_output',
    );
    expect(output.previous_item_id).toBe((added.item as { id: string }).id);
    c.send({ type: 'response.create' });
    const events = await c.untilDone();
    expect(textOf(events)).toBe('It is 12:34.');
    expect(outline(lastChat(t.simulator).messages).slice(-3)).toEqual([
      'user: what time is it?',
      'assistant: [get_time(call_t1)]',
      'tool(call_t1): 12:34',
    ]);
    await c.close();
  });

  it("takes a call of the character's tool; without an output it gets a stand-in before the next response", async () => {
    const c = await openSession(t, 'character=weather');
    c.send(userMessage('how is Oslo?'));
    c.send(call('get_current_weather'));
    const added = await c.next(
      'conversation.item.done',
      (e) => (e.item as { type: string }).type === 'function_call',
    );
    const callId = (added.item as { call_id: string }).call_id;
    expect(callId).toMatch(/^call_/);
    c.send({ type: 'response.create' });
    const events = await c.untilDone();
    expect(textOf(events)).toBe('No answer came.');
    expect(outline(lastChat(t.simulator).messages).slice(-3)).toEqual([
      'user: how is Oslo?',
      `assistant: [get_current_weather(${callId})]`,
      `tool(${callId}): Error: the client sent no output for this call.`,
    ]);
    await c.close();
  });

  it('refuses an unknown tool naming the field and the tools known, and a call id in use', async () => {
    const c = await openSession(t, 'character=weather');
    c.send(call('get_tides'));
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('item.name');
    expect(error.message).toMatch(/no tool "get_tides"/);
    expect(error.message).toMatch(/get_current_weather/);
    expect(error.message).toMatch(/session\.tools/);
    c.send(call('get_current_weather', 'call_dup'));
    await c.next(
      'conversation.item.done',
      (e) => (e.item as { type: string }).type === 'function_call',
    );
    c.send(call('get_current_weather', 'call_dup'));
    const dup = await nextError(c, 'invalid_value');
    expect(dup.param).toBe('item.call_id');
    await c.close();
  });
});
