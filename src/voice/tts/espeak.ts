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
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ConfigError, SpeechProviderError } from '../../errors.js';
import type { ProviderHealth, TtsOpenOptions, TtsProvider, TtsStream } from '../types.js';
import { TtsEmitter } from './emitter.js';
import type { TtsLogger } from './emitter.js';

/** eSpeak NG's output rate, in Hz. */
export const ESPEAK_SAMPLE_RATE_HZ = 22_050;
/** The voice used when neither the character nor the options name one. */
export const DEFAULT_ESPEAK_VOICE = 'en-us';
/** Most worker threads a pool may have (each holds ~60 MB of voice data). */
export const MAX_ESPEAK_WORKERS = 32;
/**
 * How long a worker may take to load the engine before it counts as failed, in ms:
 * a hang detector, so generous enough for a machine many times busier than idle.
 */
export const ESPEAK_WORKER_START_TIMEOUT_MS = 60_000;

/** The provider's name: a metrics label and the key of `character.voice`. */
const PROVIDER = 'espeak';
/** The worker script, beside this file. */
const WORKER_URL = new URL('./espeak-worker.mjs', import.meta.url);

/** A voice eSpeak NG has, as it lists them. */
export interface EspeakVoice {
  /** What the engine loads, e.g. `gmw/en-US`. */
  identifier: string;
  /** e.g. `English (America)`. */
  name: string;
  /** Language codes with eSpeak's priority (lower = the better match). */
  languages: Array<{ name: string; priority: number }>;
}

/** Options of {@link createEspeakTts}. */
export interface EspeakTtsOptions {
  /**
   * Voice when the stream names none: a language code (`en-us`, `en-gb`,
   * `fr`), an identifier (`gmw/en-GB-x-rp`) or a name (`English (Scotland)`).
   * @defaultValue 'en-us'
   */
  voice?: string;
  /** Worker threads, each a whole engine (~60 MB). @defaultValue one per core (`os.availableParallelism()`) */
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

// ── The pool ────────────────────────────────────────────────────────────────

/** What the worker reports once the engine has loaded. */
interface ReadyInfo {
  sampleRate: number;
  voices: EspeakVoice[];
  startupMs: number;
}

/** Messages a worker sends (see espeak-worker.mjs). */
type WorkerMessage =
  | ({ type: 'ready' } & ReadyInfo)
  | { type: 'init-failed'; message: string }
  | { type: 'warm'; ms: number; sentences: number }
  | { type: 'audio'; job: number; pcm: Int16Array; words: Array<{ text: string; ms: number }> }
  | { type: 'done'; job: number; cancelled: boolean }
  | { type: 'failed'; job: number; message: string; fatal: boolean };

/** The pool's view of a stream: where a segment comes from and its results go. */
interface JobOwner {
  /** Takes the next segment, or undefined when there is none (any more). */
  takeSegment(): { text: string; voice: string } | undefined;
  started(text: string): void;
  audio(pcm: Int16Array, words: Array<{ text: string; ms: number }>): void;
  finished(): void;
  failed(error: SpeechProviderError): void;
}

/** A segment being synthesised. */
interface Job {
  id: number;
  owner: JobOwner;
}

/** One worker thread and what it is doing. */
interface Slot {
  worker: Worker;
  /** Shared with the worker: the number of the job to stop. */
  cancel: Int32Array;
  ready: boolean;
  job: Job | undefined;
  /** Already accounted for (failed start, crash); its 'exit' changes nothing. */
  gone: boolean;
}

/** Worker threads, a fair queue of streams, and the voices the engine knows. */
class EspeakPool {
  readonly #size: number;
  readonly #warmUp: boolean;
  readonly #log: TtsLogger | undefined;
  #slots: Slot[] = [];
  /** Streams with a segment to synthesise and none in flight, in serving order. */
  #waiting: JobOwner[] = [];
  #info: Promise<ReadyInfo> | undefined;
  #resolveInfo: ((info: ReadyInfo) => void) | undefined;
  #rejectInfo: ((error: SpeechProviderError) => void) | undefined;
  #voiceIds = new Map<string, string | undefined>();
  /** The engine's voices, from the first worker that loaded. */
  #knownVoices: EspeakVoice[] | undefined;
  #nextJob = 1;
  #closed = false;
  /** Shared with every worker: how many jobs are running in the pool. */
  readonly #busy = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));

