/**
 * `conversation.item.truncate`: the client says how much of a spoken item it
 * played; the model is then told only that much was said.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../helpers/server.js';
import { lastChat, nextError, userMessage } from '../helpers/session.js';
import { fakeVoice, openVoiceSession, startVoiceServer } from '../helpers/voice.js';

/** One sentence: one TTS segment, whose words start every (chars before them × 20 ms). */
const COUNT = 'One two three four five six seven eight nine ten.';

let t: TestServer;

beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice(),
    script: {
      rules: [{ when: { user: 'count' }, reply: { parts: [{ text: COUNT }] } }],
      fallback: { parts: [{ text: 'Okay.' }] },
    },
  });
});
afterAll(() => t?.close());

type Done = {
  output: Array<{ id: string; status: string; content: Array<{ transcript: string }> }>;
};

describe('conversation.item.truncate', () => {
  it('after a spoken reply, cuts what the model is told to the words that played', async () => {
    const c = await openVoiceSession(t);
    c.send(userMessage('Count to ten.'));
    c.send({ type: 'response.create' });
    const done = (await c.next('response.done')).response as Done;
    const item = done.output[0]!;
    expect(item.content[0]!.transcript).toBe(COUNT);

    // 300 ms at 20 ms a character: the words starting in the first 15 characters.
    c.send({
      type: 'conversation.item.truncate',
      item_id: item.id,
      content_index: 0,
      audio_end_ms: 300,
    });
    const truncated = await c.next('conversation.item.truncated');
    expect(truncated).toMatchObject({ item_id: item.id, content_index: 0, audio_end_ms: 300 });
    c.send({ type: 'conversation.item.retrieve', item_id: item.id });
    const retrieved = await c.next('conversation.item.retrieved');
    expect(retrieved.item).toMatchObject({
      id: item.id,
      status: 'incomplete',
      content: [{ type: 'output_audio', transcript: 'One two three four' }],
    });

    c.send(userMessage('Go on.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    expect(lastChat(t.simulator).messages.slice(1)).toEqual([
      { role: 'user', content: 'Count to ten.' },
      { role: 'assistant', content: 'One two three four' },
      { role: 'user', content: 'Go on.' },
    ]);
    await c.close();
  });

  it('while the reply plays, cuts it when the reply ends', async () => {
    const c = await openVoiceSession(t);
    c.send(userMessage('Count to ten.'));
    c.send({ type: 'response.create' });
    const delta = await c.next('response.output_audio.delta');
    c.send({
      type: 'conversation.item.truncate',
      item_id: delta.item_id,
      content_index: 0,
      audio_end_ms: 200,
    });
    const truncated = await c.next('conversation.item.truncated');
    expect(truncated.item_id).toBe(delta.item_id);
    const done = (await c.next('response.done')).response as Done;
    expect(done.output[0]).toMatchObject({
      id: delta.item_id,
      status: 'incomplete',
      content: [{ transcript: 'One two three' }],
    });
    c.send(userMessage('Go on.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    expect(lastChat(t.simulator).messages.slice(1)).toEqual([
      { role: 'user', content: 'Count to ten.' },
      { role: 'assistant', content: 'One two three' },
      { role: 'user', content: 'Go on.' },
    ]);
    await c.close();
  });

  it('answers an unknown item with item_not_found', async () => {
    const c = await openVoiceSession(t);
    c.send({
      type: 'conversation.item.truncate',
      item_id: 'item_nope',
      content_index: 0,
      audio_end_ms: 100,
      event_id: 'cut',
    });
    const error = await nextError(c, 'item_not_found');
    expect(error).toMatchObject({ param: 'item_id', event_id: 'cut' });
    expect(error.message).toMatch(/item_nope/);
    await c.close();
  });

  it('refuses to truncate a user message, which has no audio', async () => {
    const c = await openVoiceSession(t);
    c.send(userMessage('Count to ten.', { id: 'msg_user_1' }));
    await c.next('conversation.item.done');
    c.send({
      type: 'conversation.item.truncate',
      item_id: 'msg_user_1',
      content_index: 0,
      audio_end_ms: 100,
    });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('item_id');
    expect(error.message).toMatch(/msg_user_1.*no audio to truncate/);
    await c.close();
  });
});
