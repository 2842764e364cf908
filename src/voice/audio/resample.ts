/**
 * Sample-rate conversion for mono PCM16: a polyphase windowed-sinc (Kaiser)
 * filter. The rate ratio is reduced to L/M; each of the L phases has its own
 * row of taps, so an output sample costs one dot product and no trigonometry.
 * The low-pass cut sits just under the lower of the two Nyquist frequencies,
 * which removes aliases when downsampling and images when upsampling.
 *
 * Streaming is exact: every output sample is computed from the same input
 * samples and coefficients in the same order whether the input came in one
 * piece or a sample at a time, so chunk boundaries cannot click.
 */
import { AudioFormatError } from '../../errors.js';

/** Lowest sample rate accepted, in Hz. */
export const MIN_SAMPLE_RATE_HZ = 8_000;
/** Highest sample rate accepted, in Hz. */
export const MAX_SAMPLE_RATE_HZ = 192_000;
/** Default stopband attenuation, in dB: below the PCM16 noise floor for speech. */
export const DEFAULT_RESAMPLER_ATTENUATION_DB = 90;
/** Default flat passband, as a fraction of the lower rate's Nyquist frequency. */
export const DEFAULT_RESAMPLER_PASSBAND = 0.85;

/**
 * Beyond this many phase rows × taps (floats) the exact table would cost more
 * than ~1 MB; such odd ratios (e.g. 44,056 → 16,000 Hz) use a finer fixed grid
 * of phases with linear interpolation between rows instead.
 */
const MAX_EXACT_TABLE_FLOATS = 1 << 18;
/** Phase rows of the interpolated table; linear interpolation between them errs by < -100 dB. */
const INTERPOLATED_PHASES = 512;
/** History buffers larger than this (floats) are shrunk once mostly empty. */
const MAX_RETAINED_HISTORY_FLOATS = 1 << 18;
/** Tables kept for reuse across resamplers (sessions share the same few rate pairs). */
const MAX_CACHED_TABLES = 32;

/** Options of {@link createResampler}. */
export interface ResamplerOptions {
  /**
   * Stopband attenuation, in dB (40–140). Higher costs more taps.
   * @defaultValue 90 ({@link DEFAULT_RESAMPLER_ATTENUATION_DB})
   */
  attenuationDb?: number;
  /**
   * The flat part of the band as a fraction of the lower rate's Nyquist
   * frequency (0.5–0.98); the stopband starts at that Nyquist. Wider costs more taps.
   * @defaultValue 0.85 ({@link DEFAULT_RESAMPLER_PASSBAND}), i.e. flat to 6.8 kHz for 16 kHz output
   */
  passband?: number;
}

/** A streaming converter from one sample rate to another. */
export interface Resampler {
  /** Input rate, in Hz. */
  readonly fromRate: number;
  /** Output rate, in Hz. */
  readonly toRate: number;
  /**
   * Converts the next chunk. Returns what can be computed so far (the filter
   * holds back about half its length of input); a standalone array.
   */
  push(pcm: Int16Array): Int16Array;
  /**
   * Ends the stream: returns the held-back tail, so the whole output is
   * `ceil(inputSamples × toRate / fromRate)` samples long, and resets the
   * resampler for a new stream.
   */
  flush(): Int16Array;
}

/** A shared, read-only filter bank for one rate pair and design. */
interface FilterTable {
  /** Upsampling factor of the reduced ratio. */
  up: number;
  /** Downsampling factor of the reduced ratio. */
  down: number;
  /** Taps per phase (even). */
  taps: number;
  /** Rows of `taps` coefficients; `phases` rows, or `INTERPOLATED_PHASES + 1` when interpolated. */
  coefficients: Float32Array;
  /** Whether rows are a fixed grid to interpolate between rather than one row per phase. */
  interpolated: boolean;
}

const tableCache = new Map<string, FilterTable>();

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** Modified Bessel function of the first kind, order 0 (power series; converges fast for the β used here). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 200; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

function checkRate(rate: number, which: string): void {
  if (!Number.isInteger(rate) || rate < MIN_SAMPLE_RATE_HZ || rate > MAX_SAMPLE_RATE_HZ) {
    throw new AudioFormatError(
      `Cannot resample: the ${which} rate ${String(rate)} Hz is not supported. Use an integer rate from ${MIN_SAMPLE_RATE_HZ} to ${MAX_SAMPLE_RATE_HZ} Hz (e.g. 16000, 22050, 24000, 48000).`,
    );
  }
}

