/**
 * Turns an OpenAI-compatible speech server's answer body into PCM16 at the
 * rate Troupe asked for, whatever the server really sent:
 *
 * - a WAV (`audio/wav`, or any body that starts with `RIFF…WAVE`): its
 *   header gives the rate and channels (speaches and openedai-speech answer
 *   Piper voices at 22.05 or 16 kHz);
 * - raw PCM16 LE: at the rate its `Content-Type` names (`audio/pcm;rate=22050`,
 *   as openedai-speech sends), else at the rate that was requested.
 *
 * Audio at another rate than the provider's is resampled as it streams
 * (`audio/resample.ts`), so it keeps its pitch and duration.
 */
import { AudioFormatError } from '../../errors.js';
import { MAX_SAMPLE_RATE_HZ, MIN_SAMPLE_RATE_HZ, createResampler } from '../audio/resample.js';
import type { Resampler } from '../audio/resample.js';
import { Pcm16FrameReader, WavStreamReader } from '../audio/wav-stream.js';

/** Bytes looked at to tell a WAV from raw PCM when the content type does not say. */
const SNIFF_BYTES = 12;

/** Options of {@link SpeechBody}. */
export interface SpeechBodyOptions {
  /** The answer's `Content-Type` ('' when none). */
  contentType: string;
  /** The rate raw PCM is taken to be at when the content type names none, in Hz. */
  requestedRate: number;
  /** The rate to give audio out at, in Hz. */
  outputRate: number;
}

/** What the body turned out to be. */
export interface SpeechBodyFormat {
  container: 'wav' | 'pcm';
  sampleRate: number;
  channels: number;
}

/**
 * One answer body's decoder. `push` each chunk, then `end` for the
 * resampler's tail; both throw `AudioFormatError` for audio that cannot be
 * played (a non-16-bit WAV, an unusable rate, a header cut short).
 *
 * @example
 * const body = new SpeechBody({ contentType: 'audio/wav', requestedRate: 24_000, outputRate: 24_000 });
 * for await (const chunk of response.body) play(body.push(chunk));
 * play(body.end());
 */
export class SpeechBody {
  readonly #options: SpeechBodyOptions;
  /** Undecided until enough bytes have come to tell WAV from PCM. */
  #kind: 'wav' | 'pcm' | undefined;
  #sniffed: Uint8Array = new Uint8Array(0);
  #wav: WavStreamReader | undefined;
  #pcm: Pcm16FrameReader | undefined;
  #resampler: Resampler | undefined;
  #format: SpeechBodyFormat | undefined;
  /** Bytes of a partial frame dropped at the end. */
  droppedBytes = 0;

  constructor(options: SpeechBodyOptions) {
    this.#options = options;
    const type = options.contentType.toLowerCase();
    if (/^audio\/(wav|x-wav|wave|vnd\.wave)\b/u.test(type)) this.#kind = 'wav';
  }

  /** The body's format, once known. */
  get format(): SpeechBodyFormat | undefined {
    return this.#format;
  }

  /** Adds a chunk; returns the samples it completes, at the output rate. */
  push(bytes: Uint8Array): Int16Array {
    let data = bytes;
    if (this.#kind === undefined) {
      data = join(this.#sniffed, bytes);
      if (data.length < SNIFF_BYTES) {
        this.#sniffed = data;
        return new Int16Array(0);
      }
      this.#sniffed = new Uint8Array(0);
      this.#decide(data);
    }
    return this.#resample(this.#decode(data));
  }

  /** The body ended: returns the last samples (the resampler's tail). */
  end(): Int16Array {
    if (this.#kind === undefined) {
      // Fewer bytes than a WAV header: raw PCM.
      const rest = this.#sniffed;
      this.#decide(rest);
      const out = this.#resample(this.#decode(rest));
      return join16(out, this.#finish());
    }
    return this.#finish();
  }

  #finish(): Int16Array {
    this.droppedBytes = this.#wav ? this.#wav.end() : (this.#pcm?.pendingBytes ?? 0);
    return this.#resampler?.flush() ?? new Int16Array(0);
  }

  #decide(first: Uint8Array): void {
    const riff = first.length >= 4 && String.fromCharCode(...first.subarray(0, 4)) === 'RIFF';
    this.#kind = riff ? 'wav' : 'pcm';
  }

  #decode(data: Uint8Array): Int16Array {
    if (this.#kind === 'wav') {
      this.#wav ??= new WavStreamReader();
      const pcm = this.#wav.push(data);
      const format = this.#wav.format;
      if (format && this.#format === undefined) {
        this.#start({ container: 'wav', sampleRate: format.sampleRate, channels: format.channels });
      }
      return pcm;
    }
    if (this.#pcm === undefined) {
      const { rate, channels } = pcmParameters(this.#options.contentType);
      this.#pcm = new Pcm16FrameReader(channels);
      this.#start({
        container: 'pcm',
        sampleRate: rate ?? this.#options.requestedRate,
        channels,
      });
    }
    return this.#pcm.push(data);
  }

  #start(format: SpeechBodyFormat): void {
    const rate = format.sampleRate;
    if (!Number.isInteger(rate) || rate < MIN_SAMPLE_RATE_HZ || rate > MAX_SAMPLE_RATE_HZ) {
      throw new AudioFormatError(
        `the ${format.container === 'wav' ? 'WAV header' : 'content type'} gives a sample rate of ${rate} Hz; ` +
          `Troupe plays ${MIN_SAMPLE_RATE_HZ}–${MAX_SAMPLE_RATE_HZ} Hz.`,
      );
    }
    this.#format = format;
    if (rate !== this.#options.outputRate) {
      this.#resampler = createResampler(rate, this.#options.outputRate);
    }
  }

  #resample(pcm: Int16Array): Int16Array {
    if (pcm.length === 0 || this.#resampler === undefined) return pcm;
    return this.#resampler.push(pcm);
  }
}

/**
 * The `rate` and `channels` parameters of a raw PCM content type
 * (`audio/pcm;rate=22050`, `audio/l16; rate=16000; channels=1`).
 */
export function pcmParameters(contentType: string): { rate: number | undefined; channels: number } {
  const parameter = (name: string): number | undefined => {
    const match = new RegExp(`;\\s*${name}\\s*=\\s*"?([^;"\\s]*)`, 'iu').exec(contentType);
    if (!match) return undefined;
    const value = Number(match[1]);
    if (!Number.isInteger(value) || value < 1) {
      throw new AudioFormatError(
        `the content type "${contentType}" has ${name}=${match[1] ?? ''}, not a whole number.`,
      );
    }
    return value;
  };
  return { rate: parameter('rate'), channels: parameter('channels') ?? 1 };
}

function join(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function join16(a: Int16Array, b: Int16Array): Int16Array {
  if (b.length === 0) return a;
  if (a.length === 0) return b;
  const out = new Int16Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
