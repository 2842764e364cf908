import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/llm/chunk.js';
import { keepMessageJson, messageJsonCheck, requestBody } from '../../src/llm/request-body.js';
import { History } from '../../src/session/history.js';
import type { Item } from '../../src/session/events.js';

const parsed = (body: object): unknown => JSON.parse(String(requestBody(body)));

function assistantItem(id: string, text: string): Extract<Item, { type: 'message' }> {
  return {
    id,
    object: 'realtime.item',
    type: 'message',
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text }],
  };
}

describe('requestBody', () => {
  it('is the JSON of the body, messages first, kept or not', () => {
    const kept: ChatMessage = { role: 'user', content: 'Hi "there" \u2603 \n' };
    keepMessageJson(kept, JSON.stringify(kept));
    const body = {
      model: 'm',
      messages: [{ role: 'system', content: 'Be brief.' }, kept],
      stream: true,
      stream_options: { include_usage: true },
      temperature: undefined,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
    };
    expect(parsed(body)).toEqual(JSON.parse(JSON.stringify(body)));
    expect(String(requestBody(body))).toMatch(/^\{"messages":\[\{"role":"system"/);
  });

  it('takes a body of messages alone, an empty list, or none', () => {
    const alone = { messages: [{ role: 'user', content: 'x' }] };
    expect(String(requestBody(alone))).toBe(JSON.stringify(alone));
    expect(String(requestBody({ messages: [], model: 'm' }))).toBe('{"messages":[],"model":"m"}');
    expect(String(requestBody({ model: 'm', prompt: 'p' }))).toBe('{"model":"m","prompt":"p"}');
  });

  it('sends what a history keeps, and what it kept again after a change in place', () => {
    const h = new History();
    const message: ChatMessage = { role: 'assistant', content: 'a long reply' };
    h.addItems(h.startGroup(), [assistantItem('a1', 'a long reply')], [message]);
    const body = { model: 'm', messages: [message] };
    expect(parsed(body)).toEqual(body);
    // Cut to what was heard, as a truncate does, then touched.
    message.content = 'a long';
    h.touch('a1');
    expect(parsed(body)).toEqual({
      model: 'm',
      messages: [{ role: 'assistant', content: 'a long' }],
    });
  });

  it('notes a message changed after its JSON was kept, and sends it as it is', () => {
    const message: ChatMessage = { role: 'assistant', content: 'said' };
    keepMessageJson(message, JSON.stringify(message));
    message.content = 'said again';
    const was = messageJsonCheck.verify;
    messageJsonCheck.verify = true;
    try {
      expect(parsed({ messages: [message] })).toEqual({ messages: [message] });
    } finally {
      messageJsonCheck.verify = was;
    }
    expect(messageJsonCheck.stale.splice(0)).toEqual([
      expect.stringContaining('message changed after its JSON was kept'),
    ]);
  });

  it('does not keep a message past the size limit (an inline image): it is serialised per request', () => {
    const big: ChatMessage = { role: 'user', content: 'x'.repeat(300 * 1024) };
    keepMessageJson(big, JSON.stringify(big));
    big.content = 'small now';
    const was = messageJsonCheck.verify;
    messageJsonCheck.verify = true;
    try {
      expect(parsed({ messages: [big] })).toEqual({
        messages: [{ role: 'user', content: 'small now' }],
      });
    } finally {
      messageJsonCheck.verify = was;
    }
    expect(messageJsonCheck.stale).toEqual([]);
  });
});
