import { afterEach, describe, expect, it } from 'vitest';
import { SpeechProviderError } from '../../../src/errors.js';
import { createTtsRecorder, startFakeOpenAiTts } from '../../../src/testing/fake-tts.js';
import type { FakeOpenAiTts, FakeOpenAiTtsOptions } from '../../../src/testing/fake-tts.js';
import { createOpenAiTts } from '../../../src/voice/tts/openai.js';
import type { OpenAiTtsOptions } from '../../../src/voice/tts/openai.js';
import type { TtsStream } from '../../../src/voice/types.js';
import { within } from '../../helpers/wait.js';

const fakes: FakeOpenAiTts[] = [];

async function setup(
  fakeOptions: FakeOpenAiTtsOptions = {},
  ttsOptions: Partial<OpenAiTtsOptions> = {},
) {
  const fake = await startFakeOpenAiTts(fakeOptions);
  fakes.push(fake);
  const tts = createOpenAiTts({ baseURL: fake.url, ...ttsOptions });
  const controller = new AbortController();
  const rec = createTtsRecorder();
  const stream = tts.open({ signal: controller.signal, onEvent: rec.onEvent });
  return { fake, tts, controller, rec, stream };
}

/** Speaks the segments and waits for the end. */
async function speak(stream: TtsStream, ...segments: string[]): Promise<void> {
  for (const segment of segments) stream.push(segment);
  await within(stream.end(), 'the end of the speech');
}

/** Another provider on the same fake. */
function tts(fake: FakeOpenAiTts) {
  return createOpenAiTts({ baseURL: fake.url });
}

afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

