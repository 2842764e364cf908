/**
 * Audio the server cannot take: each problem gets a clear error and the
 * session goes on (text turns, later audio).
 */
import { Encoder } from '@evan/opus';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OggOpusEncoder } from '../../src/voice/audio/ogg-opus.js';
import { encodePcm16Base64 } from '../../src/voice/audio/pcm.js';
import { concat, firstDifference, sendAudio, silence, speech } from '../helpers/audio.js';
import { say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { nextError, openSession, textOf, turn } from '../helpers/session.js';
import {
  barrier,
  fakeVoice,
  openVoiceSession,
  recordingStt,
  startVoiceServer,
  voiceOf,
  type RecordingStt,
} from '../helpers/voice.js';
import { within } from '../helpers/wait.js';

/** The manual-turn limit of this server's sessions, ms. */
const MAX_UTTERANCE_MS = 2_000;

let t: TestServer;
let stt: RecordingStt;

beforeAll(async () => {
  stt = recordingStt('I was recorded.');
  t = await startVoiceServer({
    voice: await voiceOf({ stt, settings: { maxUtteranceMs: MAX_UTTERANCE_MS } }),
    script: {
      rules: [{ when: { user: 'ping' }, reply: { parts: [{ text: 'Pong.' }] } }],
      fallback: { parts: [{ text: 'Okay.' }] },
    },
    env: { MAX_FRAME_BYTES: String(64 * 1024) },
  });
});
afterAll(() => t?.close());

/** A text-mode session that commits its own turns (what reached the STT is then exact). */
function manualSession() {
  return openVoiceSession(t, 'character=quiet', { audio: { input: { turn_detection: null } } });
}

/** Base64 of raw bytes. */
const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

/** PCM16 little-endian bytes of samples. */
function bytesOf(pcm: Int16Array): Uint8Array {
  return new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);
}

describe('PCM16 input', () => {
  it('answers base64 that is not padded right with invalid_audio, and the session goes on', async () => {
    const c = await openVoiceSession(t, 'character=quiet', {});
    c.send({ type: 'input_audio_buffer.append', audio: 'abc', event_id: 'bad-audio' });
    const error = await nextError(c, 'invalid_audio');
    expect(error.param).toBe('audio');
    expect(error.event_id).toBe('bad-audio');
    expect(error.message).toMatch(/base64.*multiple of 4/);
    const events = await turn(c, 'ping');
    expect(textOf(events)).toBe('Pong.');
    await c.close();
  });

  it('refuses characters outside the base64 alphabet before decoding', async () => {
    const c = await openVoiceSession(t, 'character=quiet', {});
    c.send({ type: 'input_audio_buffer.append', audio: 'AA-_AA==' });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('audio');
    expect(error.message).toMatch(/base64/);
    await c.close();
  });

  it('joins samples split across appends with odd byte counts', async () => {
    const c = await manualSession();
    const pcm = concat(await speech('hello there'), silence(100));
    const bytes = bytesOf(pcm);
    // 4801 bytes a frame: every other frame ends in the middle of a sample.
    for (let at = 0; at < bytes.length; at += 4801) {
      c.send({ type: 'input_audio_buffer.append', audio: b64(bytes.subarray(at, at + 4801)) });
    }
    c.send({ type: 'input_audio_buffer.commit' });
    await c.next('conversation.item.input_audio_transcription.completed');
    expect(firstDifference(stt.utterances.at(-1)!, pcm)).toBe(-1);
    await c.close();
  });

  // An odd byte of cleared audio glued to the next append would shift every sample.
  it('forgets half a sample left over when the buffer is cleared', async () => {
    const c = await manualSession();
    c.send({ type: 'input_audio_buffer.append', audio: b64(new Uint8Array([0x7f])) });
    c.send({ type: 'input_audio_buffer.clear' });
    await c.next('input_audio_buffer.cleared');
    const pcm = concat(await speech('hello'), silence(100));
    sendAudio(c, pcm);
    c.send({ type: 'input_audio_buffer.commit' });
    await c.next('conversation.item.input_audio_transcription.completed');
    expect(firstDifference(stt.utterances.at(-1)!, pcm)).toBe(-1);
    await c.close();
  });

  it('refuses audio past the utterance limit in a manual turn, keeping what came before', async () => {
    const c = await manualSession();
    sendAudio(c, silence(MAX_UTTERANCE_MS + 400), 100);
    const error = await nextError(c, 'invalid_audio');
    expect(error.message).toMatch(/limit is 2000 ms.*commit or clear/);
    expect(error.message).toMatch(
      /^input_audio_buffer\.append: audio: the input audio buffer holds/,
    );
    // The refused frames are dropped; the buffer holds the 2 s before them.
    await barrier(c);
    c.send({ type: 'input_audio_buffer.commit' });
    await c.next('conversation.item.input_audio_transcription.completed');
    expect(stt.utterances.at(-1)!.length).toBe(MAX_UTTERANCE_MS * 24);
    await c.close();
  });

  it('ends endless speech at the utterance limit under server VAD', async () => {
    const c = await openVoiceSession(t, 'character=quiet', {});
    const words = await speech('hello there how are you today my friend');
    sendAudio(c, concat(silence(300), words, words, words));
    await c.next('input_audio_buffer.speech_started');
    const stopped = await c.next('input_audio_buffer.speech_stopped');
    // Cut while the words still go on: they last far longer than the limit.
    expect(stopped.audio_end_ms as number).toBeLessThan(300 + (3 * words.length) / 24 - 500);
    await t.waitForLog('utterance hit its limit');
    await c.next('response.done');
    await c.close();
  });

  it('closes the socket with 1009 for an append frame over MAX_FRAME_BYTES', async () => {
    const c = await openVoiceSession(t, 'character=quiet', {});
    const id = (c.events[0]!.session as { id: string }).id;
    c.send({ type: 'input_audio_buffer.append', audio: encodePcm16Base64(silence(2_000)) });
    expect((await within(c.closed, 'the close after a huge append')).code).toBe(1009);
    await t.waitForLog('session closed', (l) => l.session === id);
  });
});

