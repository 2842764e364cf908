/**
 * A voice turn over a real socket: speech in (flite audio, real VAD),
 * a scripted transcript, the turn engine, tone speech out — paced, with
 * the transcript given as its audio plays.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { concat, sendAudio, silence, soundBounds, speech } from '../helpers/audio.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { lastChat, openSession } from '../helpers/session.js';
import {
  audioChunks,
  audioMs,
  fakeVoice,
  openVoiceSession,
  speak,
  spokenText,
  startVoiceServer,
  typesOf,
} from '../helpers/voice.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    voice: await fakeVoice({ transcripts: () => "What's the weather in Glasgow?" }),
  });
});
afterAll(() => t?.close());

describe('a spoken question', () => {
  it('is heard, transcribed, answered and spoken back', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    const question = concat(
      silence(300),
      await speech("what's the weather in glasgow"),
      silence(900),
    );
    sendAudio(c, question);
    const started = await c.next('input_audio_buffer.speech_started');
    const stopped = await c.next('input_audio_buffer.speech_stopped');
    expect(stopped.item_id).toBe(started.item_id);
    await c.next('input_audio_buffer.committed');
    const completed = await c.next('conversation.item.input_audio_transcription.completed');
    expect(completed.transcript).toBe("What's the weather in Glasgow?");
    const events = await c.untilDone();
    const audio = events.filter((e) => e.type === 'response.output_audio.delta');
    expect(audio.length).toBeGreaterThan(0);
    const transcript = events
      .filter((e) => e.type === 'response.output_audio_transcript.delta')
      .map((e) => e.delta)
      .join('');
    expect(transcript).toBe('Sure in celsius or fahrenheit?'.replace('Sure in', 'Sure — in'));
    const done = events.at(-1)!;
    expect((done.response as { status: string }).status).toBe('completed');
    const user = lastChat(t.simulator).messages.at(-1);
    expect(user).toEqual({ role: 'user', content: "What's the weather in Glasgow?" });
    await c.close();
  });
});

// ── Server VAD, event by event ──────────────────────────────────────────────

const QUESTION = "what's the weather in glasgow";
const HEARD = "What's the weather in Glasgow?";
const ANSWER = 'It is raining in Glasgow, as usual. Take an umbrella with you.';
/** Tone speech per character of the answer (fakeVoice's default). */
const MS_PER_CHAR = 20;

