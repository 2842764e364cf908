/**
 * GA features as the `openai` package's `OpenAIRealtimeWS` sends them, its
 * own types checking each event at compile time: an out-of-band response
 * with `input` and an `item_reference`, `response.tools`, and a
 * `function_call` item the client records with its output.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimReply } from '../../src/testing/index.js';
import { connectOpenAiRealtime } from '../helpers/openai-realtime.js';
import { startTlsTestServer, type TlsTestServer } from '../helpers/tls-server.js';

const say = (text: string): SimReply => ({ parts: [{ text }] });

let t: TlsTestServer;
beforeAll(async () => {
  t = await startTlsTestServer({
    script: {
      rules: [
        { when: { user: 'summarize' }, reply: say('You said hello.') },
        {
          when: { user: 'what time', round: 0, tools: true },
          reply: { parts: [{ toolCall: { name: 'get_time', arguments: {} } }] },
        },
        { when: { toolResult: '12:34' }, reply: say('It is 12:34.') },
      ],
      fallback: say('Okay.'),
    },
  });
});
afterAll(() => t?.close());

/** An SDK connection, and a user message as the SDK's types write it. */
function connect() {
  const userText = (text: string) => ({
    type: 'message' as const,
    role: 'user' as const,
    content: [{ type: 'input_text' as const, text }],
  });
  return { ...connectOpenAiRealtime(t), userText };
}

describe('OpenAIRealtimeWS and GA response options', () => {
  it('runs an out-of-band response on response.input with an item_reference', async () => {
    const { rt, events, errors, next, userText } = connect();
    await next('session.created');
    rt.send({
      type: 'conversation.item.create',
      item: { ...userText('Hello there!'), id: 'item_hello' },
    });
    await next('conversation.item.done');
    rt.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        metadata: { purpose: 'summary' },
        output_modalities: ['text'],
        input: [{ type: 'item_reference', id: 'item_hello' } as never, userText('summarize that')],
      },
    });
    const done = await next('response.done');
    expect(done.response.conversation_id ?? null).toBeNull();
    expect(done.response.metadata).toEqual({ purpose: 'summary' });
    const text = events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => (e as { delta: string }).delta)
      .join('');
    expect(text).toBe('You said hello.');
    const from = events.findIndex((e) => e.type === 'response.created');
    expect(events.slice(from).some((e) => e.type.startsWith('conversation.item.'))).toBe(false);
    expect(errors).toEqual([]);
    rt.close({ code: 1000, reason: 'done' });
  });

  it('offers response.tools for one response; a recorded function_call and its output', async () => {
    const { rt, events, errors, next, userText } = connect();
    await next('session.created');
    rt.send({ type: 'conversation.item.create', item: userText('what time is it?') });
    rt.send({
      type: 'response.create',
      response: {
        tools: [
          {
            type: 'function',
            name: 'get_time',
            description: 'The time',
            parameters: { type: 'object', properties: {} },
          },
        ],
        tool_choice: 'auto',
      },
    });
    const first = await next('response.done');
    const call = first.response.output?.find((i) => i.type === 'function_call');
    expect(call).toMatchObject({ type: 'function_call', name: 'get_time' });
    // A call the client records itself, for a tool the session knows only through that response:
    // refused naming the field, since the session's tools do not include it.
    rt.send({
      type: 'conversation.item.create',
      item: { type: 'function_call', name: 'get_time', arguments: '{}', call_id: 'call_own' },
    });
    const refused = await next('error');
    expect(refused.error).toMatchObject({ code: 'invalid_value', param: 'item.name' });
    rt.send({
      type: 'conversation.item.create',
      item: {
        type: 'function_call_output',
        call_id: (call as { call_id: string }).call_id,
        output: '12:34',
      },
    });
    rt.send({ type: 'response.create' });
    await next('response.done');
    const text = events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => (e as { delta: string }).delta)
      .join('');
    expect(text).toBe('It is 12:34.');
    // The SDK reports the one refusal above as an error too; nothing else failed.
    expect(errors).toHaveLength(1);
    rt.close({ code: 1000, reason: 'done' });
  });
});
