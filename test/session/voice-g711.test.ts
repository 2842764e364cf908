/**
 * G.711 audio both ways (`audio/pcmu`, `audio/pcma`; beta `g711_ulaw`,
 * `g711_alaw`), as telephony frontends send and want it: 8 kHz, one byte a
 * sample. The input is heard and timed on the 8 kHz clock, replies come back
 * at 8 kHz, and truncation counts their samples.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeG711, encodeG711, type G711Law } from '../../src/voice/audio/g711.js';
import { resample } from '../../src/voice/audio/resample.js';
import { concat, silence, soundBounds, speech } from '../helpers/audio.js';
import { connect, type Received, type TestClient } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { nextError, openSession, userMessage } from '../helpers/session.js';
import {
  audioChunks,
  audioMs,
  openVoiceSession,
  recordingStt,
  startVoiceServer,
  voiceOf,
} from '../helpers/voice.js';

/** One sentence: one TTS segment, whose words start every (chars before them × 20 ms). */
const COUNT = 'One two three four five six seven eight nine ten.';
const stt = recordingStt('Hello there.');

let t: TestServer;

beforeAll(async () => {
  t = await startVoiceServer({
    voice: await voiceOf({ stt }),
    script: {
      rules: [{ when: { user: 'count' }, reply: { parts: [{ text: COUNT }] } }],
      fallback: { parts: [{ text: 'Okay.' }] },
    },
  });
});
afterAll(() => t?.close());

/** 24 kHz PCM as 8 kHz G.711 bytes. */
function toG711(pcm24k: Int16Array, law: G711Law): Uint8Array {
  return encodeG711(resample(pcm24k, 24_000, 8_000), law);
}

/** Sends G.711 bytes as appends of 20 ms (160 bytes), as a phone line's media frames come. */
function sendG711(c: TestClient, bytes: Uint8Array): void {
  for (let at = 0; at < bytes.length; at += 160) {
    const frame = Buffer.from(bytes.subarray(at, at + 160));
    c.send({ type: 'input_audio_buffer.append', audio: frame.toString('base64') });
  }
}

/** The output audio bytes of `events` (G.711: one byte a sample). */
function outputBytes(events: readonly Received[]): Uint8Array {
  return new Uint8Array(Buffer.concat(audioChunks(events)));
}

/** Signal-to-noise ratio of `actual` against `expected`, in dB, over their common length. */
function snrDb(expected: Int16Array, actual: Int16Array): number {
  let signal = 0;
  let noise = 0;
  for (let i = 0; i < Math.min(expected.length, actual.length); i++) {
    signal += expected[i]! ** 2;
    noise += (actual[i]! - expected[i]!) ** 2;
  }
  return 10 * Math.log10(signal / Math.max(noise, 1));
}

/** A session with `type` both ways, its `session.updated` checked. */
async function g711Session(type: string, extra: Record<string, unknown> = {}) {
  const c = await openVoiceSession(t, 'character=quiet', {
    output_modalities: ['audio'],
    audio: { input: { format: { type }, ...extra }, output: { format: { type } } },
  });
  return c;
}

