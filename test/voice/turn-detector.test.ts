import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AudioFormatError, ConfigError } from '../../src/errors.js';
import type { TurnDetectorEvent } from '../../src/voice/turn-detector.js';
import { TurnDetector, thresholdToVadMode } from '../../src/voice/turn-detector.js';
import type { FrameVad, VadEngine } from '../../src/voice/vad.js';
import { VAD_FRAME_SAMPLES, loadVad } from '../../src/voice/vad.js';
import { concat } from '../helpers/audio.js';
import { DEFAULT_WAIT_MS } from '../helpers/wait.js';

const run = promisify(execFile);
const RATE = 16_000;
const SAMPLES_PER_MS = RATE / 1000;
/** How far detected start/stop times may be from the waveform's. */
const TOLERANCE_MS = 100;
/** A sample above this (about −40 dBFS) counts as sound when finding the truth. */
const SOUND_LEVEL = 300;

/** The samples of a PCM16 mono WAV, found through its `data` chunk. */
function readWav(bytes: Buffer): Int16Array {
  if (bytes.toString('ascii', 0, 4) !== 'RIFF' || bytes.toString('ascii', 8, 12) !== 'WAVE') {
    throw new Error('not a WAV file');
  }
  let offset = 12;
  while (offset + 8 <= bytes.length) {
    const id = bytes.toString('ascii', offset, offset + 4);
    const size = bytes.readUInt32LE(offset + 4);
    if (id === 'fmt ') {
      const channels = bytes.readUInt16LE(offset + 10);
      const rate = bytes.readUInt32LE(offset + 12);
      const bits = bytes.readUInt16LE(offset + 22);
      if (channels !== 1 || rate !== RATE || bits !== 16) {
        throw new Error(`expected 16 kHz mono PCM16, got ${rate} Hz × ${channels} × ${bits} bit`);
      }
    }
    if (id === 'data') {
      const end = Math.min(bytes.length, offset + 8 + size) & ~1;
      // A copy, so the samples start on an aligned, standalone buffer.
      return new Int16Array(new Uint8Array(bytes.subarray(offset + 8, end)).buffer);
    }
    offset += 8 + size + (size & 1);
  }
  throw new Error('WAV file without a data chunk');
}

/** Sample-exact equality, byte-wise: far faster than a deep equal on long arrays. */
function sameSamples(a: Int16Array, b: Int16Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  );
}

/** A short fingerprint of audio for comparing runs. */
function digest(pcm: Int16Array): string {
  return createHash('sha1')
    .update(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength))
    .digest('hex');
}

const silence = (ms: number): Int16Array => new Int16Array(ms * SAMPLES_PER_MS);

/** Deterministic white noise (a fixed-seed LCG), so runs repeat exactly. */
function noise(samples: number, amplitude: number, seed = 7): Int16Array {
  const out = new Int16Array(samples);
  let state = seed;
  for (let i = 0; i < samples; i++) {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    out[i] = Math.round(((state / 0xffff_ffff) * 2 - 1) * amplitude);
  }
  return out;
}

function mix(a: Int16Array, b: Int16Array): Int16Array {
  const out = new Int16Array(a.length);
  for (let i = 0; i < a.length; i++) {
    out[i] = Math.max(-32_768, Math.min(32_767, a[i]! + (b[i] ?? 0)));
  }
  return out;
}

/** Where the sound of a clip begins and ends, in ms from its start. */
function soundSpan(pcm: Int16Array): { onMs: number; offMs: number } {
  let on = -1;
  let off = -1;
  for (let i = 0; i < pcm.length; i++) {
    if (Math.abs(pcm[i]!) > SOUND_LEVEL) {
      if (on < 0) on = i;
      off = i;
    }
  }
  return { onMs: on / SAMPLES_PER_MS, offMs: (off + 1) / SAMPLES_PER_MS };
}

/** Pushes `pcm` in chunks of `size` samples; events carry the clock when they came out. */
function feed(
  detector: TurnDetector,
  pcm: Int16Array,
  size: number,
): Array<TurnDetectorEvent & { atMs: number }> {
  const out: Array<TurnDetectorEvent & { atMs: number }> = [];
  for (let i = 0; i < pcm.length; i += size) {
    for (const event of detector.push(pcm.subarray(i, i + size))) {
      out.push({ ...event, atMs: detector.audioMs });
    }
  }
  return out;
}

