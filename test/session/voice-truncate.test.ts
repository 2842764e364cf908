/**
 * `conversation.item.truncate`: the client says how much of a spoken item it
 * played; the model is then told only that much was said.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../helpers/server.js';
import { lastChat, nextError, userMessage } from '../helpers/session.js';
import type { TestClient } from '../helpers/realtime-client.js';
import { audioMs, fakeVoice, openVoiceSession, startVoiceServer } from '../helpers/voice.js';

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

/** Waits until the client was sent at least `ms` of audio. */
async function played(c: TestClient, ms: number): Promise<void> {
  while (audioMs(c.events) < ms) await c.next('response.output_audio.delta');
}

type Done = {
  output: Array<{ id: string; status: string; content: Array<{ transcript: string }> }>;
};

/** Says `text` and waits for the spoken reply: its first item. */
async function reply(c: TestClient, text: string): Promise<Done['output'][number]> {
  c.send(userMessage(text));
  c.send({ type: 'response.create' });
  return ((await c.next('response.done')).response as Done).output[0]!;
}

/** Asks to cut `itemId`'s audio (its part 0) at `audioEndMs`. */
function truncate(c: TestClient, itemId: string, audioEndMs: number, eventId?: string): void {
  c.send({
    type: 'conversation.item.truncate',
    item_id: itemId,
    content_index: 0,
    audio_end_ms: audioEndMs,
    ...(eventId ? { event_id: eventId } : {}),
  });
}

/** Says "Go on." and returns what the model was sent for it, the system prompt left out. */
async function modelReads(c: TestClient): Promise<unknown[]> {
  c.send(userMessage('Go on.'));
  c.send({ type: 'response.create' });
  await c.next('response.done');
  return lastChat(t.simulator).messages.slice(1);
}