  constructor(size: number, warmUp: boolean, log: TtsLogger | undefined) {
    this.#size = size;
    this.#warmUp = warmUp;
    this.#log = log;
  }

  /** Starts the workers if they are not running; resolves once one has loaded the engine. */
  start(): Promise<ReadyInfo> {
    if (this.#closed) return Promise.reject(closedError());
    if (this.#info === undefined) {
      this.#info = new Promise<ReadyInfo>((resolve, reject) => {
        this.#resolveInfo = resolve;
        this.#rejectInfo = reject;
      });
      // Callers that only queue work do not await this; keep the rejection
      // from being reported as unhandled (it reaches them through failed()).
      this.#info.catch(() => undefined);
    }
    while (this.#slots.length < this.#size) this.#spawn();
    return this.#info;
  }

  /** Queues a stream that has a segment waiting. */
  request(owner: JobOwner): void {
    if (this.#closed) {
      owner.failed(closedError());
      return;
    }
    if (!this.#waiting.includes(owner)) this.#waiting.push(owner);
    void this.start();
    this.#dispatch();
  }

  /** Forgets a stream: drops it from the queue and stops its segment in flight. */
  cancel(owner: JobOwner): void {
    this.#waiting = this.#waiting.filter((o) => o !== owner);
    for (const slot of this.#slots) {
      // The worker checks this between audio buffers and ends the job early.
      if (slot.job?.owner === owner) Atomics.store(slot.cancel, 0, slot.job.id);
    }
  }

  /** Voices of the engine (starts the workers if needed). */
  async voices(signal?: AbortSignal): Promise<EspeakVoice[]> {
    const info = await abortable(this.start(), signal);
    return info.voices;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const slots = this.#slots;
    this.#slots = [];
    const error = closedError();
    this.#rejectInfo?.(error);
    for (const owner of this.#waiting.splice(0)) owner.failed(error);
    for (const slot of slots) slot.job?.owner.failed(error);
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  #spawn(): void {
    const cancel = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
    const started = performance.now();
    // execArgv: [] — the worker is plain JavaScript; inheriting `--import tsx`
    // would only add a loader's start-up time.
    const worker = new Worker(WORKER_URL, {
      workerData: { cancel, busy: this.#busy.buffer, warmUp: this.#warmUp },
      execArgv: [],
    });
    const slot: Slot = {
      worker,
      cancel: new Int32Array(cancel),
      ready: false,
      job: undefined,
      gone: false,
    };
    this.#slots.push(slot);
    const timer = setTimeout(() => {
      this.#log?.error({ provider: PROVIDER }, 'espeak worker did not start in time');
      void worker.terminate();
    }, ESPEAK_WORKER_START_TIMEOUT_MS);
    timer.unref();
    worker.on('message', (message: WorkerMessage) => {
      if (message.type === 'ready') {
        clearTimeout(timer);
        this.#log?.debug(
          { provider: PROVIDER, startupMs: Math.round(performance.now() - started) },
          'espeak worker ready',
        );
        if (message.sampleRate !== ESPEAK_SAMPLE_RATE_HZ) {
          this.#log?.warn(
            { provider: PROVIDER, sampleRate: message.sampleRate },
            'unexpected espeak sample rate',
          );
        }
        slot.ready = true;
        this.#knownVoices ??= message.voices;
        this.#resolveInfo?.(message);
        this.#dispatch(); // also unrefs the worker if nothing waits
      } else if (message.type === 'warm') {
        this.#log?.debug(
          { provider: PROVIDER, warmUpMs: Math.round(message.ms), sentences: message.sentences },
          'espeak worker warmed up',
        );
      } else if (message.type === 'init-failed') {
        clearTimeout(timer);
        this.#initFailed(slot, message.message);
      } else if (slot.job?.id === message.job) {
        this.#jobMessage(slot, slot.job, message);
      }
    });
    // An uncaught error inside the worker: 'exit' follows and cleans up.
    worker.on('error', (error) => {
      this.#log?.error({ provider: PROVIDER, err: error }, 'espeak worker failed');
    });
    worker.on('exit', (code) => {
      clearTimeout(timer);
      this.#slots = this.#slots.filter((s) => s !== slot);
      if (this.#closed || slot.gone) return;
      if (!slot.ready) {
        this.#initFailed(slot, `the worker exited with code ${code} while loading`);
        return;
      }
      slot.gone = true;
      const job = slot.job;
      this.#release(slot);
      this.#log?.warn({ provider: PROVIDER, code }, 'espeak worker exited; starting another');
      job?.owner.failed(
        new SpeechProviderError(
          'tts',
          PROVIDER,
          `eSpeak NG synthesis failed: its worker thread stopped (exit code ${code}). ` +
            'The segment was lost; a new worker serves the next one.',
          { retryable: true },
        ),
      );
      this.#spawn();
    });
    this.#updateRefs();
  }

  #jobMessage(slot: Slot, job: Job, message: WorkerMessage): void {
    switch (message.type) {
      case 'audio':
        job.owner.audio(message.pcm, message.words);
        return;
      case 'done':
        this.#release(slot);
        // Cancelled jobs belong to aborted streams, which give out nothing more.
        if (message.cancelled) {
          this.#log?.debug({ provider: PROVIDER, job: job.id }, 'espeak segment cancelled');
        } else {
          job.owner.finished();
        }
        this.#dispatch();
        return;
      case 'failed':
        if (message.fatal) {
          // The worker exits next; its 'exit' starts a replacement.
          this.#release(slot);
          slot.ready = false;
        } else {
          this.#release(slot);
        }
        job.owner.failed(
          new SpeechProviderError(
            'tts',
            PROVIDER,
            `eSpeak NG could not synthesise the segment: ${message.message}.`,
            { retryable: message.fatal },
          ),
        );
        this.#dispatch();
        return;
      default:
        return;
    }
  }

