import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AudioFormatError, SpeechProviderError } from '../../../src/errors.js';
import { startFakeOpenAiStt } from '../../../src/testing/fake-stt.js';
import type { FakeOpenAiStt, FakeOpenAiSttOptions } from '../../../src/testing/fake-stt.js';
import { OpenAiSttProvider } from '../../../src/voice/stt/openai.js';
import type { OpenAiSttOptions } from '../../../src/voice/stt/openai.js';
import type { SttEvent } from '../../../src/voice/types.js';

/** A 440 Hz tone at 16 kHz: stands in for speech (the fake does not listen). */
function tone(ms: number, rate = 16_000): Int16Array {
  const out = new Int16Array(Math.round((ms / 1000) * rate));
  for (let i = 0; i < out.length; i++)
    out[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate));
  return out;
}

/** Writes in 20 ms chunks, as a session does. */
function writeChunked(stream: { write(pcm: Int16Array): void }, pcm: Int16Array): void {
  for (let i = 0; i < pcm.length; i += 320) stream.write(pcm.subarray(i, i + 320));
}

/** A loopback port nobody listens on. */
async function refusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function setup(fakeOptions: FakeOpenAiSttOptions = {}, options: OpenAiSttOptions = {}) {
  const fake: FakeOpenAiStt = await startFakeOpenAiStt(fakeOptions);
  const stt = new OpenAiSttProvider({ baseURL: fake.url, ...options });
  const controller = new AbortController();
  const events: SttEvent[] = [];
  const stream = stt.open({ signal: controller.signal, onEvent: (e) => events.push(e) });
  cleanup.push(async () => {
    controller.abort();
    await stt.close();
    await fake.close();
  });
  return { fake, stt, stream, events, controller };
}

