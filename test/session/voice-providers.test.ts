/**
 * The remote speech engines through a real server: the OpenAI-compatible
 * and Kyutai STT and TTS fakes on loopback, chosen by environment as in a
 * deployment. One spoken turn each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startFakeKyutaiStt,
  startFakeOpenAiStt,
  type FakeKyutaiStt,
  type FakeOpenAiStt,
} from '../../src/testing/fake-stt.js';
import {
  startFakeKyutaiTts,
  startFakeOpenAiTts,
  type FakeKyutaiTts,
  type FakeOpenAiTts,
} from '../../src/testing/fake-tts.js';
import { speech } from '../helpers/audio.js';
import type { TestServer } from '../helpers/server.js';
import { lastChat } from '../helpers/session.js';
import {
  audioMs,
  openVoiceSession,
  speak,
  spokenText,
  startVoiceServer,
  typesOf,
} from '../helpers/voice.js';

const ANSWER = 'It is raining in Glasgow. Take an umbrella.';
const SCRIPT = {
  rules: [{ when: { user: 'weather' }, reply: { parts: [{ text: ANSWER }] } }],
  fallback: { parts: [{ text: 'Okay.' }] },
};

type Done = { status: string; output: Array<{ content: Array<{ transcript: string }> }> };

describe('OpenAI-compatible STT and TTS', () => {
  let t: TestServer;
  let stt: FakeOpenAiStt;
  let tts: FakeOpenAiTts;
  beforeAll(async () => {
    stt = await startFakeOpenAiStt({ transcripts: ["What's the weather in Glasgow?"] });
    tts = await startFakeOpenAiTts();
    t = await startVoiceServer({
      script: SCRIPT,
      env: {
        STT_PROVIDER: 'openai',
        STT_URL: stt.url,
        STT_API_KEY: 'stt-key',
        TTS_PROVIDER: 'openai',
        TTS_URL: tts.url,
        TTS_API_KEY: 'tts-key',
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await Promise.all([stt?.close(), tts?.close()]);
  });

  it('transcribes the utterance by upload and speaks the answer by streamed PCM', async () => {
    const c = await openVoiceSession(t);
    const words = await speech("what's the weather in glasgow");
    await speak(c, "what's the weather in glasgow");
    const completed = await c.next('conversation.item.input_audio_transcription.completed');
    expect(completed.transcript).toBe("What's the weather in Glasgow?");
    const events = await c.untilDone();
    const done = events.at(-1)!.response as Done;
    expect(done.status).toBe('completed');
    expect(spokenText(events)).toBe(ANSWER);
    // 10 ms of tone a character, per segment spoken.
    expect(audioMs(events)).toBeGreaterThanOrEqual(ANSWER.replaceAll(' ', '').length * 10);

    // One upload: the utterance with its prefix padding, as a WAV, with the key.
    expect(stt.requests).toHaveLength(1);
    const upload = stt.requests[0]!;
    expect(upload.authorization).toBe('Bearer stt-key');
    expect(upload.durationMs).toBeGreaterThan(words.length / 24 - 300);
    expect(upload.durationMs).toBeLessThan(words.length / 24 + 900);
    // The answer's text went to the speech endpoint, as PCM, in segments.
    expect(tts.requests.map((r) => r.input).join(' ')).toBe(ANSWER);
    for (const r of tts.requests) {
      expect(r).toMatchObject({ response_format: 'pcm', authorization: 'Bearer tts-key' });
    }
    expect(lastChat(t.simulator).messages.at(-1)).toEqual({
      role: 'user',
      content: "What's the weather in Glasgow?",
    });
    await c.close();
  });
});

describe('Kyutai STT and TTS', () => {
  let t: TestServer;
  let stt: FakeKyutaiStt;
  let tts: FakeKyutaiTts;
  beforeAll(async () => {
    stt = await startFakeKyutaiStt({ words: ['what', 'is', 'the', 'weather'] });
    tts = await startFakeKyutaiTts({ samplesPerChar: 240 });
    t = await startVoiceServer({
      script: SCRIPT,
      env: {
        STT_PROVIDER: 'kyutai',
        STT_URL: stt.url,
        TTS_PROVIDER: 'kyutai',
        TTS_URL: tts.url,
        // The VAD alone would wait 5 s of silence: only the engine's pause
        // prediction can end this turn within the 1.5 s of silence sent.
        VAD_SILENCE_MS: '5000',
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await Promise.all([stt?.close(), tts?.close()]);
  });

  it('streams the words as they are heard and ends the turn on the predicted pause', async () => {
    const c = await openVoiceSession(t);
    const from = c.events.length;
    await speak(c, "what's the weather in glasgow", { tailMs: 1500 });
    const stopped = await c.next('input_audio_buffer.speech_stopped');
    const completed = await c.next('conversation.item.input_audio_transcription.completed');
    expect(completed.item_id).toBe(stopped.item_id);
    expect(completed.transcript).toBe('what is the weather');
    const events = await c.untilDone();
    const input = c.events.slice(from, c.events.indexOf(completed));
    const deltas = input.filter(
      (e) => e.type === 'conversation.item.input_audio_transcription.delta',
    );
    expect(
      deltas
        .map((d) => d.delta as string)
        .join('')
        .trim(),
    ).toBe('what is the weather');
    // Streamed: word by word, the first before the turn ended.
    expect(deltas.length).toBeGreaterThan(1);
    expect(
      typesOf(input).indexOf('conversation.item.input_audio_transcription.delta'),
    ).toBeLessThan(typesOf(input).indexOf('input_audio_buffer.speech_stopped'));
    const done = events.at(-1)!.response as Done;
    expect(done.status).toBe('completed');
    expect(spokenText(events)).toBe(ANSWER);
    expect(audioMs(events)).toBeGreaterThan(0);
    expect(tts.received.join(' ').replace(/\s+/g, ' ').trim()).toBe(ANSWER);
    expect(stt.received.audioSamples).toBeGreaterThan(0);
    await c.close();
  });
});