describe('Ogg/Opus input', () => {
  function oggSession() {
    return openVoiceSession(t, 'character=quiet', {
      audio: { input: { format: { type: 'audio/ogg' } } },
    });
  }

  it('is echoed as audio/ogg at 24 kHz', async () => {
    const c = await oggSession();
    const updated = c.events.findLast((e) => e.type === 'session.updated')!;
    expect(updated.session).toMatchObject({
      audio: { input: { format: { type: 'audio/ogg', rate: 24000 } } },
    });
    await c.close();
  });

  it('answers bytes that are not Ogg with invalid_audio', async () => {
    const c = await oggSession();
    c.send({ type: 'input_audio_buffer.append', audio: b64(new TextEncoder().encode('not ogg!')) });
    const error = await nextError(c, 'invalid_audio');
    expect(error.message).toMatch(/Ogg\/Opus.*OpusHead/);
    await c.close();
  });

  it('answers raw Opus packets without Ogg framing with invalid_audio', async () => {
    const c = await oggSession();
    const encoder = new Encoder({ channels: 1, sample_rate: 24000 });
    const packet = encoder.encode((await speech('hello')).slice(0, 480));
    c.send({ type: 'input_audio_buffer.append', audio: b64(packet) });
    const error = await nextError(c, 'invalid_audio');
    expect(error.message).toMatch(/raw Opus packets need Ogg framing/);
    await c.close();
  });

  it('still takes a proper Ogg/Opus stream after an error, and hears it', async () => {
    const c = await oggSession();
    c.send({ type: 'input_audio_buffer.append', audio: b64(new Uint8Array([1, 2, 3, 4])) });
    await nextError(c, 'invalid_audio');
    const ogg = new OggOpusEncoder({ sampleRate: 24000 });
    const pcm = concat(silence(300), await speech('hello there how are you'), silence(900));
    // Pages as a browser recorder sends them: a few frames at a time.
    for (let at = 0; at < pcm.length; at += 960 * 4) {
      const page = ogg.push(pcm.subarray(at, at + 960 * 4));
      if (page.length > 0) c.send({ type: 'input_audio_buffer.append', audio: b64(page) });
    }
    const tail = ogg.flush();
    if (tail.length > 0) c.send({ type: 'input_audio_buffer.append', audio: b64(tail) });
    ogg.close();
    await c.next('input_audio_buffer.speech_started');
    await c.next('input_audio_buffer.speech_stopped');
    const completed = await c.next('conversation.item.input_audio_transcription.completed');
    expect(completed.transcript).toBe('I was recorded.');
    await c.next('response.done');
    await c.close();
  });
});

describe('audio on a server without speech engines', () => {
  let text: TestServer;
  beforeAll(async () => {
    text = await startTestServer();
  });
  afterAll(() => text?.close());

  it('answers input_audio_buffer events with audio_not_supported and keeps the session', async () => {
    const c = await openSession(text, 'character=plain');
    for (const event of [
      { type: 'input_audio_buffer.append', audio: encodePcm16Base64(silence(40)) },
      { type: 'input_audio_buffer.commit' },
      { type: 'input_audio_buffer.clear' },
    ]) {
      c.send(event);
      const error = await nextError(c, 'audio_not_supported');
      expect(error.message).toMatch(/takes no audio.*input_text/);
    }
    say(c, 'Hello there!');
    const done = await c.next('response.done');
    expect((done.response as { status: string }).status).toBe('completed');
    await c.close();
  });
});

describe('audio on a server that speaks but does not listen', () => {
  let mute: TestServer;
  beforeAll(async () => {
    mute = await startVoiceServer({ voice: await fakeVoice({ stt: null }) });
  });
  afterAll(() => mute?.close());

  it('answers an append with audio_not_supported naming the missing engine', async () => {
    const c = await openSession(mute, 'character=quiet');
    c.send({ type: 'input_audio_buffer.append', audio: encodePcm16Base64(silence(40)) });
    const error = await nextError(c, 'audio_not_supported');
    expect(error.message).toMatch(/speech-to-text.*STT_PROVIDER=none/);
    await c.close();
  });
});
