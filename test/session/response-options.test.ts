/**
 * GA's per-response options over a real socket: out-of-band responses
 * (`conversation: "none"`), a response's own `input` (items and
 * `item_reference`s) and `response.tools` — what the model is sent, what the
 * client hears, and what the conversation keeps.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import type { Received, TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  chatBodies,
  doneOf,
  lastChat,
  nextError,
  openSession,
  outline,
  textOf,
  turn,
  userMessage,
} from '../helpers/session.js';

const say = (text: string): SimReply => ({ parts: [{ text }] });

const SCRIPT: SimScript = {
  rules: [
    { when: { user: 'summarize' }, reply: say('You said hello.') },
    { when: { user: 'classify' }, reply: say('greeting') },
    {
      when: { user: 'what time', round: 0 },
      reply: { parts: [{ toolCall: { name: 'get_time', arguments: {} } }] },
    },
    { when: { user: 'what time', toolResult: '12:34' }, reply: say('It is 12:34.') },
  ],
  fallback: say('Okay.'),
};

const GET_TIME = {
  type: 'function',
  name: 'get_time',
  description: 'The time where the user is',
  parameters: { type: 'object', properties: {} },
};

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ script: SCRIPT });
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());

const userText = (text: string) => ({
  type: 'message',
  role: 'user',
  content: [{ type: 'input_text', text }],
});

/** Events from `from` up to the `response.done` of response `id`. */
async function untilDoneOf(c: TestClient, id: string): Promise<Received[]> {
  await c.next('response.done', (e) => (e.response as { id: string }).id === id);
  return c.events.filter(
    (e) => (e.response as { id?: string } | undefined)?.id === id || e.response_id === id,
  );
}

describe('out-of-band responses (conversation "none")', () => {
  it('runs on the conversation, sends output events only, and leaves the conversation as it was', async () => {
    const c = await openSession(t, 'character=plain');
    await turn(c, 'Hello there!');
    const before = c.events.length;
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        metadata: { purpose: 'summary' },
        instructions: 'summarize the talk so far',
      },
    });
    const created = await c.next('response.created', (e) => c.events.indexOf(e) >= before);
    const response = created.response as { id: string; conversation_id: unknown };
    expect(response.conversation_id).toBeNull();
    const events = await untilDoneOf(c, response.id);
    const done = doneOf(events);
    expect(done).toMatchObject({
      status: 'completed',
      conversation_id: null,
      metadata: { purpose: 'summary' },
      output_modalities: ['text'],
    });
    expect(textOf(events)).toBe('Okay.');
    const after = c.events.slice(before);
    expect(after.some((e) => e.type.startsWith('conversation.item.'))).toBe(false);
    expect(after.map((e) => e.type)).toContain('response.output_item.done');
    // The model read the conversation, with the response's own instructions.
    expect(outline(lastChat(t.simulator).messages)).toEqual([
      'system: summarize the talk so far',
      'assistant: Hello! What can I help you with?',
      'user: Hello there!',
      'assistant: Okay.',
    ]);
    // The reply is not the conversation's: not retrievable, not in the next request.
    const itemId = done.output[0]!.id as string;
    c.send({ type: 'conversation.item.retrieve', item_id: itemId });
    await nextError(c, 'item_retrieve_invalid_item_id');
    await turn(c, 'And again');
    expect(outline(lastChat(t.simulator).messages).slice(1)).toEqual([
      'assistant: Hello! What can I help you with?',
      'user: Hello there!',
      'assistant: Okay.',
      'user: And again',
    ]);
    await c.close();
  });

  it('reads response.input instead: item references and new items', async () => {
    const c = await openSession(t, 'character=plain');
    await turn(c, 'Hello there!');
    const userItem = c.events.find(
      (e) => e.type === 'conversation.item.done' && (e.item as { role?: string }).role === 'user',
    )!.item as { id: string };
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        input: [{ type: 'item_reference', id: userItem.id }, userText('summarize that')],
      },
    });
    const events = await c.untilDone();
    expect(textOf(events)).toBe('You said hello.');
    expect(doneOf(events).conversation_id).toBeNull();
    const messages = outline(lastChat(t.simulator).messages);
    expect(messages.slice(1)).toEqual(['user: Hello there!', 'user: summarize that']);
    await c.close();
  });

  it('runs beside the conversation response, which goes on', async () => {
    const c = await openSession(t, 'character=plain');
    // The conversation's reply stalls after its first text until it is cancelled.
    t.simulator.injectFault({ type: 'stall', afterChunks: 3 });
    c.send(userMessage('Hello there!'));
    c.send({ type: 'response.create' });
    const first = await c.next('response.output_text.delta');
    c.send({
      type: 'response.create',
      response: { conversation: 'none', input: [userText('classify this chat')] },
    });
    const oob = await c.next(
      'response.created',
      (e) => (e.response as { id: string }).id !== first.response_id,
    );
    const oobId = (oob.response as { id: string }).id;
    const events = await untilDoneOf(c, oobId);
    expect(textOf(events)).toBe('greeting');
    // The conversation's response is still running: cancel it, it ends cancelled.
    expect(c.events.some((e) => e.type === 'error')).toBe(false);
    c.send({ type: 'response.cancel' });
    const done = await c.next(
      'response.done',
      (e) => (e.response as { id: string }).id === first.response_id,
    );
    expect((done.response as { status: string }).status).toBe('cancelled');
    await c.close();
  });

  it('is cancelled by its id, and text only: audio is refused naming the field', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'response.create',
      event_id: 'spoken',
      response: { conversation: 'none', output_modalities: ['audio'] },
    });
    const error = await c.next('error');
    expect(error.error).toMatchObject({ event_id: 'spoken' });
    // This server has no TTS at all: the audio refusal names the field either way.
    expect((error.error as { param: string }).param).toBe('response.output_modalities');
    t.simulator.injectFault({ type: 'stall', afterChunks: 3 });
    c.send({
      type: 'response.create',
      response: { conversation: 'none', input: [userText('classify')] },
    });
    const delta = await c.next('response.output_text.delta');
    c.send({ type: 'response.cancel', response_id: delta.response_id });
    const done = await c.next('response.done');
    expect(done.response).toMatchObject({ status: 'cancelled', conversation_id: null });
    await c.close();
  });

  it('refuses an item reference the conversation lacks, and an output without its call', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'response.create',
      response: { conversation: 'none', input: [{ type: 'item_reference', id: 'item_nope' }] },
    });
    expect((await nextError(c, 'item_not_found')).param).toBe('response.input[0].id');
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        input: [{ type: 'function_call_output', call_id: 'call_x', output: '1' }],
      },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('response.input[0].call_id');
    expect(error.message).toMatch(/put the call item/);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    await c.close();
  });

  it('a call in response.input without its output gets a stand-in, so the request is valid', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        // The calls' tool must be one the response is offered.
        tools: [GET_TIME],
        input: [
          userText('summarize'),
          { type: 'function_call', call_id: 'call_1', name: 'get_time', arguments: '{}' },
          { type: 'function_call', call_id: 'call_2', name: 'get_time', arguments: '{}' },
          { type: 'function_call_output', call_id: 'call_2', output: '12:34' },
        ],
      },
    });
    const events = await c.untilDone();
    expect(doneOf(events).status).toBe('completed');
    expect(outline(lastChat(t.simulator).messages).slice(1)).toEqual([
      'user: summarize',
      'assistant: [get_time(call_1), get_time(call_2)]',
      'tool(call_2): 12:34',
      'tool(call_1): Error: the client sent no output for this call.',
    ]);
    await c.close();
  });
});