  /** The slot's job is over (done, failed or lost with its worker). */
  #release(slot: Slot): void {
    if (slot.job === undefined) return;
    slot.job = undefined;
    // Warm-up waits while any job runs (see espeak-worker.mjs).
    if (Atomics.sub(this.#busy, 0, 1) === 1) Atomics.notify(this.#busy, 0);
    this.#updateRefs();
  }

  /**
   * Idle workers must not keep the process alive; a worker that is busy or
   * still loading must (a script awaiting `end()` or `health()` would
   * otherwise exit mid-sentence). Loading is bounded by its start timeout.
   */
  #updateRefs(): void {
    for (const slot of this.#slots) {
      if (slot.job !== undefined || !slot.ready) slot.worker.ref();
      else slot.worker.unref();
    }
  }

  /** A worker could not load the engine: others serve on; with none left, waiting streams fail. */
  #initFailed(slot: Slot, reason: string): void {
    if (slot.gone) return;
    slot.gone = true;
    this.#slots = this.#slots.filter((s) => s !== slot);
    void slot.worker.terminate();
    const error = new SpeechProviderError(
      'tts',
      PROVIDER,
      `eSpeak NG could not start: ${reason}. ` +
        'Check that @echogarden/espeak-ng-emscripten is installed with its espeak-ng.data file.',
      { retryable: true },
    );
    this.#log?.error({ provider: PROVIDER, err: error }, 'espeak worker could not start');
    if (this.#slots.length > 0) return;
    this.#rejectInfo?.(error);
    // Forget the failed start so that the next request tries again.
    this.#info = undefined;
    this.#resolveInfo = undefined;
    this.#rejectInfo = undefined;
    for (const owner of this.#waiting.splice(0)) owner.failed(error);
  }

  #dispatch(): void {
    for (const slot of this.#slots) {
      if (!slot.ready || slot.job !== undefined) continue;
      let started = false;
      while (!started && this.#waiting.length > 0) {
        const owner = this.#waiting.shift()!;
        const segment = owner.takeSegment();
        if (segment === undefined) continue;
        const voice = this.#voiceId(segment.voice);
        if (voice === undefined) {
          owner.failed(
            new SpeechProviderError(
              'tts',
              PROVIDER,
              `eSpeak NG has no voice "${segment.voice}". Use a language code such as ` +
                '"en-us", "en-gb" or "fr", or an identifier such as "gmw/en-GB-x-rp" ' +
                '(the full list: `espeak-ng --voices`).',
            ),
          );
          continue;
        }
        const job: Job = { id: this.#nextJob++, owner };
        slot.job = job;
        Atomics.add(this.#busy, 0, 1);
        owner.started(segment.text);
        slot.worker.postMessage({ type: 'synth', job: job.id, text: segment.text, voice });
        started = true;
      }
      if (this.#waiting.length === 0) break;
    }
    this.#updateRefs();
  }

  #voiceId(name: string): string | undefined {
    if (!this.#voiceIds.has(name)) {
      // Dispatch only runs with a ready worker, so the voice list is known.
      const voices = this.#knownVoices;
      this.#voiceIds.set(name, voices && resolveEspeakVoice(name, voices));
    }
    return this.#voiceIds.get(name);
  }
}

// ── The provider and its streams ────────────────────────────────────────────

/** The eSpeak NG provider (see {@link createEspeakTts}). */
export class EspeakTts implements TtsProvider {
  readonly name = PROVIDER;
  readonly sampleRate = ESPEAK_SAMPLE_RATE_HZ;
  readonly #pool: EspeakPool;
  readonly #voice: string;
  readonly #log: TtsLogger | undefined;

  constructor(options: EspeakTtsOptions = {}) {
    const workers = options.workers ?? availableParallelism();
    if (!Number.isInteger(workers) || workers < 1 || workers > MAX_ESPEAK_WORKERS) {
      throw new ConfigError(
        `espeak: workers must be a whole number from 1 to ${MAX_ESPEAK_WORKERS}, got ${String(options.workers)}; ` +
          'one per core is usually right.',
      );
    }
    this.#voice = options.voice ?? DEFAULT_ESPEAK_VOICE;
    this.#log = options.log;
    this.#pool = new EspeakPool(workers, options.warmUp ?? true, options.log);
    // A failed start is logged by the pool and retried on first use.
    if (options.preload === true) this.#startPool().catch(() => undefined);
  }

  /** Opens one response's stream; segments are synthesised in the order pushed. */
  open(options: TtsOpenOptions): TtsStream {
    const stream = new EspeakStream(options, options.voice ?? this.#voice, this.#pool, this.#log);
    return stream;
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
        detail: `espeak-ng ready, voice ${this.#voice} (${id}), ${voices.length} voices`,
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

/** One response's speech through the pool. */
class EspeakStream implements TtsStream, JobOwner {
  readonly #out: TtsEmitter;
  readonly #voice: string;
  readonly #pool: EspeakPool;
  #segments: string[] = [];
  #busy = false;
  #ended = false;
  /** Where the segment in flight started, in samples of the stream. */
  #segmentStart = 0;

  constructor(
    options: TtsOpenOptions,
    voice: string,
    pool: EspeakPool,
    log: TtsLogger | undefined,
  ) {
    this.#voice = voice;
    this.#pool = pool;
    this.#out = new TtsEmitter({
      provider: PROVIDER,
      signal: options.signal,
      onEvent: options.onEvent,
      log,
      onAbort: () => {
        this.#segments = [];
        this.#pool.cancel(this);
      },
    });
  }

  push(text: string): void {
    if (!this.#out.live || this.#ended) return;
    const segment = text.trim();
    if (segment === '') return;
    this.#segments.push(segment);
    if (!this.#busy) this.#pool.request(this);
  }

  end(): Promise<void> {
    this.#ended = true;
    if (!this.#busy && this.#segments.length === 0) this.#out.finish();
    return this.#out.done;
  }

  takeSegment(): { text: string; voice: string } | undefined {
    if (!this.#out.live) return undefined;
    const text = this.#segments.shift();
    if (text === undefined) return undefined;
    this.#busy = true;
    return { text, voice: this.#voice };
  }

  started(text: string): void {
    this.#segmentStart = this.#out.samplesOut;
    this.#out.label(text);
  }

  audio(pcm: Int16Array, words: Array<{ text: string; ms: number }>): void {
    this.#out.audio(pcm);
    for (const word of words) {
      const at = this.#segmentStart + Math.round((word.ms * ESPEAK_SAMPLE_RATE_HZ) / 1000);
      this.#out.word(word.text, at);
    }
  }

  finished(): void {
    this.#busy = false;
    if (!this.#out.live) return;
    if (this.#segments.length > 0) this.#pool.request(this);
    else if (this.#ended) this.#out.finish();
  }

  failed(error: SpeechProviderError): void {
    this.#busy = false;
    this.#segments = [];
    this.#out.fail(error);
  }
}

function closedError(): SpeechProviderError {
  return new SpeechProviderError(
    'tts',
    PROVIDER,
    'eSpeak NG provider is closed; the server is shutting down or the provider was replaced.',
  );
}

/** Resolves like `promise` unless `signal` fires first. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}