/** Designs (or reuses) the Kaiser-windowed sinc bank for a rate pair. */
function filterTable(
  fromRate: number,
  toRate: number,
  attenuationDb: number,
  passband: number,
): FilterTable {
  const key = `${fromRate}:${toRate}:${attenuationDb}:${passband}`;
  const cached = tableCache.get(key);
  if (cached) return cached;

  const g = gcd(fromRate, toRate);
  const up = toRate / g;
  const down = fromRate / g;
  // Everything below is in units of input samples. `lowRatio` scales the
  // lower Nyquist frequency into the input's band.
  const lowRatio = Math.min(1, toRate / fromRate);
  const transition = 1 - passband; // width, as a fraction of the lower Nyquist
  const cutoff = (1 - transition / 2) * lowRatio; // centre of the transition, fraction of the input Nyquist
  // Kaiser's design formulas: length for the attenuation and transition
  // width (π·transition rad/sample at the lower rate), and the window's β.
  const halfWidth = (attenuationDb - 7.95) / (2.285 * Math.PI * transition) / 2 / lowRatio;
  const beta =
    attenuationDb > 50
      ? 0.1102 * (attenuationDb - 8.7)
      : 0.5842 * (attenuationDb - 21) ** 0.4 + 0.07886 * (attenuationDb - 21);
  const taps = 2 * Math.ceil(halfWidth);
  const exact = up * taps <= MAX_EXACT_TABLE_FLOATS;
  const rows = exact ? up : INTERPOLATED_PHASES + 1;
  const rowScale = exact ? up : INTERPOLATED_PHASES;
  const coefficients = new Float32Array(rows * taps);
  const i0Beta = besselI0(beta);
  for (let row = 0; row < rows; row++) {
    const frac = row / rowScale;
    let sum = 0;
    for (let m = 0; m < taps; m++) {
      // Distance from the output instant to input tap m (see Resampler#run).
      const tau = frac - 1 + taps / 2 - m;
      const r = tau / halfWidth;
      let h = 0;
      if (r * r < 1) {
        const x = cutoff * tau;
        const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
        h = cutoff * sinc * (besselI0(beta * Math.sqrt(1 - r * r)) / i0Beta);
      }
      coefficients[row * taps + m] = h;
      sum += h;
    }
    // Unity gain at DC for every phase, so a constant stays constant (no ripple between phases).
    for (let m = 0; m < taps; m++) coefficients[row * taps + m]! /= sum;
  }
  const table: FilterTable = { up, down, taps, coefficients, interpolated: !exact };
  if (tableCache.size >= MAX_CACHED_TABLES) tableCache.clear();
  tableCache.set(key, table);
  return table;
}

/** Same rate: copies through. */
class PassThrough implements Resampler {
  readonly fromRate: number;
  readonly toRate: number;
  constructor(rate: number) {
    this.fromRate = rate;
    this.toRate = rate;
  }
  push(pcm: Int16Array): Int16Array {
    return pcm.slice();
  }
  flush(): Int16Array {
    return new Int16Array(0);
  }
}

class PolyphaseResampler implements Resampler {
  readonly fromRate: number;
  readonly toRate: number;
  readonly #table: FilterTable;
  /** Input history (as floats, unscaled int16 values); `#filled` are valid. */
  #buf: Float32Array;
  #filled = 0;
  /** Index in `#buf` of the input sample at or just before the next output instant. */
  #pos = 0;
  /** Fraction of the next output instant past `#pos`, in 1/`up` of an input sample. */
  #phase = 0;
  #totalIn = 0;
  #totalOut = 0;

  constructor(fromRate: number, toRate: number, table: FilterTable) {
    this.fromRate = fromRate;
    this.toRate = toRate;
    this.#table = table;
    this.#buf = new Float32Array(table.taps * 4 + 4096);
    this.#reset();
  }