describe('a server VAD turn', () => {
  let v: TestServer;
  beforeAll(async () => {
    v = await startVoiceServer({
      voice: await fakeVoice({ transcripts: () => HEARD }),
      script: { rules: [{ when: { user: 'glasgow' }, reply: { parts: [{ text: ANSWER }] } }] },
    });
  });
  afterAll(() => v?.close());

  it('reports speech on the input clock, with the prefix padding in audio_start_ms', async () => {
    const c = await openVoiceSession(v);
    const words = await speech(QUESTION);
    const sound = soundBounds(words);
    const lead = 1000;
    sendAudio(c, concat(silence(lead), words, silence(900)));
    const started = await c.next('input_audio_buffer.speech_started');
    const stopped = await c.next('input_audio_buffer.speech_stopped');
    const committed = await c.next('input_audio_buffer.committed');
    expect(stopped.item_id).toBe(started.item_id);
    expect(committed.item_id).toBe(started.item_id);
    // The start is where the words begin less 300 ms of padding; the VAD works in 10 ms frames.
    const start = started.audio_start_ms as number;
    expect(Math.abs(start - (lead + sound.startMs - 300))).toBeLessThanOrEqual(40);
    const end = stopped.audio_end_ms as number;
    expect(Math.abs(end - (lead + sound.endMs))).toBeLessThanOrEqual(60);
    await c.untilDone();
    await c.close();
  });

  it('transcribes the utterance into a user item and answers it in speech', async () => {
    const c = await openVoiceSession(v);
    const from = c.events.length;
    await speak(c, QUESTION);
    const done = await c.next('response.done', undefined, 8_000);
    const events = c.events.slice(from);
    const types = typesOf(events);
    const itemId = events.find((e) => e.type === 'input_audio_buffer.speech_started')!.item_id;

    // The input side, in order.
    const order = [
      'input_audio_buffer.speech_started',
      'input_audio_buffer.speech_stopped',
      'input_audio_buffer.committed',
      'conversation.item.added',
      'conversation.item.input_audio_transcription.delta',
      'conversation.item.input_audio_transcription.completed',
      'conversation.item.done',
      'response.created',
    ];
    const at = order.map((type) => types.indexOf(type));
    expect(
      at.every((i) => i >= 0),
      types.join(', '),
    ).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    for (const e of events.slice(0, at.at(-1))) {
      if ('item_id' in e) expect(e.item_id, e.type).toBe(itemId);
    }
    const added = events[at[3]!]!.item as Record<string, unknown>;
    // Announced before its transcript exists with `transcript: null`, as OpenAI's API announces it.
    expect(added).toMatchObject({
      id: itemId,
      role: 'user',
      status: 'in_progress',
      content: [{ type: 'input_audio', transcript: null }],
    });
    expect(events[at[4]!]!.delta).toBe(HEARD);
    expect(events[at[5]!]!.transcript).toBe(HEARD);
    const userItem = events[at[6]!]!.item as Record<string, unknown>;
    expect(userItem).toMatchObject({
      id: itemId,
      type: 'message',
      role: 'user',
      status: 'completed',
      content: [{ type: 'input_audio', transcript: HEARD }],
    });

    // The output side: one spoken assistant item.
    const response = done.response as {
      id: string;
      status: string;
      output: Array<Record<string, unknown>>;
      troupe: { first_audio_ms?: number };
    };
    expect(response.status).toBe('completed');
    expect(response.output).toHaveLength(1);
    const reply = response.output[0]!;
    expect(reply).toMatchObject({
      type: 'message',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_audio', transcript: ANSWER }],
    });
    const out = events.slice(at.at(-1));
    for (const e of out) {
      if ('response_id' in e) expect(e.response_id, e.type).toBe(response.id);
      if ('item_id' in e) expect(e.item_id, e.type).toBe(reply.id);
      if ('output_index' in e) expect(e.output_index, e.type).toBe(0);
    }
    const outTypes = typesOf(out).filter(
      (t) => t !== 'response.output_audio.delta' && t !== 'response.output_audio_transcript.delta',
    );
    expect(outTypes).toEqual([
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.content_part.added',
      'response.output_audio.done',
      'response.output_audio_transcript.done',
      'response.content_part.done',
      'response.output_item.done',
      'conversation.item.done',
      'response.done',
    ]);
    // The typings' part type: "audio" (the item's content says output_audio).
    expect(out.find((e) => e.type === 'response.content_part.added')!.part).toEqual({
      type: 'audio',
      transcript: '',
    });
    expect(out.find((e) => e.type === 'response.content_part.done')!.part).toEqual({
      type: 'audio',
      transcript: ANSWER,
    });
    expect(out.find((e) => e.type === 'response.output_audio_transcript.done')!.transcript).toBe(
      ANSWER,
    );
    // Audio first, then the words as they play; all of it before output_audio.done.
    const firstAudio = typesOf(out).indexOf('response.output_audio.delta');
    const lastAudio = typesOf(out).lastIndexOf('response.output_audio.delta');
    expect(firstAudio).toBeGreaterThan(typesOf(out).indexOf('response.content_part.added'));
    expect(lastAudio).toBeLessThan(typesOf(out).indexOf('response.output_audio.done'));
    expect(spokenText(out)).toBe(ANSWER);
    expect(out.filter((e) => e.type === 'response.output_audio_transcript.delta').length).toBe(
      ANSWER.split(' ').length,
    );

    // The audio: base64 PCM16 (whole samples), as long as the tone engine makes the text.
    const chunks = audioChunks(out);
    for (const chunk of chunks) expect(chunk.length % 2).toBe(0);
    const expectedMs = ANSWER.replaceAll(' ', '').length * MS_PER_CHAR;
    expect(audioMs(out)).toBeGreaterThanOrEqual(expectedMs);
    expect(audioMs(out)).toBeLessThanOrEqual(ANSWER.length * MS_PER_CHAR + 100);
    expect(response.troupe.first_audio_ms).toEqual(expect.any(Number));
    expect(response.troupe.first_audio_ms!).toBeGreaterThan(0);

    // The model heard the transcript as the user's message.
    expect(lastChat(v.simulator).messages.at(-1)).toEqual({ role: 'user', content: HEARD });
    expect(events.some((e) => e.type.startsWith('unmute.'))).toBe(false);
    await c.close();
  });
});
