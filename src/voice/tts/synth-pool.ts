/**
 * A pool of worker threads that each run a synchronous speech engine (eSpeak
 * NG, Flite), and the {@link TtsStream} that feeds it. Each stream's segments
 * are synthesised in order, one at a time; the pool serves streams round
 * robin, a segment each, so a long answer cannot starve a short one.
 *
 * A worker speaks this protocol (plain objects):
 *   in:  { type: 'synth', job, text, voice }   voice = what `resolveVoice` returned
 *   out: { type: 'ready', sampleRate, voices, startupMs }
 *        { type: 'init-failed', message }
 *        { type: 'warm', ms, sentences }
 *        { type: 'audio', job, pcm: Int16Array, words: [{ text, ms }] }
 *        { type: 'done', job, cancelled }
 *        { type: 'failed', job, message, fatal }   after a fatal one the worker exits
 * Its `workerData` holds `cancel` (the job to stop, a shared Int32Array),
 * `busy` (jobs running in the pool) and `warmUp`.
 */
import { Worker } from 'node:worker_threads';
import { coreShare } from '../../config/cores.js';
import { ConfigError, SpeechProviderError } from '../../errors.js';
import type { TtsOpenOptions, TtsStream } from '../types.js';
import { TtsEmitter } from './emitter.js';
import type { TtsLogger } from './emitter.js';

/** How long a worker may take to load the engine before it counts as failed, in ms. */
export const SYNTH_WORKER_START_TIMEOUT_MS = 60_000;

/**
 * The worker count a synthesis provider was given, checked: a whole number
 * from 1 to `max`, one per core when unset (this process's share of the
 * cores, with `WORKERS`).
 */
export function synthWorkers(provider: string, requested: number | undefined, max: number): number {
  const workers = requested ?? coreShare();
  if (!Number.isInteger(workers) || workers < 1 || workers > max) {
    throw new ConfigError(
      `${provider}: workers must be a whole number from 1 to ${max}, got ${String(requested)}; ` +
        'one per core is usually right.',
    );
  }
  return workers;
}

/** A pool's size as `/health` says it: `1 worker thread`, `4 worker threads`. */
export function threads(size: number): string {
  return `${size} worker thread${size === 1 ? '' : 's'}`;
}

/** A voice an engine has, as its worker lists them. */
export interface SynthVoice {
  /** What the engine loads. */
  identifier: string;
  name: string;
  /** Language codes with the engine's priority (lower = the better match). */
  languages: Array<{ name: string; priority: number }>;
}

/** What a worker reports once the engine has loaded. */
export interface ReadyInfo {
  sampleRate: number;
  voices: SynthVoice[];
  startupMs: number;
}

/** Options of {@link SynthPool}. */
export interface SynthPoolOptions {
  /** The provider's name, for logs and errors. */
  provider: string;
  /** The engine's name in messages, e.g. `eSpeak NG`. */
  engine: string;
  /** The worker script. */
  workerUrl: URL;
  size: number;
  warmUp: boolean;
  /** The rate the provider declares; another one from a worker is logged. */
  sampleRate: number;
  /** What to check when the engine does not load. */
  installHint: string;
  /** Maps a voice name to what the worker loads, or undefined when there is none. */
  resolveVoice: (name: string, voices: readonly SynthVoice[]) => string | undefined;
  /** The error message's advice for an unknown voice. */
  voiceHint: string;
  log?: TtsLogger;
}

/** Messages a worker sends. */
type WorkerMessage =
  | ({ type: 'ready' } & ReadyInfo)
  | { type: 'init-failed'; message: string }
  | { type: 'warm'; ms: number; sentences: number }
  | { type: 'audio'; job: number; pcm: Int16Array; words: Array<{ text: string; ms: number }> }
  | { type: 'done'; job: number; cancelled: boolean }
  | { type: 'failed'; job: number; message: string; fatal: boolean };

/** The pool's view of a stream: where a segment comes from and its results go. */
export interface JobOwner {
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
export class SynthPool {
  readonly #o: SynthPoolOptions;
  readonly #log: TtsLogger | undefined;
  #slots: Slot[] = [];
  /** Streams with a segment to synthesise and none in flight, in serving order. */
  #waiting: JobOwner[] = [];
  #info: Promise<ReadyInfo> | undefined;
  #resolveInfo: ((info: ReadyInfo) => void) | undefined;
  #rejectInfo: ((error: SpeechProviderError) => void) | undefined;
  #voiceIds = new Map<string, string | undefined>();
  /** The engine's voices, from the first worker that loaded. */
  #knownVoices: SynthVoice[] | undefined;
  #nextJob = 1;
  #closed = false;
  /** Shared with every worker: how many jobs are running in the pool. */
  readonly #busy = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));