describe('OpenAI-compatible TTS', () => {
  it('asks for each segment as pcm and gives out 24 kHz audio with the segment’s text first', async () => {
    const { fake, tts: provider, rec, stream } = await setup();
    expect(provider.sampleRate).toBe(24_000);
    expect(provider.voiceEngine).toBe('openai');
    await speak(stream, 'Hello there.', 'How are you?');
    expect(
      fake.requests.map(({ model, voice, input, response_format }) => ({
        model,
        voice,
        input,
        response_format,
      })),
    ).toEqual([
      { model: 'tts-1', voice: 'alloy', input: 'Hello there.', response_format: 'pcm' },
      { model: 'tts-1', voice: 'alloy', input: 'How are you?', response_format: 'pcm' },
    ]);
    expect(rec.segments()).toEqual([
      { text: 'Hello there.', startSample: 0 },
      { text: 'How are you?', startSample: 12 * 240 },
    ]);
    expect(rec.pcm().length).toBe((12 + 12) * 240);
    expect(rec.error()).toBeUndefined();
  });

  it('uses the stream’s voice, the configured model, and the bearer key only when one is set', async () => {
    const { fake, tts: keyed } = await setup({}, { model: 'gpt-4o-mini-tts', apiKey: 'sk-test' });
    const stream = keyed.open({
      signal: new AbortController().signal,
      voice: 'nova',
      onEvent: () => {},
    });
    await speak(stream, 'Hi.');
    const keyless = createOpenAiTts({ baseURL: fake.url });
    await speak(keyless.open({ signal: new AbortController().signal, onEvent: () => {} }), 'Hi.');
    expect(fake.requests[0]).toMatchObject({
      model: 'gpt-4o-mini-tts',
      voice: 'nova',
      authorization: 'Bearer sk-test',
    });
    expect(fake.requests[1]?.authorization).toBeUndefined();
  });

  it('gives the same samples when the body comes in odd-sized chunks', async () => {
    const text = 'Odd chunks carry a byte.';
    const samplesPerChar = 20;
    const even = await setup({ chunkBytes: 4800, samplesPerChar });
    await speak(even.stream, text);
    for (const chunkBytes of [1, 3, 101]) {
      const odd = await setup({ chunkBytes, samplesPerChar });
      await speak(odd.stream, text);
      expect(odd.rec.pcm()).toEqual(even.rec.pcm());
    }
    expect(even.rec.pcm().length).toBe(text.length * samplesPerChar);
  });

  it('sends the next request while a segment plays, yet plays strictly in order', async () => {
    // The first answer is slow to start; the second is ready at once.
    const { fake, rec, stream } = await setup({
      headersDelayMs: (_request, index) => (index === 0 ? 150 : 0),
      chunkBytes: 960,
    });
    let requestsAtFirstAudio = 0;
    const tracking = tts(fake).open({
      signal: new AbortController().signal,
      onEvent: (e) => {
        if (e.type === 'audio' && rec.events.length === 0)
          requestsAtFirstAudio = fake.requests.length;
        rec.onEvent(e);
      },
    });
    await speak(tracking, 'First, slow to start.', 'Second, quick.', 'Third.');
    expect(rec.texts()).toEqual(['First, slow to start.', 'Second, quick.', 'Third.']);
    expect(rec.segments().map((s) => s.startSample)).toEqual([0, 21 * 240, 35 * 240]);
    // With one request of look-ahead, the second was asked for before any audio.
    expect(requestsAtFirstAudio).toBeGreaterThanOrEqual(2);
    void stream;
  });

  it('asks one segment at a time with prefetch 0', async () => {
    const { fake } = await setup({ chunkBytes: 960 });
    const tts = createOpenAiTts({ baseURL: fake.url, prefetch: 0 });
    let requestsAtFirstAudio = 0;
    const stream = tts.open({
      signal: new AbortController().signal,
      onEvent: (e) => {
        if (e.type === 'audio' && requestsAtFirstAudio === 0)
          requestsAtFirstAudio = fake.requests.length;
      },
    });
    await speak(stream, 'One.', 'Two.');
    expect(requestsAtFirstAudio).toBe(1);
    expect(fake.requests).toHaveLength(2);
  });

  it('reports an HTTP error with its status and the server’s message, then gives out nothing', async () => {
    const { rec, stream } = await setup({
      failWith: { status: 400, message: 'Invalid voice: bob' },
    });
    await speak(stream, 'Hello.', 'More.');
    const error = rec.error();
    expect(error).toBeInstanceOf(SpeechProviderError);
    expect(error?.message).toMatch(/answered 400/);
    expect(error?.message).toMatch(/Invalid voice: bob/);
    expect((error as SpeechProviderError).retryable).toBe(false);
    expect((error as SpeechProviderError).code).toBe('E_TTS');
    expect(rec.events.map((e) => e.type)).toEqual(['error']);
  });

  it('plays the first segment and reports a retryable error when the second request fails', async () => {
    const { rec, stream } = await setup({
      failWith: { status: 503, message: 'overloaded', request: 2 },
    });
    await speak(stream, 'First.', 'Second.', 'Third.');
    expect(rec.texts()).toEqual(['First.']);
    expect(rec.pcm().length).toBe(6 * 240);
    expect(rec.events.at(-1)?.type).toBe('error');
    expect((rec.error() as SpeechProviderError).retryable).toBe(true);
    expect(rec.error()?.message).toMatch(/503.*overloaded/);
  });

  it('reports a body that breaks off mid-stream', async () => {
    const { rec, stream } = await setup({ failWith: { afterBytes: 1001 }, chunkBytes: 500 });
    await speak(stream, 'This answer will be cut short, sadly.');
    expect(rec.error()).toBeInstanceOf(SpeechProviderError);
    expect(rec.events.at(-1)?.type).toBe('error');
    expect(rec.pcm().length).toBeLessThanOrEqual(500);
  });

  it('fails over to text with a clear error when the server answers 200 for a voice it lacks', async () => {
    // speaches answers 200 and then cuts the connection for a voice it does not have.
    const { rec, stream } = await setup({ voices: ['af_heart'] }, { voice: 'nova' });
    await speak(stream, 'Hello there.');
    expect(rec.pcm().length).toBe(0);
    const error = rec.error() as SpeechProviderError;
    expect(error).toBeInstanceOf(SpeechProviderError);
    expect(error.message).toMatch(
      /answered 200 (with no audio|and broke off).*voice "nova".*do not have: check both/,
    );
    expect(rec.events).toHaveLength(1);
  });

  it('asks a server other than OpenAI for its declared rate, and gives audio out at that rate', async () => {
    const {
      fake,
      tts: provider,
      rec,
      stream,
    } = await setup({ nativeSampleRate: 22_050 }, { sampleRate: 16_000 });
    expect(provider.sampleRate).toBe(16_000);
    await speak(stream, 'Hello there.');
    expect(fake.requests[0]?.sample_rate).toBe(16_000);
    // 12 characters × 10 ms, at 16 kHz.
    expect(rec.pcm().length).toBe(12 * 160);
  });

  it('sends no sample_rate to api.openai.com and refuses another rate for it', () => {
    expect(() =>
      createOpenAiTts({ baseURL: 'https://api.openai.com/v1', sampleRate: 22_050 }),
    ).toThrow(/24000 Hz only/);
    expect(() => createOpenAiTts({ baseURL: 'http://127.0.0.1:1/v1', sampleRate: 12_345 })).toThrow(
      /sampleRate must be one of/,
    );
  });

  it('reports an unreachable server clearly', async () => {
    const fake = await startFakeOpenAiTts();
    await fake.close();
    const tts = createOpenAiTts({ baseURL: fake.url });
    const rec = createTtsRecorder();
    const stream = tts.open({ signal: new AbortController().signal, onEvent: rec.onEvent });
    await speak(stream, 'Anyone there?');
    expect(rec.error()?.message).toMatch(/ECONNREFUSED/);
    expect(rec.error()?.message).toMatch(/Check that the TTS server is running/);
  });

  it('fails a response that does not start within the timeout', async () => {
    const { fake } = await setup({ headersDelayMs: 1_000 });
    const rec = createTtsRecorder();
    const slow = createOpenAiTts({ baseURL: fake.url, timeoutMs: 100 });
    await speak(slow.open({ signal: new AbortController().signal, onEvent: rec.onEvent }), 'Slow.');
    expect(rec.error()?.message).toMatch(/did not answer within 100 ms/);
    expect((rec.error() as SpeechProviderError).retryable).toBe(true);
  });

  it('stops at once when the signal fires mid-stream, and no event follows', async () => {
    const { fake, controller, rec } = await setup({ delayMs: 2, chunkBytes: 480 });
    let eventsAtAbort = -1;
    const stream = tts(fake).open({
      signal: controller.signal,
      onEvent: (e) => {
        rec.onEvent(e);
        if (e.type === 'audio' && eventsAtAbort < 0) {
          eventsAtAbort = rec.events.length;
          controller.abort();
        }
      },
    });
    stream.push('A long answer that nobody will hear to the end, because the user spoke.');
    stream.push('And a second sentence.');
    await within(stream.end(), 'end() after the abort');
    // Let a whole other answer go through the same server: had the aborted
    // one kept going, its events would have arrived meanwhile.
    const other = createTtsRecorder();
    await speak(
      tts(fake).open({ signal: new AbortController().signal, onEvent: other.onEvent }),
      'Next.',
    );
    expect(other.texts()).toEqual(['Next.']);
    expect(rec.events).toHaveLength(eventsAtAbort);
  });

  it('ignores blank segments and ends at once when nothing was said', async () => {
    const { fake, rec, stream } = await setup();
    stream.push('   ');
    await within(stream.end(), 'end() of an empty stream');
    stream.push('After the end.');
    expect(fake.requests).toEqual([]);
    expect(rec.events).toEqual([]);
  });

  it('is healthy when GET /models answers, and says why not otherwise', async () => {
    const { fake, tts: provider } = await setup();
    expect(await provider.health()).toMatchObject({ ok: true });
    await fake.close();
    const health = await provider.health();
    expect(health.ok).toBe(false);
    expect(health.detail).toMatch(/\/models/);
  });
});