describe('OpenAiSttProvider', () => {
  it('uploads the utterance as a 16 kHz WAV and resolves with the text', async () => {
    const { fake, stt, stream, events } = await setup({ transcripts: ['what is the weather'] });
    expect(stt.sampleRate).toBe(16_000);
    expect(stt.continuous).toBe(false);
    writeChunked(stream, tone(1000));
    await expect(stream.commit()).resolves.toBe('what is the weather');
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({
      model: 'whisper-1',
      responseFormat: 'json',
      sampleRate: 16_000,
      durationMs: 1000,
      wavBytes: 44 + 32_000,
      authorization: undefined,
    });
    expect(events).toEqual([{ type: 'text', text: 'what is the weather' }]);
  });

  it('gives each utterance its own request and text', async () => {
    const { fake, stream } = await setup({ transcripts: ['one', 'two'] });
    stream.write(tone(300));
    const first = stream.commit();
    stream.write(tone(500));
    const second = stream.commit();
    expect(await Promise.all([first, second])).toEqual(['one', 'two']);
    expect(fake.requests.map((r) => Math.round(r.durationMs))).toEqual([300, 500]);
  });

  it('sends the bearer key and the configured model when set', async () => {
    const { fake, stream } = await setup(
      { apiKey: 'sk-test' },
      { apiKey: 'sk-test', model: 'Systran/faster-whisper-small' },
    );
    stream.write(tone(200));
    await stream.commit();
    expect(fake.requests[0]?.authorization).toBe('Bearer sk-test');
    expect(fake.requests[0]?.model).toBe('Systran/faster-whisper-small');
  });

  it('sends the language as an ISO-639-1 code, the session hint winning over the provider', async () => {
    const fake = await startFakeOpenAiStt();
    const stt = new OpenAiSttProvider({ baseURL: fake.url, language: 'de' });
    const controller = new AbortController();
    cleanup.push(async () => {
      controller.abort();
      await fake.close();
    });
    const session = stt.open({ signal: controller.signal, onEvent: () => {}, language: 'en-US' });
    const plain = stt.open({ signal: controller.signal, onEvent: () => {} });
    session.write(tone(100));
    await session.commit();
    plain.write(tone(100));
    await plain.commit();
    expect(fake.requests.map((r) => r.language)).toEqual(['en', 'de']);
  });

  it('resolves with an empty string and sends nothing when the utterance has no audio', async () => {
    const { fake, stream } = await setup();
    await expect(stream.commit()).resolves.toBe('');
    stream.write(new Int16Array(0));
    await expect(stream.commit()).resolves.toBe('');
    expect(fake.requests).toHaveLength(0);
  });

  it('drops the audio of the utterance on clear()', async () => {
    const { fake, stream } = await setup();
    stream.write(tone(400));
    stream.clear();
    await expect(stream.commit()).resolves.toBe('');
    stream.write(tone(200));
    await stream.commit();
    expect(fake.requests.map((r) => Math.round(r.durationMs))).toEqual([200]);
  });

  it('rejects with the status and the server message when the server answers HTTP 500', async () => {
    const { stream } = await setup({
      failWith: {
        status: 500,
        body: { error: { message: 'model not loaded', type: 'server_error' } },
      },
    });
    stream.write(tone(200));
    const err = await stream.commit().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SpeechProviderError);
    expect(err).toMatchObject({ provider: 'openai', kind: 'stt', code: 'E_STT', retryable: true });
    expect((err as Error).message).toMatch(/HTTP 500/);
    expect((err as Error).message).toMatch(/model not loaded/);
  });

  it('says to check the key when the server answers 401', async () => {
    const { stream } = await setup({ apiKey: 'right' }, { apiKey: 'wrong' });
    stream.write(tone(100));
    await expect(stream.commit()).rejects.toThrow(/HTTP 401.*Check STT_API_KEY/);
  });

  it('rejects with a connection error naming the address when nothing listens there', async () => {
    const port = await refusedPort();
    const stt = new OpenAiSttProvider({ baseURL: `http://127.0.0.1:${port}/v1` });
    const stream = stt.open({ signal: new AbortController().signal, onEvent: () => {} });
    stream.write(tone(100));
    const err = (await stream.commit().catch((e: unknown) => e)) as SpeechProviderError;
    expect(err).toBeInstanceOf(SpeechProviderError);
    expect(err.message).toContain(`127.0.0.1:${port}/v1/audio/transcriptions`);
    expect(err.message).toMatch(/ECONNREFUSED/);
    expect(err.retryable).toBe(true);
  });

  it('rejects when the server does not answer within the timeout', async () => {
    const { stream } = await setup({ delayMs: 10_000 }, { timeoutMs: 200 });
    stream.write(tone(100));
    await expect(stream.commit()).rejects.toThrow(/did not answer within 200 ms/);
  });

  it('aborts the upload when the stream closes', async () => {
    let arrived!: () => void;
    const reachedServer = new Promise<void>((resolve) => (arrived = resolve));
    const { stream } = await setup({ delayMs: 10_000, onRequest: () => arrived() });
    stream.write(tone(100));
    const pending = stream.commit();
    // Close once the request has reached the server, so the abort cuts a live request.
    await reachedServer;
    stream.close();
    await expect(pending).rejects.toThrow(/stream was closed/);
    await expect(stream.commit()).resolves.toBe('');
  });

  it('fails the commit of an utterance longer than maxUtteranceMs and keeps working after', async () => {
    const { stream, fake } = await setup({}, { maxUtteranceMs: 500 });
    writeChunked(stream, tone(600));
    await expect(stream.commit()).rejects.toThrow(/longer than 0.5 s/);
    stream.write(tone(100));
    await expect(stream.commit()).resolves.toBe('hello from the fake transcriber');
    expect(fake.requests).toHaveLength(1);
  });

  it('throws an AudioFormatError for audio that is not an Int16Array', async () => {
    const { stream } = await setup();
    expect(() => stream.write(new Float32Array(10) as unknown as Int16Array)).toThrow(
      AudioFormatError,
    );
    expect(() => stream.write(Buffer.alloc(10) as unknown as Int16Array)).toThrow(/got Buffer/);
  });

  it('keeps going when the event handler throws', async () => {
    const fake = await startFakeOpenAiStt();
    cleanup.push(() => fake.close());
    const stt = new OpenAiSttProvider({ baseURL: fake.url });
    const stream = stt.open({
      signal: new AbortController().signal,
      onEvent: () => {
        throw new Error('handler bug');
      },
    });
    stream.write(tone(100));
    await expect(stream.commit()).resolves.toBe('hello from the fake transcriber');
  });

  it('reports health from GET /models, and what failed when the server is down', async () => {
    const { stt } = await setup();
    await expect(stt.health()).resolves.toMatchObject({
      ok: true,
      detail: expect.stringMatching(/lists whisper-1/),
    });
    const port = await refusedPort();
    const down = new OpenAiSttProvider({ baseURL: `http://127.0.0.1:${port}/v1` });
    const health = await down.health();
    expect(health.ok).toBe(false);
    expect(health.detail).toMatch(/cannot connect.*ECONNREFUSED/);
  });
});

describe('startFakeOpenAiStt', () => {
  it('answers an upload that is not a WAV with an OpenAI-style 400, as a strict server would', async () => {
    const fake = await startFakeOpenAiStt();
    cleanup.push(() => fake.close());
    const form = new FormData();
    form.set(
      'file',
      new Blob([new Uint8Array([0x49, 0x44, 0x33, 0x04])], { type: 'audio/mpeg' }),
      'a.mp3',
    );
    form.set('model', 'whisper-1');
    const res = await fetch(`${fake.url}/audio/transcriptions`, { method: 'POST', body: form });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/not a PCM16 WAV/);
    expect(fake.requests).toHaveLength(0);
  });
});
