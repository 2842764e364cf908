/**
 * Speech engines that fail: the client is told what broke, the turn ends
 * cleanly, and the session goes on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpeechProviderError } from '../../src/errors.js';
import type { SttProvider, SttStream } from '../../src/voice/types.js';
import type { TestServer } from '../helpers/server.js';
import { nextError, textOf, userMessage } from '../helpers/session.js';
import {
  barrier,
  failingStt,
  failingTts,
  fakeVoice,
  openVoiceSession,
  speak,
  spokenText,
  startVoiceServer,
  voiceOf,
} from '../helpers/voice.js';

const REPLY = 'First part is here. Then the second part, which goes on for a while. And the end.';
const SCRIPT = {
  rules: [{ when: { user: 'talk' }, reply: { parts: [{ text: REPLY }] } }],
  fallback: { parts: [{ text: 'Okay.' }] },
};

describe('an STT engine that fails to transcribe', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startVoiceServer({
      voice: await voiceOf({ stt: failingStt('disk on fire') }),
      script: SCRIPT,
    });
  });
  afterAll(() => t?.close());

  it('reports the failed transcription, answers nothing, and the session goes on', async () => {
    const c = await openVoiceSession(t);
    await speak(c, 'hello there');
    const committed = await c.next('input_audio_buffer.committed');
    const failed = await c.next('conversation.item.input_audio_transcription.failed');
    expect(failed).toMatchObject({
      item_id: committed.item_id,
      content_index: 0,
      error: { type: 'server_error', code: 'stt_failed' },
    });
    expect((failed.error as { message: string }).message).toMatch(/disk on fire/);
    // The item with no words leaves the conversation; no response starts.
    const deleted = await c.next('conversation.item.deleted');
    expect(deleted.item_id).toBe(committed.item_id);
    await barrier(c);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);

    c.send(userMessage('Talk to me.'));
    c.send({ type: 'response.create' });
    const done = await c.next('response.done');
    expect((done.response as { status: string }).status).toBe('completed');
    expect(spokenText(c.events)).toBe(REPLY);
    await c.close();
  });
});

describe('an STT stream that breaks', () => {
  let t: TestServer;
  /** Its stream reports an error on the first audio, then hears nothing. */
  const broken: SttProvider = {
    name: 'broken',
    sampleRate: 16000,
    continuous: false,
    reportsPauses: false,
    open({ onEvent }): SttStream {
      let reported = false;
      return {
        write() {
          if (reported) return;
          reported = true;
          queueMicrotask(() =>
            onEvent({
              type: 'error',
              error: new SpeechProviderError('stt', 'broken', 'connection to the engine lost'),
            }),
          );
        },
        commit: async () => '',
        clear() {},
        close() {},
      };
    },
    health: async () => ({ ok: true }),
    async close() {},
  };
  beforeAll(async () => {
    t = await startVoiceServer({ voice: await voiceOf({ stt: broken }), script: SCRIPT });
  });
  afterAll(() => t?.close());

  it('sends an stt_failed error', async () => {
    const c = await openVoiceSession(t);
    await speak(c, 'hello there');
    const error = await nextError(c, 'stt_failed');
    expect(error.message).toMatch(/Speech recognition failed: connection to the engine lost/);
    await c.next('input_audio_buffer.committed');
    await c.close();
  });
});

describe('a TTS engine that fails mid-reply', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startVoiceServer({
      voice: await fakeVoice({ tts: failingTts(2) }),
      script: SCRIPT,
    });
  });
  afterAll(() => t?.close());

  it('sends a tts_failed error and still gives the whole transcript', async () => {
    const c = await openVoiceSession(t);
    c.send(userMessage('Talk to me.'));
    c.send({ type: 'response.create' });
    const error = await nextError(c, 'tts_failed');
    expect(error.type).toBe('server_error');
    expect(error.message).toMatch(/the scripted engine broke.*transcript only/);
    const done = (await c.next('response.done')).response as {
      status: string;
      output: Array<{ content: Array<{ transcript: string }> }>;
    };
    expect(done.status).toBe('completed');
    expect(done.output[0]!.content[0]!.transcript).toBe(REPLY);
    expect(spokenText(c.events)).toBe(REPLY);
    // The first part was spoken before the engine broke.
    expect(c.events.some((e) => e.type === 'response.output_audio.delta')).toBe(true);
    await c.close();
  });
});

describe('a server without TTS', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startVoiceServer({
      voice: await fakeVoice({ transcripts: () => 'Talk to me.', tts: null }),
      script: SCRIPT,
    });
  });
  afterAll(() => t?.close());

  it('refuses spoken replies, in session.update and in response.create', async () => {
    const c = await openVoiceSession(t, 'character=quiet', {});
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    const update = await nextError(c, 'audio_not_supported');
    expect(update.param).toBe('session.output_modalities');
    expect(update.message).toMatch(/text-to-speech.*TTS_PROVIDER=none/);
    c.send({ type: 'response.create', response: { output_modalities: ['audio'] } });
    const create = await nextError(c, 'audio_not_supported');
    expect(create.param).toBe('response.output_modalities');
    await c.close();
  });

  it('still hears speech, and answers it in text', async () => {
    const c = await openVoiceSession(t, 'character=quiet', {});
    await speak(c, 'talk to me');
    const completed = await c.next('conversation.item.input_audio_transcription.completed');
    expect(completed.transcript).toBe('Talk to me.');
    const events = await c.untilDone();
    expect(textOf(events)).toBe(REPLY);
    expect(events.some((e) => e.type === 'response.output_audio.delta')).toBe(false);
    await c.close();
  });
});