function starts<E extends TurnDetectorEvent>(events: E[]) {
  return events.filter(
    (e): e is Extract<E, { type: 'speech_started' }> => e.type === 'speech_started',
  );
}
function stops<E extends TurnDetectorEvent>(events: E[]) {
  return events.filter(
    (e): e is Extract<E, { type: 'speech_stopped' }> => e.type === 'speech_stopped',
  );
}

let engine: VadEngine;
let dir: string;
/** "Hello, what is the weather like in Paris today?" */
let weather: Int16Array;
/** A short second sentence. */
let lights: Int16Array;

async function flite(text: string, name: string): Promise<Int16Array> {
  const file = join(dir, `${name}.wav`);
  try {
    await run('flite', ['-voice', 'kal16', '-t', text, '-o', file], { timeout: DEFAULT_WAIT_MS });
  } catch (error) {
    throw new Error(
      'Making test speech with flite failed; install it with `apt-get install flite` ' +
        `(CI does): ${String(error)}`,
    );
  }
  return readWav(await readFile(file));
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-turn-'));
  [engine, weather, lights] = await Promise.all([
    loadVad(),
    flite('Hello, what is the weather like in Paris today?', 'weather'),
    flite('Turn the lights off.', 'lights'),
  ]);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('TurnDetector on speech', () => {
  it('finds the start and end of an utterance padded with silence within 100 ms', () => {
    const lead = 1000;
    const span = soundSpan(weather);
    const detector = new TurnDetector(engine, {});
    const events = detector.push(concat(silence(lead), weather, silence(1500)));
    expect(events.map((e) => e.type)).toEqual(['speech_started', 'speech_stopped']);
    const [start] = starts(events);
    const [stop] = stops(events);
    expect(Math.abs(start!.audioStartMs - (lead + span.onMs))).toBeLessThanOrEqual(TOLERANCE_MS);
    expect(Math.abs(stop!.audioEndMs - (lead + span.offMs))).toBeLessThanOrEqual(TOLERANCE_MS);
    expect(detector.speaking).toBe(false);
    detector.free();
  });

  it('finds the same turn under low background noise', () => {
    const lead = 800;
    const span = soundSpan(lights);
    const clean = concat(silence(lead), lights, silence(1500));
    // About −50 dBFS of white noise all through, like a quiet room.
    const noisy = mix(clean, noise(clean.length, 100));
    for (const threshold of [0.2, 0.5, 0.9]) {
      const detector = new TurnDetector(engine, { threshold });
      const events = detector.push(noisy);
      expect(
        events.map((e) => e.type),
        `threshold ${threshold}`,
      ).toEqual(['speech_started', 'speech_stopped']);
      const [start] = starts(events);
      const [stop] = stops(events);
      expect(Math.abs(start!.audioStartMs - (lead + span.onMs))).toBeLessThanOrEqual(TOLERANCE_MS);
      expect(Math.abs(stop!.audioEndMs - (lead + span.offMs))).toBeLessThanOrEqual(TOLERANCE_MS);
      detector.free();
    }
  });

  it('never starts a turn on silence or low noise alone', () => {
    for (const threshold of [0, 0.5, 1]) {
      const detector = new TurnDetector(engine, { threshold });
      expect(detector.push(silence(3000))).toEqual([]);
      expect(detector.push(noise(3 * RATE, 100, 11))).toEqual([]);
      expect(detector.speaking).toBe(false);
      detector.free();
    }
  });

  it('does not start a turn on a 60 ms click', () => {
    // The loudest 60 ms of real speech, a noise burst and a tone: each shorter than minSpeechMs.
    const width = 60 * SAMPLES_PER_MS;
    let loudest = 0;
    let best = -1;
    for (let i = 0; i + width <= weather.length; i += VAD_FRAME_SAMPLES) {
      let energy = 0;
      for (let j = i; j < i + width; j++) energy += weather[j]! * weather[j]!;
      if (energy > loudest) [loudest, best] = [energy, i];
    }
    const tone = new Int16Array(width).map(
      (_, i) => 10_000 * Math.sin((2 * Math.PI * 440 * i) / RATE),
    );
    const clicks = {
      speech: weather.slice(best, best + width),
      noise: noise(width, 20_000, 3),
      tone,
    };
    for (const [name, click] of Object.entries(clicks)) {
      for (const threshold of [0, 0.3, 0.5, 0.8]) {
        for (const offset of [0, 37, 80]) {
          const detector = new TurnDetector(engine, { threshold });
          const events = detector.push(
            concat(silence(700), silence(offset / SAMPLES_PER_MS), click, silence(700)),
          );
          expect(events, `${name} click, threshold ${threshold}, offset ${offset}`).toEqual([]);
          detector.free();
        }
      }
    }
  });

  it('starts a turn on sound just longer than minSpeechMs, and lets minSpeechMs be tuned', () => {
    const word = weather.slice(4000, 4000 + 250 * SAMPLES_PER_MS); // 250 ms of speech
    const audio = concat(silence(700), word, silence(700));
    const detector = new TurnDetector(engine, {});
    expect(starts(detector.push(audio))).toHaveLength(1);
    detector.free();
    const strict = new TurnDetector(engine, { minSpeechMs: 400 });
    expect(strict.push(audio)).toEqual([]);
    strict.free();
  });

  it('hands out the prefix padding before the start and the audio through the end of the push', () => {
    const lead = 1000;
    const audio = concat(noise(lead * SAMPLES_PER_MS, 50, 5), weather, silence(1200));
    for (const prefixPaddingMs of [0, 300, 550]) {
      for (const size of [160, 999, 4096]) {
        const detector = new TurnDetector(engine, { prefixPaddingMs });
        const events = feed(detector, audio, size);
        const start = starts(events)[0]!;
        expect(start.audioStartMs - start.prerollStartMs).toBe(prefixPaddingMs);
        const from = start.prerollStartMs * SAMPLES_PER_MS;
        const to = start.atMs * SAMPLES_PER_MS;
        expect(start.preroll.length).toBe(to - from);
        expect(sameSamples(start.preroll, audio.subarray(from, to))).toBe(true);
        detector.free();
      }
    }
  });

  it('gives a recogniser the whole utterance when fed the preroll then every later push', () => {
    const audio = concat(silence(900), weather, silence(900));
    const detector = new TurnDetector(engine, { prefixPaddingMs: 300 });
    const heard: Int16Array[] = [];
    let listening = false;
    let prerollStart = 0;
    for (let i = 0; i < audio.length; i += 1234) {
      const chunk = audio.subarray(i, i + 1234);
      const events = detector.push(chunk);
      const started = events.find((e) => e.type === 'speech_started');
      if (listening) heard.push(chunk);
      if (started) {
        listening = true;
        prerollStart = started.prerollStartMs * SAMPLES_PER_MS;
        heard.push(started.preroll);
      }
      if (events.some((e) => e.type === 'speech_stopped')) listening = false;
    }
    const got = concat(...heard);
    expect(sameSamples(got, audio.subarray(prerollStart, prerollStart + got.length))).toBe(true);
    const span = soundSpan(weather);
    expect(prerollStart + got.length).toBeGreaterThan((900 + span.offMs) * SAMPLES_PER_MS);
  });

  it('clamps the preroll to the audio there is at the start of the stream', () => {
    const detector = new TurnDetector(engine, { prefixPaddingMs: 2000 });
    const audio = concat(silence(200), weather, silence(800));
    const start = starts(detector.push(audio))[0]!;
    expect(start.prerollStartMs).toBe(0);
    expect(sameSamples(start.preroll, audio)).toBe(true);
    detector.free();
  });
});

describe('TurnDetector timing', () => {
  it('fires speech_stopped silenceDurationMs after the end of speech', () => {
    const audio = concat(silence(500), lights, silence(2000));
    const frameMs = VAD_FRAME_SAMPLES / SAMPLES_PER_MS;
    for (const silenceDurationMs of [150, 200, 500, 1200]) {
      const detector = new TurnDetector(engine, { silenceDurationMs });
      const stop = stops(feed(detector, audio, VAD_FRAME_SAMPLES))[0];
      expect(stop, `silence ${silenceDurationMs}`).toBeDefined();
      // It comes out with the first frame that completes the silence.
      const due = stop!.audioEndMs + silenceDurationMs;
      expect(stop!.atMs).toBeGreaterThanOrEqual(due);
      expect(stop!.atMs).toBeLessThan(due + 2 * frameMs);
      detector.free();
    }
    // Shorter than the VAD's hangover (90 ms at mode 2): it fires as soon as the VAD lets go.
    const eager = new TurnDetector(engine, { silenceDurationMs: 0 });
    const stop = stops(feed(eager, audio, VAD_FRAME_SAMPLES))[0]!;
    expect(stop.atMs - stop.audioEndMs).toBeLessThanOrEqual(90 + 2 * frameMs);
    eager.free();
  });

  it('ends the turn at a pause longer than silenceDurationMs and bridges a shorter one', () => {
    // flite puts a little silence around its speech: the real pause is longer than 400 ms.
    const span = soundSpan(lights);
    const pauseMs = 400 + (lights.length / SAMPLES_PER_MS - span.offMs) + span.onMs;
    const audio = concat(silence(500), lights, silence(400), lights, silence(1500));
    const split = new TurnDetector(engine, { silenceDurationMs: pauseMs - 150 });
    expect(split.push(audio).map((e) => e.type)).toEqual([
      'speech_started',
      'speech_stopped',
      'speech_started',
      'speech_stopped',
    ]);
    split.free();
    const joined = new TurnDetector(engine, { silenceDurationMs: pauseMs + 150 });
    expect(joined.push(audio).map((e) => e.type)).toEqual(['speech_started', 'speech_stopped']);
    joined.free();
  });

  it('reports the same turns whatever the chunk size', () => {
    const audio = mix(
      concat(silence(600), weather, silence(700), lights, silence(1000)),
      noise(RATE * 8, 60, 9),
    ).slice(0, (600 + 700 + 1000) * SAMPLES_PER_MS + weather.length + lights.length);
    const summary = (size: number) => {
      const detector = new TurnDetector(engine, { silenceDurationMs: 400 });
      const events = feed(detector, audio, size).map((e) =>
        e.type === 'speech_started'
          ? {
              type: e.type,
              at: e.audioStartMs,
              from: e.prerollStartMs,
              head: digest(e.preroll.subarray(0, 6000)),
            }
          : { type: e.type, at: e.audioEndMs },
      );
      detector.free();
      return events;
    };
    const reference = summary(audio.length);
    expect(reference.map((e) => e.type)).toEqual([
      'speech_started',
      'speech_stopped',
      'speech_started',
      'speech_stopped',
    ]);
    for (const size of [1, 37, 160, 4096])
      expect(summary(size), `chunks of ${size}`).toEqual(reference);
  });

  it('keeps the audio clock in ms of audio pushed', () => {
    const detector = new TurnDetector(engine, {});
    detector.push(new Int16Array(8));
    expect(detector.audioMs).toBe(0.5);
    detector.push(new Int16Array(RATE));
    expect(detector.audioMs).toBe(1000.5);
    detector.free();
  });

  it('runs many times faster than real time', () => {
    const audio = mix(
      concat(silence(500), weather, silence(500), lights, silence(500)),
      noise(RATE * 8, 80, 13),
    );
    const detector = new TurnDetector(engine, {});
    const repeats = 10;
    const started = performance.now();
    let events = 0;
    for (let r = 0; r < repeats; r++) {
      for (let i = 0; i < audio.length; i += 320)
        events += detector.push(audio.subarray(i, i + 320)).length;
    }
    const elapsedMs = performance.now() - started;
    const audioMs = (repeats * audio.length) / SAMPLES_PER_MS;
    const speed = audioMs / elapsedMs;
    console.log(
      `turn detection: ${(audioMs / 1000).toFixed(1)} s of audio in 20 ms chunks took ` +
        `${elapsedMs.toFixed(1)} ms = ${Math.round(speed)}× real time`,
    );
    expect(events).toBeGreaterThanOrEqual(2 * repeats);
    // The speed is printed, not asserted: on a shared machine other processes set it.
    detector.free();
  });
});

describe('TurnDetector settings and state', () => {
  it('maps threshold to the WebRTC VAD mode', () => {
    expect([0, 0.24, 0.25, 0.49, 0.5, 0.74, 0.75, 1].map(thresholdToVadMode)).toEqual([
      0, 0, 1, 1, 2, 2, 3, 3,
    ]);
  });

  it('swaps its own VAD when an update changes the mode', () => {
    const made: FrameVad[] = [];
    const freed: FrameVad[] = [];
    const spy: VadEngine = {
      create(mode) {
        const vad = engine.create(mode);
        const wrapped: FrameVad = {
          mode,
          hangover: vad.hangover,
          isSpeech: (frame) => vad.isSpeech(frame),
          free: () => {
            freed.push(wrapped);
            vad.free();
          },
        };
        made.push(wrapped);
        return wrapped;
      },
    };
    const detector = new TurnDetector(spy, { threshold: 0.5 });
    expect(made.map((v) => v.mode)).toEqual([2]);
    detector.update({ threshold: 0.6 });
    expect(made).toHaveLength(1);
    detector.update({ threshold: 0.9, silenceDurationMs: 700 });
    expect(made.map((v) => v.mode)).toEqual([2, 3]);
    expect(freed).toEqual([made[0]]);
    expect(detector.options).toEqual({
      threshold: 0.9,
      prefixPaddingMs: 300,
      silenceDurationMs: 700,
      minSpeechMs: 100,
    });
    detector.free();
    expect(freed).toEqual(made);
  });

  it('uses a FrameVad it is handed as is and leaves freeing it to its owner', () => {
    const vad = engine.create(1);
    const detector = new TurnDetector(vad, { threshold: 0.9 });
    detector.update({ threshold: 0.1 });
    detector.free();
    // Still usable: the detector did not free it.
    expect(vad.isSpeech(new Int16Array(VAD_FRAME_SAMPLES))).toBe(false);
    expect(starts(detector.push(concat(silence(500), lights, silence(800))))).toHaveLength(1);
    vad.free();
  });

  it('works with a fake VAD that has no hangover', () => {
    // Speech is any frame whose first sample is non-zero.
    const fake: FrameVad = { mode: 2, isSpeech: (f) => f[0] !== 0, free: () => {} };
    const detector = new TurnDetector(fake, {
      minSpeechMs: 50,
      silenceDurationMs: 100,
      prefixPaddingMs: 20,
    });
    const audio = concat(
      silence(200),
      new Int16Array(300 * SAMPLES_PER_MS).fill(1000),
      silence(300),
    );
    const events = detector.push(audio);
    expect(
      events.map((e) => (e.type === 'speech_started' ? e.audioStartMs : e.audioEndMs)),
    ).toEqual([200, 500]);
    const start = starts(events)[0]!;
    expect(start.prerollStartMs).toBe(180);
  });

  it('forgets a turn in progress on reset() and keeps the clock running', () => {
    const detector = new TurnDetector(engine, { prefixPaddingMs: 500 });
    const first = detector.push(concat(silence(500), weather.subarray(0, weather.length >> 1)));
    expect(starts(first)).toHaveLength(1);
    expect(detector.speaking).toBe(true);
    const clock = detector.audioMs;
    detector.reset();
    expect(detector.speaking).toBe(false);
    expect(detector.audioMs).toBe(clock);
    // Silence after the reset ends nothing: there is no turn to end.
    expect(detector.push(silence(1000))).toEqual([]);
    // A new turn's preroll never reaches back before the last reset.
    detector.reset();
    const cleared = detector.audioMs;
    const events = detector.push(concat(silence(100), lights, silence(800)));
    const start = starts(events)[0]!;
    // Within rounding: the reset fell between two ms.
    expect(Math.abs(start.prerollStartMs - cleared)).toBeLessThanOrEqual(0.5);
    expect(start.audioStartMs - start.prerollStartMs).toBeLessThan(500);
    expect(stops(events)).toHaveLength(1);
    detector.free();
  });

  it('rejects bad options with a ConfigError and leaves the settings as they were', () => {
    expect(() => new TurnDetector(engine, { threshold: 1.5 })).toThrow(ConfigError);
    expect(() => new TurnDetector(engine, { threshold: Number.NaN })).toThrow(/threshold/);
    expect(() => new TurnDetector(engine, { silenceDurationMs: -1 })).toThrow(/silenceDurationMs/);
    expect(() => new TurnDetector(engine, { prefixPaddingMs: Infinity })).toThrow(ConfigError);
    const detector = new TurnDetector(engine, {});
    expect(() => detector.update({ threshold: 0.9, minSpeechMs: -5 })).toThrow(/minSpeechMs/);
    expect(detector.options.threshold).toBe(0.5);
    detector.free();
  });

  it('rejects audio that is not an Int16Array with an AudioFormatError', () => {
    const detector = new TurnDetector(engine, {});
    const bad = [new Float32Array(160), new Uint8Array(320), null, 'pcm'];
    for (const value of bad) {
      expect(() => detector.push(value as unknown as Int16Array)).toThrow(AudioFormatError);
    }
    expect(detector.push(new Int16Array(0))).toEqual([]);
    detector.free();
  });
});
