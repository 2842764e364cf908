import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  doneOf,
  lastChat,
  nextError,
  openSession,
  outline,
  turn,
  userMessage,
} from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());

/** A 1×1 PNG. */
const PIXEL =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** The socket is still open and a text turn still completes. */
async function stillWorks(c: TestClient): Promise<void> {
  expect(c.ws.readyState).toBe(WebSocket.OPEN);
  const events = await turn(c, 'Hello there!');
  expect(doneOf(events).status).toBe('completed');
}

/** Adds a user message and returns its item id. */
async function addUser(c: TestClient, text: string, extra: Record<string, unknown> = {}) {
  c.send(userMessage(text, extra));
  const done = await c.next('conversation.item.done', (e) =>
    JSON.stringify(e.item).includes(JSON.stringify(text)),
  );
  return (done.item as { id: string }).id;
}

describe('conversation items', () => {
  it('sends an image part to the model as image_url beside the text', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is in this picture?' },
          { type: 'input_image', image_url: PIXEL },
        ],
      },
    });
    const added = await c.next(
      'conversation.item.added',
      (e) => (e.item as { role: string }).role === 'user',
    );
    expect(added.item).toMatchObject({
      content: [{ type: 'input_text' }, { type: 'input_image', image_url: PIXEL }],
    });
    c.send({ type: 'response.create' });
    expect(doneOf(await c.untilDone()).status).toBe('completed');
    expect(lastChat(t.simulator).messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image_url', image_url: { url: PIXEL } },
      ],
    });
    await c.close();
  });

  it('refuses an image in an assistant message and audio content', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'assistant',
        content: [{ type: 'input_image', image_url: PIXEL }],
      },
    });
    expect((await nextError(c, 'invalid_value')).param).toBe('item.content[0]');
    c.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_audio', audio: 'AAAA' }] },
    });
    expect((await nextError(c, 'unsupported_content')).param).toBe('item.content[0]');
    c.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'output_text', text: 'x' }] },
    });
    expect((await nextError(c, 'invalid_value')).param).toBe('item.content[0].type');
    await stillWorks(c);
    await c.close();
  });

  it.each([
    ['characters outside base64', 'data:image/png;base64,!!!'],
    ['a length that is no multiple of 4', 'data:image/png;base64,AAA'],
    ['padding in the middle', 'data:image/png;base64,AA==AAAA'],
    ['nothing after the comma', 'data:image/png;base64,'],
  ])('refuses an image data URL with %s, naming the part', async (_, url) => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'conversation.item.create',
      event_id: 'evt_img',
      item: {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'Look:' },
          { type: 'input_image', image_url: url },
        ],
      },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'item.content[1].image_url', event_id: 'evt_img' });
    expect(error.message).toContain('expected base64 after ";base64,"');
    await stillWorks(c);
    await c.close();
  });

  it.each([
    ['a newline', 'item\nnext', 'expected an id without control characters'],
    ['a NUL', 'item\u0000', 'expected an id without control characters'],
    ['the name "root"', 'root', 'expected an id other than "root"'],
  ])('refuses an item.id holding %s', async (_, id, problem) => {
    const c = await openSession(t, 'character=plain');
    c.send({ ...userMessage('Hi', { id }), event_id: 'evt_id' });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'item.id', event_id: 'evt_id' });
    expect(error.message).toContain(problem);
    await stillWorks(c);
    await c.close();
  });

  it('takes audio parts with a transcript, which the model reads and retrieve shows', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'assistant',
        content: [{ type: 'output_audio', transcript: 'I said this aloud.' }],
      },
    });
    await c.next('conversation.item.added');
    c.send({
      type: 'conversation.item.create',
      item: {
        id: 'item_spoken',
        type: 'message',
        role: 'user',
        content: [{ type: 'input_audio', audio: 'AAAA', transcript: 'And I answered.' }],
      },
    });
    await c.next('conversation.item.added');
    c.send({ type: 'conversation.item.retrieve', item_id: 'item_spoken' });
    const retrieved = await c.next('conversation.item.retrieved');
    expect((retrieved.item as { content: unknown }).content).toEqual([
      { type: 'input_audio', transcript: 'And I answered.' },
    ]);
    c.send({ type: 'response.create' });
    await c.untilDone();
    expect(outline(lastChat(t.simulator).messages).slice(-2)).toEqual([
      'assistant: I said this aloud.',
      'user: And I answered.',
    ]);
    await c.close();
  });

  it('refuses audio without a transcript, saying what the role takes instead', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'conversation.item.create',
      event_id: 'evt_audio',
      item: {
        type: 'message',
        role: 'assistant',
        content: [{ type: 'output_audio', audio: 'AAAA' }],
      },
    });
    const error = await nextError(c, 'unsupported_content');
    expect(error).toMatchObject({ param: 'item.content[0]', event_id: 'evt_audio' });
    expect(error.message).toContain(
      'give an output_audio part its "transcript", or send "output_text" parts',
    );
    expect(error.message).not.toContain('voice session');
    c.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'assistant',
        content: [{ type: 'input_audio', transcript: 'x' }],
      },
    });
    expect((await nextError(c, 'invalid_value')).param).toBe('item.content[0].type');
    await stillWorks(c);
    await c.close();
  });

  it("retrieves an item by id and answers an unknown one with OpenAI's item_retrieve_invalid_item_id", async () => {
    const c = await openSession(t, 'character=plain');
    const id = await addUser(c, 'Remember me.');
    c.send({ type: 'conversation.item.retrieve', item_id: id });
    expect((await c.next('conversation.item.retrieved')).item).toMatchObject({
      id,
      role: 'user',
      content: [{ type: 'input_text', text: 'Remember me.' }],
    });
    c.send({ type: 'conversation.item.retrieve', item_id: 'item_nope', event_id: 'evt_r' });
    expect(await nextError(c, 'item_retrieve_invalid_item_id')).toMatchObject({
      param: 'item_id',
      event_id: 'evt_r',
    });
    await stillWorks(c);
    await c.close();
  });

  it("deletes a client's message, which the model then no longer sees", async () => {
    const c = await openSession(t, 'character=plain');
    const id = await addUser(c, 'Forget this secret.');
    c.send({ type: 'conversation.item.delete', item_id: id });
    expect(await c.next('conversation.item.deleted')).toMatchObject({ item_id: id });
    c.send({ type: 'conversation.item.retrieve', item_id: id });
    await nextError(c, 'item_retrieve_invalid_item_id');
    await stillWorks(c);
    expect(JSON.stringify(lastChat(t.simulator).messages)).not.toContain('Forget this secret');
    await c.close();
  });

  it('deletes the greeting like any single message', async () => {
    const c = await openSession(t, 'character=plain');
    const greeting = (
      c.events.find((e) => e.type === 'conversation.item.added')!.item as {
        id: string;
      }
    ).id;
    c.send({ type: 'conversation.item.delete', item_id: greeting });
    await c.next('conversation.item.deleted');
    await stillWorks(c);
    expect(outline(lastChat(t.simulator).messages).slice(1)).toEqual(['user: Hello there!']);
    await c.close();
  });

  it("deletes a finished reply's messages, but not its call or result, which stay paired", async () => {
    const c = await openSession(t, 'character=weather');
    const events = await turn(c, 'Celsius, please.');
    const output = doneOf(events).output as Array<{ id: string; type: string }>;
    expect(output.map((i) => i.type)).toEqual(['message', 'mcp_call', 'message']);
    const call = output[1]!.id;
    c.send({ type: 'conversation.item.delete', item_id: call });
    const refused = await nextError(c, 'item_not_deletable');
    expect(refused.param).toBe('item_id');
    expect(refused.message).toMatch(/mcp_call item; a tool call and its result stay paired/);
    for (const item of [output[0]!, output[2]!]) {
      c.send({ type: 'conversation.item.delete', item_id: item.id });
      expect((await c.next('conversation.item.deleted')).item_id).toBe(item.id);
    }
    c.send({ type: 'conversation.item.retrieve', item_id: output[2]!.id });
    await nextError(c, 'item_retrieve_invalid_item_id');
    c.send({ type: 'conversation.item.delete', item_id: 'item_nope' });
    await nextError(c, 'item_delete_invalid_item_id');
    await stillWorks(c);
    // The round's call keeps its result; the words around it are gone.
    const sent = outline(lastChat(t.simulator).messages).slice(1);
    expect(sent).toEqual([
      'assistant: Hi! Ask me about the weather anywhere.',
      'user: Celsius, please.',
      expect.stringMatching(/^assistant: \[get_current_weather\([\w-]+\)\]$/),
      expect.stringMatching(/^tool\([\w-]+\): \{"location"/),
      'user: Hello there!',
    ]);
    expect(lastChat(t.simulator).messages[3]).toMatchObject({ role: 'assistant', content: null });
    await c.close();
  });

  it('refuses to truncate a text item, which has no audio', async () => {
    const c = await openSession(t, 'character=plain');
    const id = await addUser(c, 'Some text.');
    c.send({
      type: 'conversation.item.truncate',
      item_id: id,
      content_index: 0,
      audio_end_ms: 100,
    });
    expect((await nextError(c, 'invalid_value')).param).toBe('item_id');
    c.send({
      type: 'conversation.item.truncate',
      item_id: 'item_nope',
      content_index: 0,
      audio_end_ms: 0,
    });
    await nextError(c, 'item_truncate_invalid_item_id');
    await stillWorks(c);
    await c.close();
  });

  it('puts an item where previous_item_id says: at the end, first (root) or after an item', async () => {
    const c = await openSession(t, 'character=plain');
    const greeting = (
      c.events.find((e) => e.type === 'conversation.item.added')!.item as {
        id: string;
      }
    ).id;
    const first = await addUser(c, 'One.', {});
    c.send({ ...userMessage('Two.'), previous_item_id: first });
    expect(await c.next('conversation.item.added')).toMatchObject({ previous_item_id: first });
    c.send({ ...userMessage('After the greeting.'), previous_item_id: greeting });
    expect(await c.next('conversation.item.added')).toMatchObject({ previous_item_id: greeting });
    c.send({ ...userMessage('Before all.'), previous_item_id: 'root' });
    expect(await c.next('conversation.item.added')).toMatchObject({ previous_item_id: null });

    c.send({ ...userMessage('Nowhere.'), previous_item_id: 'item_nope', event_id: 'evt_prev' });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'previous_item_id', event_id: 'evt_prev' });
    expect(error.message).toBe(
      'conversation.item.create: previous_item_id: no item "item_nope" is in the conversation.',
    );
    c.send({
      type: 'conversation.item.create',
      previous_item_id: greeting,
      item: { type: 'function_call_output', call_id: 'call_x', output: '{}' },
    });
    expect((await nextError(c, 'invalid_value')).message).toContain(
      'a function_call_output item is added at the end of the conversation',
    );

    // The model reads them in that order.
    c.send({ type: 'response.create' });
    await c.untilDone();
    const said = outline(lastChat(t.simulator).messages).slice(1);
    expect(said).toEqual([
      'user: Before all.',
      expect.stringMatching(/^assistant: /),
      'user: After the greeting.',
      'user: One.',
      'user: Two.',
    ]);
    await stillWorks(c);
    await c.close();
  });

  it('refuses an item id that is already in the conversation', async () => {
    const c = await openSession(t, 'character=plain');
    await addUser(c, 'Mine.', { id: 'item_client_1' });
    c.send(userMessage('Again.', { id: 'item_client_1' }));
    expect((await nextError(c, 'invalid_value')).param).toBe('item.id');
    await stillWorks(c);
    await c.close();
  });

  it('answers input_audio_buffer events with audio_not_supported', async () => {
    const c = await openSession(t, 'character=plain');
    for (const event of [
      { type: 'input_audio_buffer.append', audio: 'AAAA', event_id: 'evt_a' },
      { type: 'input_audio_buffer.commit' },
      { type: 'input_audio_buffer.clear' },
    ]) {
      c.send(event);
      await nextError(c, 'audio_not_supported');
    }
    expect(c.events.find((e) => e.type === 'error')).toMatchObject({
      error: { event_id: 'evt_a' },
    });
    await stillWorks(c);
    await c.close();
  });

  it('answers frames it cannot read with an error and keeps the socket', async () => {
    const c = await openSession(t, 'character=plain');
    c.send('not json');
    await nextError(c, 'invalid_json');
    c.send({ type: 'session.destroy', event_id: 'evt_u' });
    expect((await nextError(c, 'unknown_event_type')).event_id).toBe('evt_u');
    c.send({ type: 'toString' });
    await nextError(c, 'unknown_event_type');
    c.send({ type: 'session.update', session: { foo: 1 } });
    expect((await nextError(c, 'unknown_parameter')).param).toBe('session.foo');
    await stillWorks(c);
    await c.close();
  });
});
