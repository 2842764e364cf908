import { estimateTokens } from '../../src/llm/token-estimate.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SimScript } from '../../src/testing/index.js';
import { say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  doneOf,
  idOf,
  lastChat,
  listByPrevious,
  nextError,
  openSession,
  textOf,
  turn,
  userMessage,
} from '../helpers/session.js';

const LONG_REPLY =
  'Once upon a time, in a valley between two rivers, there lived a fox who collected ' +
  'lost buttons, and every button had a story of its own to tell the fox at night.';

const SCRIPT: SimScript = {
  rules: [{ when: { user: 'story' }, reply: { parts: [{ text: LONG_REPLY }] } }],
  fallback: { parts: [{ text: 'Noted.' }] },
};

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ script: SCRIPT });
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());
afterEach(() => t.simulator.setLatency({}));

describe('response lifecycle', () => {
  it('refuses response.create while a response runs, and lets the running one complete', async () => {
    // Slow enough that the second response.create lands while the first streams.
    t.simulator.setLatency({ tokensPerSec: 200 });
    const c = await openSession(t, 'character=plain');
    say(c, 'Tell me a story.');
    c.send({ type: 'response.create', event_id: 'evt_again' });

    const error = await nextError(c, 'conversation_already_has_active_response');
    expect(error.event_id).toBe('evt_again');
    const events = await c.untilDone();
    // The refusal came while the first response ran, and names it.
    const created = c.events.filter((e) => e.type === 'response.created');
    expect(created).toHaveLength(1);
    expect(c.events.indexOf(created[0]!)).toBeLessThan(
      c.events.findIndex((e) => e.type === 'error'),
    );
    expect(error.message).toContain((created[0]!.response as { id: string }).id);
    expect(doneOf(events).status).toBe('completed');
    expect(textOf(events)).toBe(LONG_REPLY);
    await c.close();
  });

  it('cancels a streaming response and keeps the text already sent in history', async () => {
    t.simulator.setLatency({ tokensPerSec: 20 });
    const c = await openSession(t, 'character=plain');
    say(c, 'Tell me a story.');
    const created = await c.next('response.created');
    await c.next('response.output_text.delta');
    c.send({ type: 'response.cancel' });

    const events = await c.untilDone();
    const response = doneOf(events);
    expect(response).toMatchObject({
      id: (created.response as { id: string }).id,
      status: 'cancelled',
      status_details: { type: 'cancelled', reason: 'client_cancelled' },
    });
    const sent = textOf(c.events);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.length).toBeLessThan(LONG_REPLY.length);
    expect(LONG_REPLY.startsWith(sent)).toBe(true);
    expect(response.output).toEqual([
      expect.objectContaining({
        type: 'message',
        status: 'incomplete',
        content: [{ type: 'output_text', text: sent }],
      }),
    ]);
    // vLLM counts on every chunk: the cut request's usage is its running count.
    const counted = response.usage as { input_tokens: number; output_tokens: number };
    expect(counted.input_tokens).toBeGreaterThan(0);
    expect(counted.output_tokens).toBeGreaterThan(0);
    expect(response.troupe).not.toHaveProperty('usage_estimated');

    t.simulator.setLatency({});
    const next = await turn(c, 'Go on.');
    expect(doneOf(next).status).toBe('completed');
    expect(lastChat(t.simulator).messages.slice(-2)).toEqual([
      { role: 'assistant', content: sent },
      { role: 'user', content: 'Go on.' },
    ]);
    await c.close();
  });

  it('refuses to delete an item of the running response as not deletable, as retrieve finds it', async () => {
    t.simulator.setLatency({ tokensPerSec: 20 });
    const c = await openSession(t, 'character=plain');
    say(c, 'Tell me a story.');
    const added = await c.next('response.output_item.added');
    const id = (added.item as { id: string }).id;
    c.send({ type: 'conversation.item.retrieve', item_id: id });
    expect(((await c.next('conversation.item.retrieved')).item as { id: string }).id).toBe(id);
    c.send({ type: 'conversation.item.delete', event_id: 'evt_del', item_id: id });
    const error = await nextError(c, 'item_not_deletable');
    expect(error).toMatchObject({ param: 'item_id', event_id: 'evt_del' });
    c.send({ type: 'response.cancel' });
    await c.untilDone();
    await c.close();
  });

  it("refuses to delete a finished reply's message while the next response runs, and deletes it after", async () => {
    const c = await openSession(t, 'character=plain');
    const first = (doneOf(await turn(c, 'Hi.')).output as Array<{ id: string }>)[0]!.id;
    t.simulator.setLatency({ tokensPerSec: 20 });
    say(c, 'Tell me a story.');
    await c.next('response.output_item.added');
    c.send({ type: 'conversation.item.delete', event_id: 'evt_del', item_id: first });
    const error = await nextError(c, 'item_not_deletable');
    expect(error).toMatchObject({ param: 'item_id', event_id: 'evt_del' });
    expect(error.message).toMatch(/cannot go while a response runs/);
    c.send({ type: 'response.cancel' });
    await c.untilDone();
    t.simulator.setLatency({});

    c.send({ type: 'conversation.item.delete', item_id: first });
    expect((await c.next('conversation.item.deleted')).item_id).toBe(first);
    await turn(c, 'Go on.');
    const sent = lastChat(t.simulator).messages.map((m) => `${m.role}: ${String(m.content)}`);
    // The greeting, then the first exchange without its reply.
    expect(sent.slice(2, 4)).toEqual(['user: Hi.', 'user: Tell me a story.']);
    await c.close();
  });

  it('estimates the usage of a response cut before the server counted it', async () => {
    // OpenAI counts once, in a last chunk that a cut stream never gets.
    t.simulator.setProfile('openai');
    t.simulator.setLatency({ tokensPerSec: 20 });
    try {
      const c = await openSession(t, 'character=plain');
      say(c, 'Tell me a story.');
      await c.next('response.output_text.delta');
      c.send({ type: 'response.cancel' });
      const response = doneOf(await c.untilDone());
      expect(response.status).toBe('cancelled');
      // What the model read, and at least what it wrote before the cut.
      const read = lastChat(t.simulator).messages.reduce((n, m) => n + estimateTokens(m), 0);
      const usage = response.usage as { input_tokens: number; output_tokens: number };
      expect(usage.input_tokens).toBe(read);
      expect(usage.output_tokens).toBeGreaterThanOrEqual(Math.ceil(textOf(c.events).length / 4));
      expect(response.troupe).toMatchObject({ usage_estimated: true });
      // A reply that ends has the server's own count.
      t.simulator.setLatency({});
      const next = doneOf(await turn(c, 'Go on.'));
      expect(next.status).toBe('completed');
      expect(next.troupe).not.toHaveProperty('usage_estimated');
      await c.close();
    } finally {
      t.simulator.setProfile('vllm-hermes');
    }
  });

  it('cancels a response still waiting for its first token', async () => {
    // A first token that never comes before the cancel, however busy the machine.
    t.simulator.setLatency({ ttftMs: 3_600_000 });
    const c = await openSession(t, 'character=plain');
    say(c, 'Tell me a story.');
    await c.next('response.created');
    c.send({ type: 'response.cancel' });
    const response = doneOf(await c.untilDone());
    expect(response).toMatchObject({ status: 'cancelled', output: [] });
    // The model never began: it used nothing.
    expect(response.usage).toMatchObject({ input_tokens: 0, output_tokens: 0 });
    expect(response.troupe).not.toHaveProperty('usage_estimated');

    t.simulator.setLatency({});
    expect(doneOf(await turn(c, 'Go on.')).status).toBe('completed');
    // Nothing was said, so nothing of the cancelled turn is in history but the user's message.
    expect(lastChat(t.simulator).messages.slice(-2)).toEqual([
      { role: 'user', content: 'Tell me a story.' },
      { role: 'user', content: 'Go on.' },
    ]);
    await c.close();
  });

  it('puts messages the client adds while a response runs after that response, in order', async () => {
    t.simulator.setLatency({ tokensPerSec: 200 });
    const c = await openSession(t, 'character=plain');
    say(c, 'Tell me a story.');
    await c.next('response.output_text.delta');
    c.send(userMessage('Make it short.'));
    await c.next('conversation.item.done', (e) =>
      JSON.stringify(e.item).includes('Make it short.'),
    );
    c.send(userMessage('And funny.'));
    const response = doneOf(await c.untilDone());
    expect(response.status).toBe('completed');
    // On the wire too they follow the reply, which history keeps before them.
    const added = (text: string) =>
      c.events.find(
        (e) => e.type === 'conversation.item.added' && JSON.stringify(e.item).includes(text),
      )!;
    const replyId = (response.output[0] as { id: string }).id;
    expect(added('Make it short.').previous_item_id).toBe(replyId);
    expect(added('And funny.').previous_item_id).toBe(idOf(added('Make it short.')));
    // A list built as the Agents SDK builds it (each item after its previous_item_id) keeps that order.
    expect(listByPrevious(c.events).slice(-3)).toEqual([
      replyId,
      idOf(added('Make it short.')),
      idOf(added('And funny.')),
    ]);

    t.simulator.setLatency({});
    c.send({ type: 'response.create' });
    expect(doneOf(await c.untilDone()).status).toBe('completed');
    expect(lastChat(t.simulator).messages.slice(-4)).toEqual([
      { role: 'user', content: 'Tell me a story.' },
      { role: 'assistant', content: LONG_REPLY },
      { role: 'user', content: 'Make it short.' },
      { role: 'user', content: 'And funny.' },
    ]);
    await c.close();
  });

  it('answers response.cancel with nothing running with response_cancel_not_active', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'response.cancel', event_id: 'evt_cancel' });
    const refused = await nextError(c, 'response_cancel_not_active');
    expect(refused.event_id).toBe('evt_cancel');
    // OpenAI's words, which LiveKit Agents takes for a cancel that came too late.
    expect(refused.message).toMatch(/^Cancellation failed/);
    expect(doneOf(await turn(c, 'Hello.')).status).toBe('completed');
    await c.close();
  });

  it('refuses to cancel a response by an id that is not the running one', async () => {
    t.simulator.setLatency({ tokensPerSec: 100 });
    const c = await openSession(t, 'character=plain');
    say(c, 'Tell me a story.');
    await c.next('response.created');
    c.send({ type: 'response.cancel', response_id: 'resp_other' });
    expect((await nextError(c, 'invalid_value')).param).toBe('response_id');
    expect(doneOf(await c.untilDone()).status).toBe('completed');
    await c.close();
  });
});
