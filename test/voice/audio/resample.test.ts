import { describe, expect, it } from 'vitest';
import { AudioFormatError } from '../../../src/errors.js';
import { concatPcm } from '../../../src/voice/audio/pcm.js';
import { createResampler, resample } from '../../../src/voice/audio/resample.js';
import { firstDifference } from '../../helpers/audio.js';

function tone(hz: number, rate: number, seconds: number, amplitude: number): Int16Array {
  const n = Math.round(rate * seconds);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++)
    out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
  return out;
}

/**
 * Amplitude of the `hz` component, by projecting onto sin/cos over the middle
 * of the signal (the edges hold the filter's start-up). A wrong frequency
 * makes the projection collapse, so this checks frequency and level at once.
 */
function amplitudeAt(pcm: Int16Array, hz: number, rate: number): number {
  const margin = Math.floor(pcm.length / 10);
  let i0 = 0;
  let q0 = 0;
  for (let i = margin; i < pcm.length - margin; i++) {
    const phase = (2 * Math.PI * hz * i) / rate;
    i0 += pcm[i]! * Math.sin(phase);
    q0 += pcm[i]! * Math.cos(phase);
  }
  return (2 * Math.hypot(i0, q0)) / (pcm.length - 2 * margin);
}

function rms(pcm: Int16Array): number {
  const margin = Math.floor(pcm.length / 10);
  let sum = 0;
  for (let i = margin; i < pcm.length - margin; i++) sum += pcm[i]! * pcm[i]!;
  return Math.sqrt(sum / (pcm.length - 2 * margin));
}

/** A deterministic "speech-like" signal: a few tones plus pseudo-random noise. */
function mixture(rate: number, seconds: number): Int16Array {
  const n = Math.round(rate * seconds);
  const out = new Int16Array(n);
  let seed = 12345;
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const noise = ((seed >>> 16) / 65536 - 0.5) * 4000;
    out[i] = Math.round(
      6000 * Math.sin((2 * Math.PI * 220 * i) / rate) +
        3000 * Math.sin((2 * Math.PI * 1870 * i) / rate) +
        noise,
    );
  }
  return out;
}

const PAIRS: [number, number][] = [
  [48_000, 16_000],
  [16_000, 48_000],
  [22_050, 24_000],
  [24_000, 22_050],
  [24_000, 16_000],
  [16_000, 24_000],
  [22_050, 16_000],
  [48_000, 24_000],
  [24_000, 48_000],
];

describe('resample', () => {
  it.each(PAIRS)('keeps a tone’s frequency and amplitude from %i to %i Hz', (from, to) => {
    for (const hz of [300, 1000, 5000]) {
      const out = resample(tone(hz, from, 0.25, 12_000), from, to);
      expect(out.length).toBe(Math.ceil((Math.round(from * 0.25) * to) / from));
      const level = amplitudeAt(out, hz, to);
      // Within 0.1 dB of the input level: the passband is flat.
      expect(Math.abs(20 * Math.log10(level / 12_000))).toBeLessThan(0.1);
    }
  });

  it('attenuates tones above the target Nyquist frequency by at least 60 dB', () => {
    const cases: [number, number, number][] = [
      [48_000, 16_000, 10_000],
      [48_000, 16_000, 8_500],
      [48_000, 24_000, 13_000],
      [22_050, 16_000, 9_000],
      [24_000, 16_000, 8_600],
    ];
    for (const [from, to, hz] of cases) {
      const input = tone(hz, from, 0.25, 30_000);
      const out = resample(input, from, to);
      // An all-zero output (alias below half an LSB) counts as -∞ dB.
      const rejectionDb = 20 * Math.log10(Math.max(rms(out), 1e-9) / rms(input));
      console.log(
        `alias rejection ${from}→${to} Hz, ${hz} Hz tone: ${rejectionDb === -Infinity || rejectionDb < -180 ? 'output below 1 LSB' : `${rejectionDb.toFixed(1)} dB`}`,
      );
      expect(rejectionDb).toBeLessThan(-60);
    }
  });

  it('removes images when upsampling (16 kHz → 48 kHz leaves nothing above 8 kHz)', () => {
    const out = resample(tone(3000, 16_000, 0.25, 20_000), 16_000, 48_000);
    // The image of 3 kHz at 16 kHz sampling sits at 13 kHz.
    const image = amplitudeAt(out, 13_000, 48_000);
    expect(20 * Math.log10(Math.max(image, 1e-9) / 20_000)).toBeLessThan(-60);
  });

  it('keeps a constant signal constant (unity gain at DC on every phase)', () => {
    const out = resample(new Int16Array(4000).fill(1000), 22_050, 24_000);
    for (let i = 200; i < out.length - 200; i++)
      expect(Math.abs(out[i]! - 1000)).toBeLessThanOrEqual(1);
  });

  it('clamps instead of wrapping when the filter overshoots full scale', () => {
    const square = new Int16Array(4800);
    for (let i = 0; i < square.length; i++) square[i] = (i >> 4) % 2 === 0 ? 32767 : -32768;
    const out = resample(square, 48_000, 16_000);
    let max = 0;
    let min = 0;
    for (const v of out) {
      max = Math.max(max, v);
      min = Math.min(min, v);
    }
    expect(max).toBeLessThanOrEqual(32767);
    expect(min).toBeGreaterThanOrEqual(-32768);
  });

  it('handles an empty input', () => {
    expect(resample(new Int16Array(0), 48_000, 16_000).length).toBe(0);
  });
});