/** A tone's pitch from its zero crossings, in Hz. */
function pitchHz(pcm: Int16Array, rate: number): number {
  let crossings = 0;
  for (let i = 1; i < pcm.length; i++) if (pcm[i - 1]! < 0 !== pcm[i]! < 0) crossings++;
  return crossings / 2 / (pcm.length / rate);
}

describe('OpenAI-compatible TTS: what the server really sends', () => {
  // 'Hello there.' is 12 characters × 10 ms: 2,880 samples at 24 kHz. The
  // fake's first answer is a 300 Hz tone.
  const TEXT = 'Hello there.';
  const SAMPLES_24K = 12 * 240;

  it.each([
    [22_050, 'streamed'],
    [16_000, 'streamed'],
    [22_050, 'exact'],
    [16_000, 'exact'],
  ] as const)(
    'reads a %i Hz WAV (%s sizes, header split across chunks) and plays it at 24 kHz, same length and pitch',
    async (rate, sizes) => {
      // Piper voices in speaches: WAV at the voice's own rate when no sample_rate is honoured.
      const { fake, rec, stream } = await setup(
        { nativeSampleRate: rate, takesSampleRate: false, wav: { sizes }, chunkBytes: 7 },
        { responseFormat: 'wav' },
      );
      await speak(stream, TEXT);
      expect(rec.error()).toBeUndefined();
      expect(fake.requests[0]).toMatchObject({ response_format: 'wav', sample_rate: 24_000 });
      const pcm = rec.pcm();
      expect(Math.abs(pcm.length - SAMPLES_24K)).toBeLessThanOrEqual(1);
      expect(pitchHz(pcm, 24_000)).toBeCloseTo(300, -1);
      expect(rec.texts()).toEqual([TEXT]);
    },
  );

  it('resamples to the provider’s rate: a 22.05 kHz WAV for a 16 kHz provider', async () => {
    const { rec, stream } = await setup(
      { nativeSampleRate: 22_050, takesSampleRate: false, wav: { channels: 2 } },
      { responseFormat: 'wav', sampleRate: 16_000 },
    );
    await speak(stream, TEXT, 'How are you?');
    expect(rec.error()).toBeUndefined();
    // Stereo mixed down to mono; both segments 12 × 10 ms at 16 kHz.
    expect(Math.abs(rec.pcm().length - 2 * 12 * 160)).toBeLessThanOrEqual(2);
    expect(rec.segments()[1]?.startSample).toBeCloseTo(12 * 160, 0);
  });

  it('follows the rate a raw PCM content type names (audio/pcm;rate=22050, as openedai-speech)', async () => {
    const { rec, stream } = await setup({
      nativeSampleRate: 22_050,
      takesSampleRate: false,
      rateInContentType: true,
      chunkBytes: 301,
    });
    await speak(stream, TEXT);
    expect(rec.error()).toBeUndefined();
    expect(Math.abs(rec.pcm().length - SAMPLES_24K)).toBeLessThanOrEqual(1);
    expect(pitchHz(rec.pcm(), 24_000)).toBeCloseTo(300, -1);
  });

  it('recognises a WAV sent for a pcm request under another content type', async () => {
    const { rec, stream } = await setup({
      nativeSampleRate: 16_000,
      takesSampleRate: false,
      wav: { always: true },
      contentType: 'application/octet-stream',
      chunkBytes: 5,
    });
    await speak(stream, TEXT);
    expect(rec.error()).toBeUndefined();
    expect(Math.abs(rec.pcm().length - SAMPLES_24K)).toBeLessThanOrEqual(1);
  });

  it('fails clearly on a WAV that is not 16-bit, and plays nothing of it', async () => {
    const { rec, stream } = await setup(
      { wav: { bitsPerSample: 8, sizes: 'exact' } },
      { responseFormat: 'wav' },
    );
    await speak(stream, TEXT);
    expect(rec.pcm().length).toBe(0);
    const error = rec.error() as SpeechProviderError;
    expect(error).toBeInstanceOf(SpeechProviderError);
    expect(error.message).toMatch(/cannot play.*8-bit integer PCM.*16-bit/);
    expect(rec.events.at(-1)?.type).toBe('error');
  });

  it('refuses a response format it cannot read', () => {
    expect(() =>
      createOpenAiTts({
        baseURL: 'http://127.0.0.1:1/v1',
        responseFormat: 'mp3' as unknown as 'pcm',
      }),
    ).toThrow(/responseFormat must be one of pcm, wav, got mp3/);
  });
});
