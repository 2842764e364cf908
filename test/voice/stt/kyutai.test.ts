import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, SpeechProviderError } from '../../../src/errors.js';
import { startFakeKyutaiStt } from '../../../src/testing/fake-stt.js';
import type { FakeKyutaiStt, FakeKyutaiSttOptions } from '../../../src/testing/fake-stt.js';
import { KyutaiSttProvider } from '../../../src/voice/stt/kyutai.js';
import type { KyutaiSttOptions } from '../../../src/voice/stt/kyutai.js';
import type { SttEvent, SttStream } from '../../../src/voice/types.js';

const RATE = 24_000;
const FRAME = 1920;

/** A tone (speech, to the fake) or silence, at 24 kHz. */
function audio(ms: number, level = 8000): Int16Array {
  const out = new Int16Array(Math.round((ms / 1000) * RATE));
  for (let i = 0; i < out.length; i++)
    out[i] = Math.round(level * Math.sin((2 * Math.PI * 300 * i) / RATE));
  return out;
}

/** Writes in 20 ms chunks, as a session does. */
function writeChunked(stream: SttStream, pcm: Int16Array): void {
  for (let i = 0; i < pcm.length; i += 480) stream.write(pcm.subarray(i, i + 480));
}

/** Events as they arrive, and a way to wait for one. */
class EventLog {
  readonly events: SttEvent[] = [];
  #waiters: Array<{ test: (e: SttEvent) => boolean; resolve: (e: SttEvent) => void }> = [];

  readonly push = (event: SttEvent): void => {
    this.events.push(event);
    this.#waiters = this.#waiters.filter((w) => !(w.test(event) && (w.resolve(event), true)));
  };

  /** Resolves with the first event (already there or to come) that passes `test`. */
  next(test: (e: SttEvent) => boolean): Promise<SttEvent> {
    const found = this.events.find(test);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }
}

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

async function setup(fakeOptions: FakeKyutaiSttOptions = {}, options: KyutaiSttOptions = {}) {
  const fake: FakeKyutaiStt = await startFakeKyutaiStt(fakeOptions);
  const stt = new KyutaiSttProvider({ url: fake.url, pauseWarmupSteps: 0, ...options });
  const controller = new AbortController();
  const log = new EventLog();
  const events = log.events;
  const stream = stt.open({ signal: controller.signal, onEvent: log.push });
  cleanup.push(async () => {
    controller.abort();
    await stt.close();
    await fake.close();
  });
  return { fake, stt, stream, events, log, controller };
}

const texts = (events: SttEvent[]) => events.flatMap((e) => (e.type === 'text' ? [e.text] : []));

