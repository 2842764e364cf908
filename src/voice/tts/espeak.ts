/**
 * The offline default TTS: eSpeak NG compiled by Emscripten
 * (`@echogarden/espeak-ng-emscripten`, nothing to install on the system; the
 * build is wasm2js, i.e. plain JavaScript, with its voice data in one file).
 *
 * The engine synthesises synchronously, so it runs in a small pool of worker
 * threads (espeak-worker.mjs): one session's long sentence never stalls the
 * event loop that carries every other session's audio. Each stream's segments
 * are synthesised in order, one at a time; the pool serves streams round
 * robin, a segment each, so a long answer cannot starve a short one.
 */
import type { ProviderHealth, TtsOpenOptions, TtsProvider, TtsStream } from '../types.js';
import type { TtsLogger } from './emitter.js';
import {
  SynthPool,
  SynthStream,
  SYNTH_WORKER_START_TIMEOUT_MS,
  synthWorkers,
  threads,
} from './synth-pool.js';
import type { SynthVoice } from './synth-pool.js';

/** eSpeak NG's output rate, in Hz. */
export const ESPEAK_SAMPLE_RATE_HZ = 22_050;
/** The voice used when neither the character nor the options name one. */
export const DEFAULT_ESPEAK_VOICE = 'en-us';
/** Most worker threads a pool may have (each holds ~60 MB of voice data). */
export const MAX_ESPEAK_WORKERS = 32;
/** How long a worker may take to load the engine before it counts as failed, in ms. */
export const ESPEAK_WORKER_START_TIMEOUT_MS = SYNTH_WORKER_START_TIMEOUT_MS;

/** The provider's name: a metrics label and the key of `character.voice`. */
const PROVIDER = 'espeak';
/** The worker script, beside this file. */
const WORKER_URL = new URL('./espeak-worker.mjs', import.meta.url);

/** A voice eSpeak NG has, as it lists them (identifier e.g. `gmw/en-US`, name e.g. `English (America)`). */
export type EspeakVoice = SynthVoice;

/** Options of {@link createEspeakTts}. */
export interface EspeakTtsOptions {
  /**
   * Voice when the stream names none: a language code (`en-us`, `en-gb`,
   * `fr`), an identifier (`gmw/en-GB-x-rp`) or a name (`English (Scotland)`).
   * @defaultValue 'en-us'
   */
  voice?: string;
  /** Worker threads, each a whole engine (~60 MB). @defaultValue one per core this process may use (`usableCores()`: the container's CPU limit included) */
  workers?: number;
  /** Start the workers now rather than on first use (first use then skips ~150 ms). @defaultValue false */
  preload?: boolean;
  /**
   * Let each worker synthesise a few throw-away sentences after it starts, in
   * the background between real jobs, so that V8 has optimised the engine
   * (~15× real time cold, ~200× warm) before the sessions need the speed.
   * @defaultValue true
   */
  warmUp?: boolean;
  /** Where worker crashes and restarts are reported. */
  log?: TtsLogger;
}

/**
 * Finds the engine identifier for a voice name: first by language code
 * (the voice that ranks it best), then by identifier (whole or after the
 * `/`), then by display name; case does not matter.
 *
 * @example
 * resolveEspeakVoice('en-gb', voices); // 'gmw/en'
 * resolveEspeakVoice('klingon', voices); // undefined
 */
export function resolveEspeakVoice(
  requested: string,
  voices: readonly EspeakVoice[],
): string | undefined {
  const want = requested.trim().toLowerCase();
  if (want === '') return undefined;
  let best: string | undefined;
  let bestPriority = Number.POSITIVE_INFINITY;
  for (const voice of voices) {
    for (const language of voice.languages) {
      if (language.name.toLowerCase() === want && language.priority < bestPriority) {
        best = voice.identifier;
        bestPriority = language.priority;
      }
    }
  }
  if (best !== undefined) return best;
  for (const voice of voices) {
    const id = voice.identifier.toLowerCase();
    if (id === want || id.slice(id.lastIndexOf('/') + 1) === want) return voice.identifier;
  }
  return voices.find((v) => v.name.toLowerCase() === want)?.identifier;
}