describe('response.tools', () => {
  it("offers this response's tools instead of the session's, for this response only", async () => {
    const c = await openSession(t, 'character=plain');
    c.send(userMessage('what time is it?'));
    c.send({ type: 'response.create', response: { tools: [GET_TIME], tool_choice: 'required' } });
    const events = await c.untilDone();
    const body = lastChat(t.simulator);
    expect(body.tools?.map((x) => x.function.name)).toEqual(['get_time']);
    expect(body.tool_choice).toBe('required');
    const call = events.find(
      (e) =>
        e.type === 'response.output_item.done' &&
        (e.item as { type: string }).type === 'function_call',
    )!.item as { call_id: string; name: string };
    expect(call.name).toBe('get_time');
    expect(doneOf(events).troupe.tools).toEqual([
      expect.objectContaining({ name: 'get_time', outcome: 'pending_client' }),
    ]);
    c.send({
      type: 'conversation.item.create',
      item: { type: 'function_call_output', call_id: call.call_id, output: '12:34' },
    });
    // The next response has the session's tools again: none.
    c.send({ type: 'response.create' });
    const next = await c.untilDone();
    expect(textOf(next)).toBe('It is 12:34.');
    expect(lastChat(t.simulator).tools).toBeUndefined();
    expect(chatBodies(t.simulator)).toHaveLength(2);
    await c.close();
  });

  it("refuses a response tool named like one of the character's, and a tool_choice it lacks", async () => {
    const c = await openSession(t, 'character=weather');
    c.send({
      type: 'response.create',
      response: { tools: [{ ...GET_TIME, name: 'get_current_weather' }] },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('response.tools');
    expect(error.message).toMatch(/character "weather"/);
    c.send({
      type: 'response.create',
      response: { tools: [GET_TIME], tool_choice: { type: 'function', name: 'nope' } },
    });
    const choice = await nextError(c, 'invalid_value');
    expect(choice.param).toBe('response.tool_choice.name');
    expect(choice.message).toMatch(/get_time/);
    await c.close();
  });
});