describe('KyutaiSttProvider', () => {
  it('streams float32 frames, skips the server’s empty first word and resolves the commit with the words heard', async () => {
    const words = ['what', 'is', 'the', 'weather'];
    const { fake, stt, stream, events } = await setup({ words, framesPerWord: 3 });
    expect(stt.sampleRate).toBe(24_000);
    expect(stt.continuous).toBe(true);
    expect(stt.reportsPauses).toBe(true);
    // 12 frames of speech = 4 words, then some silence, as a live microphone sends.
    writeChunked(stream, audio(12 * 80));
    writeChunked(stream, audio(200, 0));
    await expect(stream.commit()).resolves.toBe('what is the weather');
    expect(texts(events)).toEqual(['what', ' is', ' the', ' weather']);
    expect(texts(events).join('')).toBe('what is the weather');
    const first = events.find((e) => e.type === 'text');
    expect(first).toMatchObject({ startMs: 0 });
    expect(fake.received.markers).toEqual([1]);
    expect(fake.received.audioSamples % FRAME).toBe(0);
    expect(fake.received.apiKeys).toEqual(['public_token']);
  });

  it('reports pause probabilities from prs[2], high once the speech is over', async () => {
    const { stream, events, log } = await setup({
      words: ['hi'],
      framesPerWord: 2,
      delayFrames: 2,
    });
    writeChunked(stream, audio(160));
    writeChunked(stream, audio(800, 0));
    await log.next((e) => e.type === 'pause' && e.probability > 0.9);
    const pauses = events.flatMap((e) => (e.type === 'pause' ? [e.probability] : []));
    expect(pauses[0]).toBeCloseTo(0.05);
    expect(pauses.at(-1)).toBeCloseTo(0.95);
  });

  it('ignores the pause prediction of the first steps of a connection', async () => {
    const quiet = await setup({}, { pauseWarmupSteps: 1000 });
    writeChunked(quiet.stream, audio(8 * 80, 0));
    await quiet.stream.commit();
    expect(quiet.events.filter((e) => e.type === 'pause')).toEqual([]);
    const all = await setup({}, { pauseWarmupSteps: 0 });
    writeChunked(all.stream, audio(8 * 80, 0));
    await all.stream.commit();
    // At least every frame written and every flush frame sent at once gave a step.
    expect(all.events.filter((e) => e.type === 'pause').length).toBeGreaterThanOrEqual(8 + 8);
  });

  it('splits words between utterances at each commit, on one connection', async () => {
    const { fake, stream, events } = await setup({
      words: ['one', 'two', 'three', 'four'],
      framesPerWord: 2,
    });
    writeChunked(stream, audio(4 * 80));
    const first = stream.commit();
    writeChunked(stream, audio(4 * 80));
    const second = stream.commit();
    expect(await Promise.all([first, second])).toEqual(['one two', 'three four']);
    // The first word of each utterance comes without a leading space.
    expect(texts(events)).toEqual(['one', ' two', 'three', ' four']);
    expect(fake.received.connections).toBe(1);
    expect(fake.received.markers).toEqual([1, 2]);
  });

  it('resolves with an empty string without connecting when no audio was written', async () => {
    const { fake, stream } = await setup();
    await expect(stream.commit()).resolves.toBe('');
    expect(fake.received.connections).toBe(0);
  });

  it('drops the words of audio cleared before its text arrived', async () => {
    const { stream, events } = await setup({
      words: ['drop', 'me', 'keep', 'this'],
      framesPerWord: 2,
      delayFrames: 6,
    });
    writeChunked(stream, audio(4 * 80));
    stream.clear();
    writeChunked(stream, audio(4 * 80));
    await expect(stream.commit()).resolves.toBe('keep this');
    expect(texts(events)).toEqual(['keep', ' this']);
  });

  it('rejects the pending commit with the server Error message, then reconnects on the next audio', async () => {
    const { fake, stream } = await setup({
      words: ['a', 'b', 'c', 'd', 'e', 'f'],
      framesPerWord: 1,
      errorAfterFrames: 5,
    });
    writeChunked(stream, audio(3 * 80));
    const err = (await stream.commit().catch((e: unknown) => e)) as SpeechProviderError;
    expect(err).toBeInstanceOf(SpeechProviderError);
    expect(err.provider).toBe('kyutai');
    expect(err.message).toMatch(/server reported an error: fake failure/);
    writeChunked(stream, audio(2 * 80));
    await expect(stream.commit()).resolves.toBe('a b');
    expect(fake.received.connections).toBe(2);
  });

  it('emits an error event when the connection breaks mid-utterance with no commit waiting', async () => {
    const { stream, log } = await setup({ errorAfterFrames: 2 });
    writeChunked(stream, audio(5 * 80));
    const event = await log.next((e) => e.type === 'error');
    expect(event.type === 'error' && event.error).toBeInstanceOf(SpeechProviderError);
    // The broken utterance is gone: nothing is left to commit.
    await expect(stream.commit()).resolves.toBe('');
  });

  it('fails with a clear error when the server sends bytes that are not msgpack', async () => {
    const { stream } = await setup({ malformedAfterFrames: 1 });
    writeChunked(stream, audio(80));
    await expect(stream.commit()).rejects.toThrow(/not valid msgpack/);
  });

  it('rejects the commit with the server message when it answers Error instead of Ready', async () => {
    const { stream } = await setup({ rejectWith: 'no free channels' });
    writeChunked(stream, audio(160));
    await expect(stream.commit()).rejects.toThrow(/no free channels/);
  });

  it('sends the configured key and says what failed when the server refuses it', async () => {
    const { stream, fake } = await setup({ apiKey: 'secret' }, { apiKey: 'wrong' });
    writeChunked(stream, audio(160));
    await expect(stream.commit()).rejects.toThrow(
      /connection to ws:\/\/127\.0\.0\.1:\d+\/api\/asr-streaming failed: Unexpected server response: 401/,
    );
    expect(fake.received.connections).toBe(0);
  });

  it('rejects with a connection error when nothing listens at the address', async () => {
    const port = await refusedPort();
    const stt = new KyutaiSttProvider({ url: `ws://127.0.0.1:${port}` });
    const stream = stt.open({ signal: new AbortController().signal, onEvent: () => {} });
    stream.write(audio(100));
    await expect(stream.commit()).rejects.toThrow(/ECONNREFUSED.*moshi-server running/);
  });

  it('rejects when the marker never comes back within the flush timeout', async () => {
    const { stream } = await setup(
      { delayFrames: 50 },
      { flushTimeoutMs: 300, maxFlushFrames: 10 },
    );
    writeChunked(stream, audio(160));
    await expect(stream.commit()).rejects.toThrow(/within 300 ms \(marker 1 never came back\)/);
  });

  it('rejects a commit still waiting when the session closes the stream', async () => {
    const { stream, controller } = await setup({ delayFrames: 50 }, { maxFlushFrames: 2 });
    writeChunked(stream, audio(160));
    const pending = stream.commit();
    controller.abort();
    await expect(pending).rejects.toThrow(/stream was closed/);
    await expect(stream.commit()).resolves.toBe('');
  });

  it('accepts http:// and full-path URLs, and reports health from /api/build_info', async () => {
    const { fake } = await setup();
    const http = new KyutaiSttProvider({
      url: `${fake.url.replace('ws:', 'http:')}/api/asr-streaming/`,
    });
    await expect(http.health()).resolves.toMatchObject({
      ok: true,
      detail: expect.stringContaining('/api/build_info'),
    });
    const stream = http.open({ signal: new AbortController().signal, onEvent: () => {} });
    writeChunked(stream, audio(6 * 80));
    await expect(stream.commit()).resolves.toBe('hello world');
    const port = await refusedPort();
    const down = await new KyutaiSttProvider({ url: `ws://127.0.0.1:${port}` }).health();
    expect(down.ok).toBe(false);
    expect(down.detail).toMatch(/ECONNREFUSED.*moshi-server running/);
  });

  it('refuses a URL it cannot connect to at construction, with a ConfigError', () => {
    expect(() => new KyutaiSttProvider({ url: 'localhost:8090' })).toThrow(ConfigError);
    expect(() => new KyutaiSttProvider({ url: 'ftp://host' })).toThrow(
      /not a ws:\/\/, wss:\/\/, http:\/\/ or https:\/\/ URL/,
    );
  });
});