/**
 * Creates the eSpeak NG provider. Workers start on first use (or now, with
 * `preload`); {@link EspeakTts.close} stops them.
 *
 * @example
 * const tts = createEspeakTts({ voice: 'en-gb' });
 * const stream = tts.open({ signal, onEvent: (e) => e.type === 'audio' && play(e.pcm) });
 * stream.push('Hello there.');
 * await stream.end();
 * await tts.close();
 */
export function createEspeakTts(options: EspeakTtsOptions = {}): EspeakTts {
  return new EspeakTts(options);
}

// ── The provider and its streams ────────────────────────────────────────────

/** The eSpeak NG provider (see {@link createEspeakTts}). */
export class EspeakTts implements TtsProvider {
  readonly name = PROVIDER;
  readonly sampleRate = ESPEAK_SAMPLE_RATE_HZ;
  readonly voiceEngine = 'espeak';
  readonly #pool: SynthPool;
  readonly #voice: string;
  readonly #log: TtsLogger | undefined;

  /** The voice used when a stream names none. */
  get defaultVoice(): string {
    return this.#voice;
  }

  constructor(options: EspeakTtsOptions = {}) {
    const workers = synthWorkers(PROVIDER, options.workers, MAX_ESPEAK_WORKERS);
    this.#voice = options.voice ?? DEFAULT_ESPEAK_VOICE;
    this.#log = options.log;
    this.#pool = new SynthPool({
      provider: PROVIDER,
      engine: 'eSpeak NG',
      workerUrl: WORKER_URL,
      size: workers,
      warmUp: options.warmUp ?? true,
      sampleRate: ESPEAK_SAMPLE_RATE_HZ,
      installHint:
        'Check that @echogarden/espeak-ng-emscripten is installed with its espeak-ng.data file.',
      resolveVoice: resolveEspeakVoice,
      voiceHint:
        'Use a language code such as "en-us", "en-gb" or "fr", or an identifier such as ' +
        '"gmw/en-GB-x-rp" (the full list: `espeak-ng --voices`).',
      log: options.log,
    });
    // A failed start is logged by the pool and retried on first use.
    if (options.preload === true) this.#startPool().catch(() => undefined);
  }

  /** Opens one response's stream; segments are synthesised in the order pushed. */
  open(options: TtsOpenOptions): TtsStream {
    return new SynthStream(options, options.voice ?? this.#voice, this.#pool, {
      provider: PROVIDER,
      sampleRate: ESPEAK_SAMPLE_RATE_HZ,
      log: this.#log,
    });
  }

  /** Starts the workers (and their JIT warm-up) before the first reply needs them. */
  async warm(): Promise<void> {
    await this.#startPool();
  }

  /** Loads the engine if needed and checks that the default voice exists. */
  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    try {
      const voices = await this.voices(signal);
      const id = resolveEspeakVoice(this.#voice, voices);
      if (id === undefined) {
        return { ok: false, detail: `espeak-ng has no voice "${this.#voice}"` };
      }
      return {
        ok: true,
        detail: `espeak-ng ready, voice ${this.#voice} (${id}), ${voices.length} voices, ${threads(this.#pool.size)}`,
      };
    } catch (error) {
      return { ok: false, detail: (error as Error).message };
    }
  }

  /** The engine's voices (starts the workers if needed). */
  async voices(signal?: AbortSignal): Promise<EspeakVoice[]> {
    return this.#startPool(signal);
  }

  /** Stops the workers; open streams report an error. */
  close(): Promise<void> {
    return this.#pool.close();
  }

  #startPool(signal?: AbortSignal): Promise<EspeakVoice[]> {
    return this.#pool.voices(signal);
  }
}