  /** The worker threads it runs once started. */
  get size(): number {
    return this.#o.size;
  }

  constructor(options: SynthPoolOptions) {
    this.#o = options;
    this.#log = options.log;
  }

  /** Starts the workers if they are not running; resolves once one has loaded the engine. */
  start(): Promise<ReadyInfo> {
    if (this.#closed) return Promise.reject(closedError(this.#o));
    if (this.#info === undefined) {
      this.#info = new Promise<ReadyInfo>((resolve, reject) => {
        this.#resolveInfo = resolve;
        this.#rejectInfo = reject;
      });
      // Callers that only queue work do not await this; keep the rejection
      // from being reported as unhandled (it reaches them through failed()).
      this.#info.catch(() => undefined);
    }
    while (this.#slots.length < this.#o.size) this.#spawn();
    return this.#info;
  }

  /** Queues a stream that has a segment waiting. */
  request(owner: JobOwner): void {
    if (this.#closed) {
      owner.failed(closedError(this.#o));
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
  async voices(signal?: AbortSignal): Promise<SynthVoice[]> {
    const info = await abortable(this.start(), signal);
    return info.voices;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const slots = this.#slots;
    this.#slots = [];
    const error = closedError(this.#o);
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
    const worker = new Worker(this.#o.workerUrl, {
      workerData: { cancel, busy: this.#busy.buffer, warmUp: this.#o.warmUp },
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
      this.#log?.error({ provider: this.#o.provider }, 'speech worker did not start in time');
      void worker.terminate();
    }, SYNTH_WORKER_START_TIMEOUT_MS);
    timer.unref();
    worker.on('message', (message: WorkerMessage) => {
      if (message.type === 'ready') {
        clearTimeout(timer);
        this.#log?.debug(
          { provider: this.#o.provider, startupMs: Math.round(performance.now() - started) },
          'speech worker ready',
        );
        if (message.sampleRate !== this.#o.sampleRate) {
          this.#log?.warn(
            { provider: this.#o.provider, sampleRate: message.sampleRate },
            'unexpected speech worker sample rate',
          );
        }
        slot.ready = true;
        this.#knownVoices ??= message.voices;
        this.#resolveInfo?.(message);
        this.#dispatch(); // also unrefs the worker if nothing waits
      } else if (message.type === 'warm') {
        this.#log?.debug(
          {
            provider: this.#o.provider,
            warmUpMs: Math.round(message.ms),
            sentences: message.sentences,
          },
          'speech worker warmed up',
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
      this.#log?.error({ provider: this.#o.provider, err: error }, 'speech worker failed');
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
      this.#log?.warn(
        { provider: this.#o.provider, code },
        'speech worker exited; starting another',
      );
      job?.owner.failed(
        new SpeechProviderError(
          'tts',
          this.#o.provider,
          `${this.#o.engine} synthesis failed: its worker thread stopped (exit code ${code}). ` +
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
          this.#log?.debug({ provider: this.#o.provider, job: job.id }, 'speech segment cancelled');
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
            this.#o.provider,
            `${this.#o.engine} could not synthesise the segment: ${message.message}.`,
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
      this.#o.provider,
      `${this.#o.engine} could not start: ${reason}. ${this.#o.installHint}`,
      { retryable: true },
    );
    this.#log?.error({ provider: this.#o.provider, err: error }, 'speech worker could not start');
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
              this.#o.provider,
              `${this.#o.engine} has no voice "${segment.voice}". ${this.#o.voiceHint}`,
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
      this.#voiceIds.set(name, voices && this.#o.resolveVoice(name, voices));
    }
    return this.#voiceIds.get(name);
  }
}

/** One response's speech through a {@link SynthPool}. */
export class SynthStream implements TtsStream, JobOwner {
  readonly #out: TtsEmitter;
  readonly #voice: string;
  readonly #pool: SynthPool;
  readonly #sampleRate: number;
  #segments: string[] = [];
  #busy = false;
  #ended = false;
  /** Where the segment in flight started, in samples of the stream. */
  #segmentStart = 0;

  constructor(
    options: TtsOpenOptions,
    voice: string,
    pool: SynthPool,
    engine: { provider: string; sampleRate: number; log: TtsLogger | undefined },
  ) {
    this.#voice = voice;
    this.#pool = pool;
    this.#sampleRate = engine.sampleRate;
    const log = engine.log;
    this.#out = new TtsEmitter({
      provider: engine.provider,
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
      const at = this.#segmentStart + Math.round((word.ms * this.#sampleRate) / 1000);
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

function closedError(o: SynthPoolOptions): SpeechProviderError {
  return new SpeechProviderError(
    'tts',
    o.provider,
    `${o.engine} provider is closed; the server is shutting down or the provider was replaced.`,
  );
}

/** Resolves like `promise` unless `signal` fires first. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
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