  #reset(): void {
    // Half a filter of zeros before the first sample: output 0 lines up with
    // input 0 (no delay), as if the signal had been silent before.
    const lead = this.#table.taps / 2 - 1;
    this.#buf.fill(0, 0, lead);
    this.#filled = lead;
    this.#pos = lead;
    this.#phase = 0;
    this.#totalIn = 0;
    this.#totalOut = 0;
  }

  #append(pcm: Int16Array | null, zeros: number): void {
    const count = pcm ? pcm.length : zeros;
    const needed = this.#filled + count;
    if (needed > this.#buf.length) {
      const grown = new Float32Array(Math.max(needed, this.#buf.length * 2));
      grown.set(this.#buf.subarray(0, this.#filled));
      this.#buf = grown;
    }
    if (pcm) this.#buf.set(pcm, this.#filled);
    else this.#buf.fill(0, this.#filled, needed);
    this.#filled = needed;
  }

  /** Computes up to `limit` outputs whose whole window is in the buffer. */
  #run(limit: number): Int16Array {
    const { up, down, taps, coefficients, interpolated } = this.#table;
    const half = taps / 2;
    // Outputs n = 0.. are possible while pos_n + half <= filled - 1, where
    // pos_n = pos + floor((phase + n·down) / up).
    const room = this.#filled - 1 - half - this.#pos;
    let count = room < 0 ? 0 : Math.ceil(((room + 1) * up - this.#phase) / down);
    if (count > limit) count = limit;
    const out = new Int16Array(count);
    const buf = this.#buf;
    let pos = this.#pos;
    let phase = this.#phase;
    for (let n = 0; n < count; n++) {
      const start = pos - half + 1;
      let acc: number;
      if (!interpolated) {
        const row = phase * taps;
        // Four partial sums: shorter dependency chains let the CPU overlap
        // the multiplies (taps is always even, and a multiple of 2 suffices
        // for the tail below).
        let a0 = 0;
        let a1 = 0;
        let a2 = 0;
        let a3 = 0;
        let m = 0;
        for (; m + 3 < taps; m += 4) {
          a0 += buf[start + m]! * coefficients[row + m]!;
          a1 += buf[start + m + 1]! * coefficients[row + m + 1]!;
          a2 += buf[start + m + 2]! * coefficients[row + m + 2]!;
          a3 += buf[start + m + 3]! * coefficients[row + m + 3]!;
        }
        for (; m < taps; m++) a0 += buf[start + m]! * coefficients[row + m]!;
        acc = a0 + a1 + (a2 + a3);
      } else {
        const exactRow = (phase * INTERPOLATED_PHASES) / up;
        const r = Math.floor(exactRow);
        const t = exactRow - r;
        const row0 = r * taps;
        const row1 = row0 + taps;
        let acc0 = 0;
        let acc1 = 0;
        for (let m = 0; m < taps; m++) {
          const x = buf[start + m]!;
          acc0 += x * coefficients[row0 + m]!;
          acc1 += x * coefficients[row1 + m]!;
        }
        acc = acc0 + (acc1 - acc0) * t;
      }
      const v = Math.round(acc);
      out[n] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
      phase += down;
      if (phase >= up) {
        const advance = Math.floor(phase / up);
        pos += advance;
        phase -= advance * up;
      }
    }
    this.#totalOut += count;
    // Keep only the history the next window needs.
    const drop = pos - half + 1;
    if (drop > 0) {
      buf.copyWithin(0, drop, this.#filled);
      this.#filled -= drop;
      pos -= drop;
    }
    this.#pos = pos;
    this.#phase = phase;
    return out;
  }

  push(pcm: Int16Array): Int16Array {
    if (!(pcm instanceof Int16Array)) {
      throw new AudioFormatError('Resampler.push takes mono PCM16 samples as an Int16Array.');
    }
    if (pcm.length === 0) return new Int16Array(0);
    this.#append(pcm, 0);
    this.#totalIn += pcm.length;
    const out = this.#run(Number.POSITIVE_INFINITY);
    // One huge push shouldn't pin a huge history buffer for the rest of the stream.
    if (
      this.#buf.length > MAX_RETAINED_HISTORY_FLOATS &&
      this.#filled * 4 < MAX_RETAINED_HISTORY_FLOATS
    ) {
      this.#buf = this.#buf.slice(0, Math.max(this.#filled, this.#table.taps * 4 + 4096));
    }
    return out;
  }

  flush(): Int16Array {
    // Trailing silence lets the last input samples' windows complete; the
    // output stops at the input's duration.
    this.#append(null, this.#table.taps / 2);
    const total = Math.ceil((this.#totalIn * this.#table.up) / this.#table.down);
    const out = this.#run(total - this.#totalOut);
    this.#reset();
    return out;
  }
}

/**
 * Creates a streaming resampler between two integer rates (8–192 kHz). Same
 * rate gives a pass-through copy. Throws `AudioFormatError` for other rates or
 * out-of-range options.
 *
 * @example
 * ```ts
 * const to16k = createResampler(24_000, 16_000);
 * for (const chunk of chunks) stt.write(to16k.push(chunk));
 * stt.write(to16k.flush());
 * ```
 */
export function createResampler(
  fromRate: number,
  toRate: number,
  options: ResamplerOptions = {},
): Resampler {
  checkRate(fromRate, 'input');
  checkRate(toRate, 'output');
  const attenuationDb = options.attenuationDb ?? DEFAULT_RESAMPLER_ATTENUATION_DB;
  const passband = options.passband ?? DEFAULT_RESAMPLER_PASSBAND;
  if (!(attenuationDb >= 40 && attenuationDb <= 140)) {
    throw new AudioFormatError(
      `Resampler attenuationDb ${String(attenuationDb)} is out of range: use 40–140 dB (default ${DEFAULT_RESAMPLER_ATTENUATION_DB}).`,
    );
  }
  if (!(passband >= 0.5 && passband <= 0.98)) {
    throw new AudioFormatError(
      `Resampler passband ${String(passband)} is out of range: use 0.5–0.98 of the lower Nyquist frequency (default ${DEFAULT_RESAMPLER_PASSBAND}).`,
    );
  }
  if (fromRate === toRate) return new PassThrough(fromRate);
  return new PolyphaseResampler(
    fromRate,
    toRate,
    filterTable(fromRate, toRate, attenuationDb, passband),
  );
}

/**
 * Converts a whole signal at once; equal to pushing it in any chunks and flushing.
 *
 * @example
 * ```ts
 * const pcm16k = resample(pcm24k, 24_000, 16_000);
 * ```
 */
export function resample(
  pcm: Int16Array,
  fromRate: number,
  toRate: number,
  options: ResamplerOptions = {},
): Int16Array {
  const resampler = createResampler(fromRate, toRate, options);
  const body = resampler.push(pcm);
  const tail = resampler.flush();
  if (tail.length === 0) return body;
  const out = new Int16Array(body.length + tail.length);
  out.set(body);
  out.set(tail, body.length);
  return out;
}