describe('createResampler', () => {
  it.each([...PAIRS, [44_056, 16_000] as [number, number], [8_000, 44_100] as [number, number]])(
    'gives the one-shot output when fed in uneven chunks (%i → %i Hz)',
    (from, to) => {
      const input = mixture(from, 0.3);
      const oneShot = resample(input, from, to);
      const resampler = createResampler(from, to);
      const parts: Int16Array[] = [];
      let offset = 0;
      let size = 1;
      while (offset < input.length) {
        parts.push(resampler.push(input.subarray(offset, offset + size)));
        parts.push(resampler.push(new Int16Array(0)));
        offset += size;
        size = (size * 7 + 3) % 613; // 1, 10, 73, 514, …, and sometimes 0
      }
      parts.push(resampler.flush());
      expect(firstDifference(concatPcm(parts), oneShot)).toBe(-1);
    },
  );

  it('streams with bounded latency: after 20 ms frames, output lags input by under 3 ms', () => {
    const resampler = createResampler(24_000, 16_000);
    let outputSamples = 0;
    for (let i = 0; i < 50; i++) outputSamples += resampler.push(new Int16Array(480)).length;
    const lagMs = 1000 - (outputSamples / 16_000) * 1000;
    expect(lagMs).toBeGreaterThanOrEqual(0);
    expect(lagMs).toBeLessThan(3);
  });

  it('starts afresh after flush()', () => {
    const input = mixture(48_000, 0.05);
    const resampler = createResampler(48_000, 16_000);
    const first = concatPcm([resampler.push(input), resampler.flush()]);
    const second = concatPcm([resampler.push(input), resampler.flush()]);
    expect(firstDifference(first, second)).toBe(-1);
  });

  it('passes the same rate through as a copy', () => {
    const input = new Int16Array([1, 2, 3]);
    const resampler = createResampler(24_000, 24_000);
    const out = resampler.push(input);
    expect(Array.from(out)).toEqual([1, 2, 3]);
    expect(out.buffer).not.toBe(input.buffer);
    expect(resampler.flush().length).toBe(0);
  });

  it.each([
    [0, 'input'],
    [7_999, 'input'],
    [192_001, 'input'],
    [22_050.5, 'input'],
    [Number.NaN, 'input'],
  ])('rejects the rate %s with a clear error', (rate, which) => {
    expect(() => createResampler(rate, 16_000)).toThrow(AudioFormatError);
    expect(() => createResampler(rate, 16_000)).toThrow(
      new RegExp(`${which} rate .* not supported.*8000 to 192000`),
    );
    expect(() => createResampler(16_000, rate)).toThrow(/output rate/);
  });

  it('rejects out-of-range filter options', () => {
    expect(() => createResampler(48_000, 16_000, { attenuationDb: 10 })).toThrow(/40–140 dB/);
    expect(() => createResampler(48_000, 16_000, { passband: 1 })).toThrow(/0\.5–0\.98/);
  });

  it('rejects input that is not an Int16Array', () => {
    const resampler = createResampler(48_000, 16_000);
    expect(() => resampler.push(new Float32Array(4) as unknown as Int16Array)).toThrow(
      /Int16Array/,
    );
  });

  it('converts a second of audio in a few milliseconds (printed)', () => {
    const bench: [number, number][] = [
      [48_000, 16_000],
      [24_000, 16_000],
      [16_000, 24_000],
      [22_050, 24_000],
      [48_000, 24_000],
      [24_000, 48_000],
    ];
    const lines: string[] = [];
    for (const [from, to] of bench) {
      const input = mixture(from, 1);
      resample(input, from, to); // warm up the JIT and the filter cache
      // Best of several runs: it measures the code, not other processes on a busy 2-core box.
      let ms = Number.POSITIVE_INFINITY;
      for (let r = 0; r < 5; r++) {
        const started = performance.now();
        const resampler = createResampler(from, to);
        for (let i = 0; i < input.length; i += from / 50) {
          resampler.push(input.subarray(i, i + from / 50)); // 20 ms frames, as sessions feed it
        }
        resampler.flush();
        ms = Math.min(ms, performance.now() - started);
      }
      // Printed, not asserted (the target is ≤ 10 ms): on a shared machine other processes set it.
      lines.push(`${from}→${to}: ${ms.toFixed(2)} ms`);
    }
    console.log(`resample, per second of audio in 20 ms frames: ${lines.join(', ')}`);
  });
});
