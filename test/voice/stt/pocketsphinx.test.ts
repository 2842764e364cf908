import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SpeechProviderError } from '../../../src/errors.js';
import {
  POCKETSPHINX_INSTALL_HINT,
  PocketsphinxSttProvider,
} from '../../../src/voice/stt/pocketsphinx.js';
import { readWav } from '../../../src/voice/audio/pcm.js';
import type { SttEvent, SttStream } from '../../../src/voice/types.js';

const run = promisify(execFile);

/** 20 ms at 16 kHz: what a session writes at a time. */
const CHUNK = 320;

const SENTENCES = {
  weather: 'what is the weather like in paris',
  timer: 'set a timer',
  lights: 'turn on the lights',
} as const;
type Sentence = keyof typeof SENTENCES;

let dir: string;
const speech = {} as Record<Sentence, Int16Array>;

/** Speech made by Debian's flite with its 16 kHz voice: pocketsphinx hears it well. */
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-stt-'));
  await Promise.all(
    (Object.keys(SENTENCES) as Sentence[]).map(async (key) => {
      const file = join(dir, `${key}.wav`);
      await run('flite', ['-voice', 'kal16', '-t', SENTENCES[key], '-o', file]);
      const wav = readWav(await readFile(file));
      expect(wav.sampleRate).toBe(16_000);
      speech[key] = wav.pcm;
    }),
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes in 20 ms chunks, all at once (the worker keeps the backlog). */
function writeChunked(stream: SttStream, pcm: Int16Array): void {
  for (let i = 0; i < pcm.length; i += CHUNK) stream.write(pcm.subarray(i, i + CHUNK));
}

/**
 * Writes in 20 ms chunks at twice real time, as a fast client would; the
 * pacing simulates a microphone, so the decoder keeps up as it would live.
 */
async function writePaced(stream: SttStream, pcm: Int16Array): Promise<void> {
  for (let i = 0; i < pcm.length; i += CHUNK * 5) {
    for (let j = i; j < Math.min(i + CHUNK * 5, pcm.length); j += CHUNK) {
      stream.write(pcm.subarray(j, j + CHUNK));
    }
    await sleep(50);
  }
}

/** Share of the expected words that were heard (order-free). */
function wordsHeard(expected: string, heard: string): number {
  const got = new Set(heard.split(/\s+/));
  const want = expected.split(' ');
  return want.filter((w) => got.has(w)).length / want.length;
}

function open(stt: PocketsphinxSttProvider, events: SttEvent[] = []) {
  const controller = new AbortController();
  const stream = stt.open({ signal: controller.signal, onEvent: (e) => events.push(e) });
  return { stream, controller, events };
}

describe('PocketsphinxSttProvider (the real engine)', () => {
  // One provider for the file: model loads are the slow part (~0.5 s each idle).
  let stt: PocketsphinxSttProvider;

  beforeAll(async () => {
    stt = new PocketsphinxSttProvider({ maxWorkers: 2, maxDecoders: 2 });
    const started = performance.now();
    const loads = await stt.preload(2);
    console.log(
      `pocketsphinx: model load ${loads.map(Math.round).join(' and ')} ms (two decoders, two workers, ` +
        `in parallel); workers started and models loaded in ${Math.round(performance.now() - started)} ms`,
    );
  });
  afterAll(async () => {
    await stt.close();
  });

  it('hears flite speech streamed in 20 ms chunks, with only the tail left at commit', async () => {
    const { stream, events } = open(stt);
    const before = stt.stats();
    await writePaced(stream, speech.weather);
    const ended = performance.now();
    const text = await stream.commit();
    const latencyMs = performance.now() - ended;
    const after = stt.stats();
    const audioMs = after.audioMs - before.audioMs;
    const rtf = (after.decodeMs - before.decodeMs) / audioMs;
    const endMs = after.endMs - before.endMs;
    console.log(
      `pocketsphinx: "${text}": ${Math.round(audioMs)} ms of audio, real-time factor ${rtf.toFixed(2)}, ` +
        `end of utterance ${endMs.toFixed(1)} ms in the engine, commit latency ${latencyMs.toFixed(1)} ms`,
    );
    expect(text).toContain('weather');
    expect(text).toContain('paris');
    expect(wordsHeard(SENTENCES.weather, text)).toBeGreaterThanOrEqual(0.8);
    expect(events).toEqual([{ type: 'text', text }]);
    // The audio was decoded while it arrived, so the commit waited for less than the
    // whole decoding: on an idle machine only the end of the utterance (tens of ms).
    // No absolute bound: these machines are shared, and the numbers are printed above.
    const decodedMs = after.decodeMs - before.decodeMs + endMs;
    expect(latencyMs).toBeLessThan(decodedMs);
  });

  it('decodes off the event loop: writing costs the caller next to nothing', async () => {
    const { stream } = open(stt);
    const before = stt.stats().decodeMs;
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    const started = performance.now();
    writeChunked(stream, speech.lights);
    const writeMs = performance.now() - started;
    const text = await stream.commit();
    delay.disable();
    const decodeMs = stt.stats().decodeMs - before;
    console.log(
      `pocketsphinx: writing ${Math.round(speech.lights.length / 16)} ms of audio took ${writeMs.toFixed(1)} ms on the ` +
        `event loop, decoding ${decodeMs.toFixed(0)} ms in the worker; event loop delay max ` +
        `${(delay.max / 1e6).toFixed(1)} ms`,
    );
    expect(wordsHeard(SENTENCES.lights, text)).toBeGreaterThanOrEqual(0.6);
    expect(writeMs).toBeLessThan(decodeMs / 4);
  });

  it('resolves with an empty string when the utterance has no audio', async () => {
    const { stream } = open(stt);
    await expect(stream.commit()).resolves.toBe('');
    stream.write(new Int16Array(0));
    await expect(stream.commit()).resolves.toBe('');
  });

  it('forgets a cleared utterance and hears the next one alone', async () => {
    const { stream } = open(stt);
    writeChunked(stream, speech.timer.subarray(0, speech.timer.length / 2));
    stream.clear();
    writeChunked(stream, speech.lights);
    const text = await stream.commit();
    expect(text).toContain('lights');
    expect(text).not.toMatch(/set|timer/);
  });

  it('recognises utterance after utterance on one stream, on one decoder', async () => {
    const { stream } = open(stt);
    const loads = stt.stats().loadMs.length;
    writeChunked(stream, speech.timer);
    const first = stream.commit();
    // The next utterance starts before the first one's text is back.
    writeChunked(stream, speech.lights);
    const second = stream.commit();
    expect(stt.stats().busyDecoders).toBe(1);
    const [a, b] = await Promise.all([first, second]);
    expect(a).toContain('timer');
    expect(b).toContain('lights');
    expect(stt.stats().loadMs.length).toBe(loads);
  });

  it('recognises two streams at once, each on its own decoder and worker', async () => {
    const a = open(stt);
    const b = open(stt);
    // Interleaved writes, as two live sessions make them.
    for (let i = 0; i < Math.max(speech.lights.length, speech.timer.length); i += CHUNK) {
      if (i < speech.lights.length) a.stream.write(speech.lights.subarray(i, i + CHUNK));
      if (i < speech.timer.length) b.stream.write(speech.timer.subarray(i, i + CHUNK));
    }
    expect(stt.stats()).toMatchObject({ workers: 2, busyDecoders: 2 });
    const [ta, tb] = await Promise.all([a.stream.commit(), b.stream.commit()]);
    expect(ta).toContain('lights');
    expect(tb).toContain('timer');
    expect(stt.stats()).toMatchObject({ workers: 2, decoders: 2, busyDecoders: 0 });
  });

  it('makes a stream wait when every decoder is busy, then serves it with a freed one', async () => {
    const loads = stt.stats().loadMs.length;
    const [a, b, c] = [open(stt), open(stt), open(stt)];
    a.stream.write(speech.timer.subarray(0, 8000));
    b.stream.write(speech.lights.subarray(0, 8000));
    writeChunked(c.stream, speech.lights);
    expect(stt.stats().waiting).toBe(1);
    // Nobody waits silently: the stats and the health detail say so.
    expect(stt.stats().saturated).toBe(true);
    expect((await stt.health()).detail).toMatch(/saturated: 1 stream\(s\) waiting for a decoder/);
    const [, , tc] = await Promise.all([a.stream.commit(), b.stream.commit(), c.stream.commit()]);
    expect(tc).toContain('lights');
    expect(stt.stats()).toMatchObject({ decoders: 2, waiting: 0, busyDecoders: 0 });
    expect(stt.stats().loadMs.length).toBe(loads);
  });

  it('hands a closed session’s decoder to the next session without loading another', async () => {
    const loads = stt.stats().loadMs.length;
    const one = open(stt);
    one.stream.write(speech.lights.subarray(0, 8000));
    // Closed mid-utterance: the decoder is reset and goes back to the pool.
    one.controller.abort();
    const two = open(stt);
    writeChunked(two.stream, speech.timer);
    expect(await two.stream.commit()).toContain('timer');
    expect(stt.stats()).toMatchObject({ decoders: 2, busyDecoders: 0 });
    expect(stt.stats().loadMs.length).toBe(loads);
  });

  it('ignores calls after close()', async () => {
    const { stream } = open(stt);
    stream.write(speech.timer.subarray(0, 1600));
    stream.close();
    stream.write(speech.timer);
    await expect(stream.commit()).resolves.toBe('');
    stream.clear();
    stream.close();
    expect(stt.stats().busyDecoders).toBe(0);
  });

  it('reports health with the library loaded', async () => {
    await expect(stt.health()).resolves.toMatchObject({
      ok: true,
      detail: expect.stringContaining('2 decoder(s)'),
    });
  });
});

/**
 * Runs `body` and checks that no worker thread was terminated meanwhile: the
 * threads of a closed provider ended by themselves (close() terminates only
 * one still running 5 s later).
 */
async function withoutTerminate(body: () => Promise<void>): Promise<void> {
  const terminate = vi.spyOn(Worker.prototype, 'terminate');
  try {
    await body();
    expect(terminate).not.toHaveBeenCalled();
  } finally {
    terminate.mockRestore();
  }
}

describe('PocketsphinxSttProvider.close()', () => {
  it('lets a worker still loading the library end on its own: one stopped inside the load aborts the process', () =>
    withoutTerminate(async () => {
      const stt = new PocketsphinxSttProvider();
      // The worker starts now and loads the library and a model; the server stops at once.
      const warming = stt.warm().catch((err: unknown) => err);
      await stt.close();
      expect(await warming).toBeInstanceOf(SpeechProviderError);
    }));

  it('ends a worker with audio still queued without terminating it', () =>
    withoutTerminate(async () => {
      const stt = new PocketsphinxSttProvider();
      await stt.warm();
      const { stream } = open(stt);
      for (let i = 0; i < 4; i++) writeChunked(stream, speech.weather);
      const commit = stream.commit().catch((err: unknown) => err);
      await stt.close();
      expect(await commit).toBeInstanceOf(SpeechProviderError);
    }));
});

describe('PocketsphinxSttProvider without the engine', () => {
  it('says what to install when the library cannot be loaded, and fails commits with the same', async () => {
    const stt = new PocketsphinxSttProvider({ libraryPath: '/nonexistent/libpocketsphinx.so.3' });
    try {
      const health = await stt.health();
      expect(health.ok).toBe(false);
      expect(health.detail).toContain('/nonexistent/libpocketsphinx.so.3');
      expect(health.detail).toContain(POCKETSPHINX_INSTALL_HINT);
      const { stream } = open(stt);
      stream.write(speech.weather);
      const err = (await stream.commit().catch((e: unknown) => e)) as SpeechProviderError;
      expect(err).toBeInstanceOf(SpeechProviderError);
      expect(err).toMatchObject({ provider: 'pocketsphinx', code: 'E_STT' });
      expect(err.message).toContain(POCKETSPHINX_INSTALL_HINT);
      // Known broken: the next utterance fails at once, without another worker.
      const workers = stt.stats().workers;
      stream.write(speech.weather);
      await expect(stream.commit()).rejects.toThrow(POCKETSPHINX_INSTALL_HINT);
      expect(stt.stats().workers).toBe(workers);
    } finally {
      await stt.close();
    }
  });

  it('says which model files are missing', async () => {
    const stt = new PocketsphinxSttProvider({ modelDir: '/nonexistent/model' });
    try {
      const health = await stt.health();
      expect(health.ok).toBe(false);
      expect(health.detail).toMatch(/model files are missing.*\/nonexistent\/model\/en-us/);
      const { stream } = open(stt);
      stream.write(speech.weather);
      await expect(stream.commit()).rejects.toThrow(
        /could not load its model: model files are missing/,
      );
    } finally {
      await stt.close();
    }
  });

  it('fails the commit of an utterance longer than maxUtteranceMs without decoding it', async () => {
    const stt = new PocketsphinxSttProvider({ maxUtteranceMs: 1000 });
    try {
      const { stream } = open(stt);
      // One write over the limit: refused before any decoder is borrowed.
      stream.write(speech.weather);
      await expect(stream.commit()).rejects.toThrow(/longer than 1 s/);
      await expect(stream.commit()).resolves.toBe('');
      expect(stt.stats()).toMatchObject({ workers: 0, decoders: 0 });
    } finally {
      await stt.close();
    }
  });
});