describe('conversation.item.truncate', () => {
  it('after a spoken reply, cuts what the model is told to the words that played', async () => {
    const c = await openVoiceSession(t);
    const item = await reply(c, 'Count to ten.');
    expect(item.content[0]!.transcript).toBe(COUNT);

    // 300 ms at 20 ms a character: the words starting in the first 15 characters.
    truncate(c, item.id, 300);
    const truncated = await c.next('conversation.item.truncated');
    expect(truncated).toMatchObject({ item_id: item.id, content_index: 0, audio_end_ms: 300 });
    c.send({ type: 'conversation.item.retrieve', item_id: item.id });
    const retrieved = await c.next('conversation.item.retrieved');
    expect(retrieved.item).toMatchObject({
      id: item.id,
      status: 'incomplete',
      content: [{ type: 'output_audio', transcript: 'One two three four' }],
    });

    expect(await modelReads(c)).toEqual([
      { role: 'user', content: 'Count to ten.' },
      { role: 'assistant', content: 'One two three four' },
      { role: 'user', content: 'Go on.' },
    ]);
    await c.close();
  });

  it('while the reply plays, stops it there, and every event after says the cut text', async () => {
    const c = await openVoiceSession(t);
    c.send(userMessage('Count to ten.'));
    c.send({ type: 'response.create' });
    const delta = await c.next('response.output_audio.delta');
    await played(c, 200);
    c.send({
      type: 'conversation.item.truncate',
      item_id: delta.item_id,
      content_index: 0,
      audio_end_ms: 200,
    });
    const truncated = await c.next('conversation.item.truncated');
    expect(truncated.item_id).toBe(delta.item_id);
    const from = c.events.indexOf(truncated);
    const done = (await c.next('response.done')).response as Done & { status: string };
    expect(done.status).toBe('cancelled');
    expect(done.output[0]).toMatchObject({
      id: delta.item_id,
      status: 'incomplete',
      content: [{ transcript: 'One two three' }],
    });
    const after = c.events.slice(from);
    // Nothing more of it is spoken, and nothing says more of it was said.
    expect(after.filter((e) => e.type === 'response.output_audio.delta')).toEqual([]);
    for (const type of [
      'response.output_audio_transcript.done',
      'response.output_item.done',
      'conversation.item.done',
    ]) {
      const e = after.find((x) => x.type === type)!;
      expect(JSON.stringify(e), type).toContain('One two three');
      expect(JSON.stringify(e), type).not.toContain('four');
    }
    expect(await modelReads(c)).toEqual([
      { role: 'user', content: 'Count to ten.' },
      { role: 'assistant', content: 'One two three' },
      { role: 'user', content: 'Go on.' },
    ]);
    await c.close();
  });

  it('refuses a part other than the audio, and more audio than was sent or kept', async () => {
    const c = await openVoiceSession(t);
    const { id } = await reply(c, 'Count to ten.');
    const cut = (content_index: number, audio_end_ms: number, event_id: string) =>
      c.send({
        type: 'conversation.item.truncate',
        item_id: id,
        content_index,
        audio_end_ms,
        event_id,
      });

    cut(1, 300, 'part-1');
    const part = await nextError(c, 'invalid_value');
    expect(part).toMatchObject({ param: 'content_index', event_id: 'part-1' });
    expect(part.message).toMatch(/part 0, not 1/);

    cut(0, 999_999, 'too-long');
    const long = await nextError(c, 'invalid_value');
    expect(long).toMatchObject({ param: 'audio_end_ms', event_id: 'too-long' });
    expect(long.message).toMatch(/has \d+ ms of audio, shorter than 999999 ms/);

    cut(0, 300, 'first-cut');
    await c.next('conversation.item.truncated');
    cut(0, 600, 'longer-cut');
    const again = await nextError(c, 'invalid_value');
    expect(again).toMatchObject({ param: 'audio_end_ms', event_id: 'longer-cut' });
    expect(again.message).toMatch(/has 300 ms of audio, shorter than 600 ms/);
    // A shorter cut is still taken.
    cut(0, 100, 'shorter-cut');
    await c.next('conversation.item.truncated');
    await c.close();
  });

  it('cuts an older spoken reply, not only the last one, and the model reads the cut', async () => {
    const c = await openVoiceSession(t);
    const first = await reply(c, 'Count to ten.');
    const second = await reply(c, 'Thanks.');
    expect(second.content[0]!.transcript).toBe('Okay.');

    truncate(c, first.id, 300);
    expect(await c.next('conversation.item.truncated')).toMatchObject({
      item_id: first.id,
      audio_end_ms: 300,
    });
    c.send({ type: 'conversation.item.retrieve', item_id: first.id });
    expect((await c.next('conversation.item.retrieved')).item).toMatchObject({
      status: 'incomplete',
      content: [{ type: 'output_audio', transcript: 'One two three four' }],
    });
    expect(await modelReads(c)).toEqual([
      { role: 'user', content: 'Count to ten.' },
      { role: 'assistant', content: 'One two three four' },
      { role: 'user', content: 'Thanks.' },
      { role: 'assistant', content: 'Okay.' },
      { role: 'user', content: 'Go on.' },
    ]);
    await c.close();
  });

  it('cuts the reply the user spoke over while the next response already runs, which goes on', async () => {
    const c = await openVoiceSession(t);
    const first = await reply(c, 'Count to ten.');
    c.send(userMessage('Count again.'));
    c.send({ type: 'response.create' });
    // The next reply is speaking: the client now says how much of the first it played.
    const speaking = await c.next('response.output_audio.delta');
    expect(speaking.item_id).not.toBe(first.id);
    truncate(c, first.id, 200);
    expect((await c.next('conversation.item.truncated')).item_id).toBe(first.id);
    const next = (await c.next('response.done')).response as Done & { status: string };
    expect(next.status).toBe('completed');
    expect(next.output[0]!.content[0]!.transcript).toBe(COUNT);
    expect((await modelReads(c)).slice(0, 2)).toEqual([
      { role: 'user', content: 'Count to ten.' },
      { role: 'assistant', content: 'One two three' },
    ]);
    await c.close();
  });

  it('refuses to cut an older reply past its audio, and past an earlier cut', async () => {
    const c = await openVoiceSession(t);
    const first = await reply(c, 'Count to ten.');
    await reply(c, 'Thanks.');
    const cut = (audioEndMs: number, eventId: string) => truncate(c, first.id, audioEndMs, eventId);

    cut(999_999, 'too-long');
    const long = await nextError(c, 'invalid_value');
    expect(long).toMatchObject({ param: 'audio_end_ms', event_id: 'too-long' });
    expect(long.message).toMatch(/has \d+ ms of audio, shorter than 999999 ms/);
    cut(300, 'first-cut');
    await c.next('conversation.item.truncated');
    cut(600, 'longer-cut');
    const again = await nextError(c, 'invalid_value');
    expect(again).toMatchObject({ param: 'audio_end_ms', event_id: 'longer-cut' });
    expect(again.message).toMatch(/has 300 ms of audio, shorter than 600 ms/);
    await c.close();
  });

  it("answers an unknown item with OpenAI's item_truncate_invalid_item_id", async () => {
    const c = await openVoiceSession(t);
    c.send({
      type: 'conversation.item.truncate',
      item_id: 'item_nope',
      content_index: 0,
      audio_end_ms: 100,
      event_id: 'cut',
    });
    const error = await nextError(c, 'item_truncate_invalid_item_id');
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