describe.each([
  { type: 'audio/pcmu', law: 'mulaw' as const },
  { type: 'audio/pcma', law: 'alaw' as const },
])('$type', ({ type, law }) => {
  it('is taken for input and output and shown back as its type alone (8 kHz)', async () => {
    const c = await g711Session(type);
    const updated = c.events.findLast((e) => e.type === 'session.updated')!;
    const audio = (updated.session as { audio: Record<string, { format: unknown }> }).audio;
    expect(audio.input!.format).toEqual({ type });
    expect(audio.output!.format).toEqual({ type });
    await c.close();
  });

  it('hears speech sent in it on the 8 kHz clock and answers in it at 8 kHz', async () => {
    const c = await g711Session(type);
    const lead = 300;
    const words = await speech('hello there how are you');
    const heardBefore = stt.utterances.length;
    sendG711(c, toG711(concat(silence(lead), words, silence(900)), law));

    const stopped = await c.next('input_audio_buffer.speech_stopped');
    const bounds = soundBounds(words);
    expect(Math.abs((stopped.audio_end_ms as number) - (lead + bounds.endMs))).toBeLessThanOrEqual(
      60,
    );
    const transcript = await c.next('conversation.item.input_audio_transcription.completed');
    expect(transcript.transcript).toBe('Hello there.');
    // What reached the speech-to-text engine is the speech, at its rate, as loud as it was said.
    const utterance = stt.utterances[heardBefore]!;
    expect(utterance.length / 24).toBeGreaterThanOrEqual(bounds.endMs - bounds.startMs);
    const peak = (pcm: Int16Array) => pcm.reduce((m, s) => Math.max(m, Math.abs(s)), 0);
    expect(peak(utterance) / peak(words)).toBeGreaterThan(0.8);
    expect(peak(utterance) / peak(words)).toBeLessThan(1.2);

    const done = await c.next('response.done');
    const bytes = outputBytes(c.events);
    // "Okay." is 5 characters of tone at 20 ms each: 100 ms, 800 samples at 8 kHz.
    expect(bytes.length).toBe(800);
    expect((done.response as { output: unknown[] }).output).toHaveLength(1);
    await c.close();
  });

  it('sends the same reply as PCM16 would, at 8 kHz and within G.711 quantisation', async () => {
    const pcm = await openVoiceSession(t);
    pcm.send(userMessage('Count to ten.'));
    pcm.send({ type: 'response.create' });
    await pcm.next('response.done');
    const reference = new Int16Array(Buffer.concat(audioChunks(pcm.events)).buffer.slice(0));
    await pcm.close();

    const c = await g711Session(type);
    c.send(userMessage('Count to ten.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    const decoded = decodeG711(outputBytes(c.events), law);
    expect(decoded.length / 8).toBe(audioMs(pcm.events));
    // The engine's audio resampled straight to 8 kHz, against the PCM16 reply brought down to 8 kHz.
    expect(snrDb(resample(reference, 24_000, 8_000), decoded)).toBeGreaterThan(25);
    await c.close();
  });

  it('truncates a reply at audio_end_ms counted in 8 kHz samples', async () => {
    const c = await g711Session(type);
    c.send(userMessage('Count to ten.'));
    c.send({ type: 'response.create' });
    const done = (await c.next('response.done')).response as { output: Array<{ id: string }> };
    const item = done.output[0]!;
    expect(outputBytes(c.events).length).toBe(COUNT.length * 20 * 8);
    const cut = (audio_end_ms: number) =>
      c.send({
        type: 'conversation.item.truncate',
        item_id: item.id,
        content_index: 0,
        audio_end_ms,
      });
    // Its 7,840 bytes are 980 ms: no more can have played, and all of it may have.
    cut(981);
    expect((await nextError(c, 'invalid_value')).message).toMatch(/has 980 ms of audio/);
    cut(980);
    await c.next('conversation.item.truncated');
    // 300 ms at 20 ms a character: the words starting in the first 15 characters.
    c.send({
      type: 'conversation.item.truncate',
      item_id: item.id,
      content_index: 0,
      audio_end_ms: 300,
    });
    await c.next('conversation.item.truncated');
    c.send({ type: 'conversation.item.retrieve', item_id: item.id });
    const retrieved = await c.next('conversation.item.retrieved');
    expect(retrieved.item).toMatchObject({
      status: 'incomplete',
      content: [{ type: 'output_audio', transcript: 'One two three four' }],
    });
    await c.close();
  });

  it('counts the input buffer in 8 kHz bytes for a manual commit', async () => {
    const c = await g711Session(type, { turn_detection: null });
    // 400 bytes are 50 ms: too little to commit.
    sendG711(c, new Uint8Array(400).fill(law === 'mulaw' ? 0xff : 0xd5));
    c.send({ type: 'input_audio_buffer.commit' });
    const error = await nextError(c, 'input_audio_buffer_commit_empty');
    expect(error.message).toMatch(/holds 50 ms/);
    sendG711(c, new Uint8Array(480).fill(law === 'mulaw' ? 0xff : 0xd5));
    c.send({ type: 'input_audio_buffer.commit' });
    await c.next('input_audio_buffer.committed');
    await c.close();
  });
});

describe('G.711 format settings', () => {
  it("takes the beta names and shows them back in a beta client's session.updated", async () => {
    const c = await connect(`${t.wsUrl}?character=quiet&dialect=openai-beta`);
    await c.next('session.created');
    c.send({
      type: 'session.update',
      session: {
        modalities: ['audio', 'text'],
        input_audio_format: 'g711_ulaw',
        output_audio_format: 'g711_alaw',
      },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({
      input_audio_format: 'g711_ulaw',
      output_audio_format: 'g711_alaw',
    });
    c.send(userMessage('Hi.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    // Beta names its audio deltas response.audio.delta: "Okay." as 800 A-law bytes.
    const bytes = c.events
      .filter((e) => e.type === 'response.audio.delta')
      .reduce((n, e) => n + Buffer.from(e.delta as string, 'base64').length, 0);
    expect(bytes).toBe(800);
    await c.close();
  });

  it('takes the beta names from a GA client and shows the GA formats', async () => {
    const c = await openSession(t, 'character=quiet');
    c.send({
      type: 'session.update',
      session: { input_audio_format: 'g711_alaw', output_audio_format: 'g711_ulaw' },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({
      audio: {
        input: { format: { type: 'audio/pcma' } },
        output: { format: { type: 'audio/pcmu' } },
      },
    });
    await c.close();
  });

  it('keeps a reply in the format it started with; a change applies from the next reply', async () => {
    const c = await openVoiceSession(t);
    c.send(userMessage('Count to ten.'));
    c.send({ type: 'response.create' });
    await c.next('response.output_audio.delta');
    c.send({
      type: 'session.update',
      session: { audio: { output: { format: { type: 'audio/pcmu' } } } },
    });
    const first = (await c.next('response.done')).response as { id: string };
    const bytesOf = (responseId: string) =>
      c.events
        .filter((e) => e.type === 'response.output_audio.delta' && e.response_id === responseId)
        .reduce((n, e) => n + Buffer.from(e.delta as string, 'base64').length, 0);
    // All of it PCM16 at 24 kHz: two bytes a sample, 20 ms a character.
    expect(bytesOf(first.id)).toBe(COUNT.length * 20 * 48);
    c.send(userMessage('Count to ten.'));
    c.send({ type: 'response.create' });
    const second = (await c.next('response.done')).response as { id: string };
    expect(bytesOf(second.id)).toBe(COUNT.length * 20 * 8);
    await c.close();
  });

  it('takes rate 8000 and refuses any other rate for G.711, naming 8000', async () => {
    const c = await openSession(t, 'character=quiet');
    c.send({
      type: 'session.update',
      session: { audio: { input: { format: { type: 'audio/pcmu', rate: 8000 } } } },
    });
    await c.next('session.updated');
    c.send({
      type: 'session.update',
      session: { audio: { output: { format: { type: 'audio/pcma', rate: 16000 } } } },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('session.audio.output.format.rate');
    expect(error.message).toMatch(/audio\/pcma is taken at 8000 Hz only, got 16000/);
    await c.close();
  });
});
