/**
 * Offline speech to text with Debian's pocketsphinx (`libpocketsphinx.so.3`,
 * 0.8+5prealpha, US English model), run in-process through koffi inside
 * worker threads so that decoding never blocks the event loop.
 *
 * Audio is forwarded to a decoder as it arrives, so the decoder keeps up with
 * the speaker and `commit()` only has the end of the utterance left to do.
 * Decoders are expensive to create (the model load: ~0.45 s and ~95 MB each,
 * measured) and cheap to reuse, so a pool keeps them: a stream borrows one
 * for the length of an utterance and gives it back when the text is out.
 * One worker hosts several decoders; they take turns, as messages arrive.
 */
import { access } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import type { SpeechProviderError } from '../../errors.js';
import type { ProviderHealth, SttEvent, SttOpenOptions, SttProvider, SttStream } from '../types.js';
import { SILENT_LOGGER, assertPcm16, deferred, emitSafely, messageOf, sttError } from './common.js';
import type { Deferred, SttLogger } from './common.js';
import { startModuleWorker } from './module-worker.js';
import type {
  PocketsphinxReply,
  PocketsphinxRequest,
  PocketsphinxWorkerData,
} from './pocketsphinx-worker.js';

/** The rate the US English model is trained on. */
export const POCKETSPHINX_SAMPLE_RATE_HZ = 16_000;
/** The library's soname in Debian's `libpocketsphinx3` package. */
export const DEFAULT_POCKETSPHINX_LIBRARY = 'libpocketsphinx.so.3';
/** Where Debian's `pocketsphinx-en-us` puts the model. */
export const DEFAULT_POCKETSPHINX_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';
/** What to run when the engine is missing. */
export const POCKETSPHINX_INSTALL_HINT = 'apt-get install pocketsphinx pocketsphinx-en-us';
/** Decoders alive at once: at ~95 MB each, 4 is ~380 MB. More speakers at once wait their turn. */
export const DEFAULT_POCKETSPHINX_MAX_DECODERS = 4;
/**
 * Worker threads: one core is left to the event loop. One worker decodes
 * about seven live streams at once (real-time factor ~0.14 measured).
 */
export const DEFAULT_POCKETSPHINX_MAX_WORKERS = Math.max(
  1,
  Math.min(4, availableParallelism() - 1),
);
/** Longest utterance: the decoder's lattice grows with it; sessions commit long before. */
export const DEFAULT_POCKETSPHINX_MAX_UTTERANCE_MS = 120_000;

const NAME = 'pocketsphinx';

/** Options of {@link PocketsphinxSttProvider}. */
export interface PocketsphinxOptions {
  /** `dlopen` name or path of the library. @defaultValue 'libpocketsphinx.so.3' */
  libraryPath?: string;
  /**
   * Directory holding the acoustic model directory `en-us/`, the language
   * model `en-us.lm.bin` and the dictionary `cmudict-en-us.dict`.
   * @defaultValue '/usr/share/pocketsphinx/model/en-us'
   */
  modelDir?: string;
  /**
   * Run pocketsphinx's second ("fwdflat") search pass at the end of each
   * utterance. Off by default: on flite test speech it changed no word and
   * cost ~55 ms more after the last audio (end of utterance ~15 ms without it,
   * ~70 ms with it, measured).
   * @defaultValue false
   */
  secondPass?: boolean;
  /** More decoder arguments, as `pocketsphinx_continuous` takes them (`['-beam', '1e-60']`). @defaultValue [] */
  extraArgs?: string[];
  /** Decoders alive at once (each ~95 MB). @defaultValue 4 */
  maxDecoders?: number;
  /** Worker threads hosting the decoders. @defaultValue cores − 1, between 1 and 4 */
  maxWorkers?: number;
  /** Longest utterance; a longer one fails its commit. @defaultValue 120000 */
  maxUtteranceMs?: number;
  /** Where model loads and timings go. @defaultValue silent */
  log?: SttLogger;
}

/** Counters of the engine, for health details and measurements. */
export interface PocketsphinxStats {
  workers: number;
  decoders: number;
  busyDecoders: number;
  /** Streams waiting for a decoder because `maxDecoders` are busy. */
  waiting: number;
  /** Time each decoder took to load, in creation order. */
  loadMs: number[];
  utterances: number;
  /** Totals over all utterances. */
  audioMs: number;
  decodeMs: number;
  endMs: number;
}

/** The text of an utterance and what it cost. */
interface Recognition {
  text: string;
  audioMs: number;
  decodeMs: number;
  endMs: number;
}

/**
 * The pocketsphinx provider: 16 kHz, VAD-gated (not continuous), no pause
 * reports. Create one per server; `close()` ends its workers.
 *
 * @example
 * const stt = new PocketsphinxSttProvider();
 * const stream = stt.open({ signal, onEvent: () => {} });
 * stream.write(pcm16At16kHz);
 * const text = await stream.commit(); // "what is the weather like in paris"
 */
export class PocketsphinxSttProvider implements SttProvider {
  readonly name = NAME;
  readonly sampleRate = POCKETSPHINX_SAMPLE_RATE_HZ;
  readonly continuous = false;
  readonly reportsPauses = false;

  readonly #pool: DecoderPool;
  readonly #log: SttLogger;
  readonly #maxSamples: number;
  readonly #libraryPath: string;
  readonly #requiredPaths: string[];
  #libraryLoads = false;

  constructor(options: PocketsphinxOptions = {}) {
    this.#log = options.log ?? SILENT_LOGGER;
    this.#libraryPath = options.libraryPath ?? DEFAULT_POCKETSPHINX_LIBRARY;
    const modelDir = options.modelDir ?? DEFAULT_POCKETSPHINX_MODEL_DIR;
    const hmm = join(modelDir, 'en-us');
    const lm = join(modelDir, 'en-us.lm.bin');
    const dict = join(modelDir, 'cmudict-en-us.dict');
    this.#requiredPaths = [hmm, lm, dict];
    const args = ['-hmm', hmm, '-lm', lm, '-dict', dict];
    if (!options.secondPass) args.push('-fwdflat', 'no');
    args.push(...(options.extraArgs ?? []));
    this.#maxSamples = Math.round(
      ((options.maxUtteranceMs ?? DEFAULT_POCKETSPHINX_MAX_UTTERANCE_MS) / 1000) *
        POCKETSPHINX_SAMPLE_RATE_HZ,
    );
    this.#pool = new DecoderPool({
      workerData: { libraryPath: this.#libraryPath, args, requiredPaths: this.#requiredPaths },
      maxDecoders: Math.max(1, options.maxDecoders ?? DEFAULT_POCKETSPHINX_MAX_DECODERS),
      maxWorkers: Math.max(1, options.maxWorkers ?? DEFAULT_POCKETSPHINX_MAX_WORKERS),
      log: this.#log,
    });
  }

  /** Opens a recognition stream for one session. */
  open(options: SttOpenOptions): SttStream {
    if (options.language && !/^en\b/i.test(options.language)) {
      this.#log.debug(
        { provider: NAME, language: options.language },
        'pocketsphinx has only an English model; language hint ignored',
      );
    }
    return new PocketsphinxStream(this.#pool, options, this.#log, this.#maxSamples);
  }

  /**
   * Loads `count` decoders ahead of the first speaker (at server start), so
   * nobody waits for a model load. Resolves with each load's time in ms.
   *
   * @example
   * await stt.preload(1, AbortSignal.timeout(10_000));
   */
  async preload(count = 1, signal?: AbortSignal): Promise<number[]> {
    const before = this.#pool.stats().loadMs.length;
    // Each decoder goes back to the pool as soon as it is loaded, even when the
    // caller stops waiting (signal): a load under way cannot be interrupted.
    const loads = Array.from({ length: count }, () =>
      this.#pool.acquire().then((decoder) => this.#pool.release(decoder)),
    );
    await abortable(Promise.all(loads), signal);
    return this.#pool.stats().loadMs.slice(before);
  }

  /** Counters of workers, decoders and timings. */
  stats(): PocketsphinxStats {
    return this.#pool.stats();
  }

  /** Says whether the library loads and the model files are there, and what to install if not. */
  /** Loads one decoder (the model) before the first utterance needs it. */
  async warm(signal?: AbortSignal): Promise<void> {
    await this.preload(1, signal);
  }

  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    signal?.throwIfAborted();
    const missing: string[] = [];
    await Promise.all(this.#requiredPaths.map((p) => access(p).catch(() => void missing.push(p))));
    if (missing.length > 0) {
      return {
        ok: false,
        detail: `pocketsphinx model files are missing (${missing.join(', ')}); install them with \`${POCKETSPHINX_INSTALL_HINT}\` or set modelDir`,
      };
    }
    if (!this.#libraryLoads) {
      try {
        // A dlopen in the main thread: quick, and the workers share the loaded library.
        const { default: koffi } = await import('koffi');
        koffi.load(this.#libraryPath);
        this.#libraryLoads = true;
      } catch (err) {
        return {
          ok: false,
          detail: `cannot load ${this.#libraryPath} (${messageOf(err)}); install it with \`${POCKETSPHINX_INSTALL_HINT}\` or set libraryPath`,
        };
      }
    }
    // Both checks pass: an engine failure remembered from before (say, the package was
    // installed since) no longer stands in the way of new decoders.
    this.#pool.forgetFailure();
    const s = this.#pool.stats();
    return {
      ok: true,
      detail: `${this.#libraryPath} loads; ${s.decoders} decoder(s), ${s.busyDecoders} busy, in ${s.workers} worker(s)`,
    };
  }

  /** Ends the workers; streams still open fail their next commit. */
  async close(): Promise<void> {
    await this.#pool.close();
  }
}

// ── The stream ──────────────────────────────────────────────────────────────

/** What a stream asks of its decoder, in order. */
type StreamOp =
  { op: 'audio'; pcm: Int16Array } | { op: 'end'; reply: Deferred<Recognition> } | { op: 'reset' };

/** A decoder borrowed from the pool, or being fetched (ops wait in `queue`). */
interface Lease {
  decoder: PooledDecoder | undefined;
  queue: StreamOp[];
}

class PocketsphinxStream implements SttStream {
  readonly #pool: DecoderPool;
  readonly #onEvent: (event: SttEvent) => void;
  readonly #log: SttLogger;
  readonly #maxSamples: number;
  #closed = false;
  #lease: Lease | undefined;
  /** Samples of the utterance under way. */
  #samples = 0;
  /** Commits sent to the decoder and not answered yet. */
  #pendingEnds = 0;
  /** Why the utterance under way cannot be recognised; its commit rejects with it. */
  #failure: SpeechProviderError | undefined;

  constructor(pool: DecoderPool, options: SttOpenOptions, log: SttLogger, maxSamples: number) {
    this.#pool = pool;
    this.#onEvent = options.onEvent;
    this.#log = log;
    this.#maxSamples = maxSamples;
    if (options.signal.aborted) this.#closed = true;
    else options.signal.addEventListener('abort', () => this.close(), { once: true });
  }

  write(pcm: Int16Array): void {
    if (this.#closed) return;
    assertPcm16(pcm, NAME);
    if (pcm.length === 0 || this.#failure) return;
    if (this.#samples + pcm.length > this.#maxSamples) {
      const seconds = this.#maxSamples / POCKETSPHINX_SAMPLE_RATE_HZ;
      this.#failure = sttError(
        NAME,
        `pocketsphinx: the utterance is longer than ${seconds} s, so it was dropped; commit more often (VAD or manual turns) or raise maxUtteranceMs.`,
      );
      // Free the decoder of what it heard so far; commit() then gives it back.
      if (this.#lease) this.#post({ op: 'reset' });
      return;
    }
    this.#samples += pcm.length;
    // A copy the worker can take over (transfer) without touching the caller's buffer.
    this.#post({ op: 'audio', pcm: pcm.slice() });
  }

  commit(): Promise<string> {
    if (this.#closed) return Promise.resolve('');
    const failure = this.#failure;
    const samples = this.#samples;
    this.#failure = undefined;
    this.#samples = 0;
    if (failure) {
      this.#releaseIfIdle();
      return Promise.reject(failure);
    }
    if (samples === 0) return Promise.resolve('');
    const reply = deferred<Recognition>();
    this.#pendingEnds++;
    this.#post({ op: 'end', reply });
    return reply.promise.then(
      (result) => {
        this.#pendingEnds--;
        this.#releaseIfIdle();
        if (result.text && !this.#closed) {
          // Non-streaming engine: the whole text arrives as one `text` event, so
          // transcript deltas exist for every provider.
          emitSafely(this.#onEvent, { type: 'text', text: result.text }, this.#log, NAME);
        }
        return result.text;
      },
      (err: Error) => {
        this.#pendingEnds--;
        this.#releaseIfIdle();
        throw err;
      },
    );
  }

  clear(): void {
    if (this.#closed) return;
    this.#samples = 0;
    this.#failure = undefined;
    if (this.#lease) this.#post({ op: 'reset' });
    this.#releaseIfIdle();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const lease = this.#lease;
    this.#lease = undefined;
    if (!lease) return;
    if (lease.decoder) {
      // Commits already sent are still answered: the worker handles `end` before `reset`.
      lease.decoder.reset();
      this.#pool.release(lease.decoder);
    } else {
      for (const op of lease.queue) {
        if (op.op === 'end') {
          op.reply.reject(
            sttError(
              NAME,
              'pocketsphinx: the stream was closed before the utterance was recognised.',
            ),
          );
        }
      }
      lease.queue.length = 0;
    }
  }

  /** Sends an op to the stream's decoder, borrowing one first when needed. */
  #post(op: StreamOp): void {
    let lease = this.#lease;
    if (!lease) {
      lease = { decoder: undefined, queue: [] };
      this.#lease = lease;
      this.#borrow(lease);
    }
    if (lease.decoder) send(lease.decoder, op);
    else lease.queue.push(op);
  }

  #borrow(lease: Lease): void {
    this.#pool.acquire().then(
      (decoder) => {
        if (this.#lease !== lease) {
          // The stream closed while it waited; queued commits were rejected then.
          this.#pool.release(decoder);
          return;
        }
        lease.decoder = decoder;
        for (const op of lease.queue) send(decoder, op);
        lease.queue.length = 0;
        this.#releaseIfIdle();
      },
      (err: SpeechProviderError) => {
        if (this.#lease === lease) this.#lease = undefined;
        for (const op of lease.queue) if (op.op === 'end') op.reply.reject(err);
        lease.queue.length = 0;
        // Audio of an utterance not committed yet is lost too: its commit says why.
        if (this.#samples > 0) this.#failure = err;
      },
    );
  }

  /** Gives the decoder back once nothing of this stream is left on it. */
  #releaseIfIdle(): void {
    const lease = this.#lease;
    if (!lease?.decoder || this.#samples > 0 || this.#pendingEnds > 0) return;
    this.#lease = undefined;
    this.#pool.release(lease.decoder);
  }
}

function send(decoder: PooledDecoder, op: StreamOp): void {
  if (op.op === 'audio') decoder.audio(op.pcm);
  else if (op.op === 'reset') decoder.reset();
  else decoder.end().then(op.reply.resolve, op.reply.reject);
}

// ── The pool ────────────────────────────────────────────────────────────────

interface PoolOptions {
  workerData: PocketsphinxWorkerData;
  maxDecoders: number;
  maxWorkers: number;
  log: SttLogger;
}

/** A decoder living in a worker. */
class PooledDecoder {
  readonly id: number;
  readonly slot: WorkerSlot;
  constructor(id: number, slot: WorkerSlot) {
    this.id = id;
    this.slot = slot;
  }
  audio(pcm: Int16Array): void {
    this.slot.post({ op: 'audio', decoder: this.id, pcm }, [pcm.buffer as ArrayBuffer]);
  }
  reset(): void {
    this.slot.post({ op: 'reset', decoder: this.id });
  }
  end(): Promise<Recognition> {
    return this.slot.end(this.id);
  }
}

/** One worker thread and the requests it owes answers to. */
class WorkerSlot {
  readonly ready: Promise<void>;
  /** Decoders created here (or being created). */
  decoders = 0;
  #worker: Worker;
  #dead: SpeechProviderError | undefined;
  #nextSeq = 1;
  #creates = new Map<number, Deferred<number>>();
  #ends = new Map<number, Deferred<Recognition>>();
  #readyWait = deferred<void>();
  #owed = 0;
  readonly #onDeath: (slot: WorkerSlot, error: SpeechProviderError) => void;
  readonly #onFatal: (error: SpeechProviderError) => void;
  readonly #onRecognised: (r: Recognition) => void;

  constructor(
    data: PocketsphinxWorkerData,
    hooks: {
      onDeath: (slot: WorkerSlot, error: SpeechProviderError) => void;
      onFatal: (error: SpeechProviderError) => void;
      onRecognised: (r: Recognition) => void;
    },
  ) {
    this.#onDeath = hooks.onDeath;
    this.#onFatal = hooks.onFatal;
    this.#onRecognised = hooks.onRecognised;
    this.ready = this.#readyWait.promise;
    const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
    this.#worker = startModuleWorker(new URL(`./pocketsphinx-worker${ext}`, import.meta.url), {
      workerData: data,
    });
    this.#owe(); // the `ready` report
    this.#worker.on('message', (m: PocketsphinxReply) => this.#onMessage(m));
    this.#worker.on('error', (err) =>
      this.#die(sttError(NAME, `pocketsphinx worker failed: ${err.message}`, err, true)),
    );
    this.#worker.on('exit', (code) =>
      this.#die(sttError(NAME, `pocketsphinx worker exited (code ${code}).`, undefined, true)),
    );
  }

  get dead(): boolean {
    return this.#dead !== undefined;
  }

  post(message: PocketsphinxRequest, transfer?: ArrayBuffer[]): void {
    if (!this.#dead) this.#worker.postMessage(message, transfer);
  }

  create(decoder: number): Promise<number> {
    const reply = deferred<number>();
    if (this.#dead) reply.reject(this.#dead);
    else {
      this.#creates.set(decoder, reply);
      this.#owe();
      this.post({ op: 'create', decoder });
    }
    return reply.promise;
  }

  end(decoder: number): Promise<Recognition> {
    const reply = deferred<Recognition>();
    if (this.#dead) reply.reject(this.#dead);
    else {
      const seq = this.#nextSeq++;
      this.#ends.set(seq, reply);
      this.#owe();
      this.post({ op: 'end', decoder, seq });
    }
    return reply.promise;
  }

  async terminate(error: SpeechProviderError): Promise<void> {
    this.#die(error);
    await this.#worker.terminate();
  }

  /**
   * Keeps the process alive only while an answer is owed: an idle pool must
   * not stop a script from exiting, a pending commit must.
   */
  #owe(): void {
    if (this.#owed++ === 0) this.#worker.ref();
  }
  #paid(): void {
    if (--this.#owed === 0) this.#worker.unref();
  }

  #onMessage(m: PocketsphinxReply): void {
    switch (m.op) {
      case 'ready':
        this.#paid();
        this.#readyWait.resolve();
        return;
      case 'fatal': {
        const error = sttError(
          NAME,
          `pocketsphinx is not available: ${m.message}. Install it with \`${POCKETSPHINX_INSTALL_HINT}\` (or set libraryPath).`,
        );
        this.#onFatal(error);
        void this.terminate(error);
        return;
      }
      case 'created':
      case 'create-failed': {
        const reply = this.#creates.get(m.decoder);
        if (!reply) return;
        this.#creates.delete(m.decoder);
        this.#paid();
        if (m.op === 'created') reply.resolve(m.loadMs);
        else {
          const error = sttError(
            NAME,
            `pocketsphinx could not load its model: ${m.message}. Install it with \`${POCKETSPHINX_INSTALL_HINT}\` (or set modelDir).`,
          );
          this.#onFatal(error);
          reply.reject(error);
        }
        return;
      }
      case 'text':
      case 'failed': {
        const reply = this.#ends.get(m.seq);
        if (!reply) return;
        this.#ends.delete(m.seq);
        this.#paid();
        if (m.op === 'failed') {
          reply.reject(sttError(NAME, `pocketsphinx failed to end the utterance: ${m.message}.`));
          return;
        }
        const result = { text: m.text, audioMs: m.audioMs, decodeMs: m.decodeMs, endMs: m.endMs };
        this.#onRecognised(result);
        reply.resolve(result);
        return;
      }
    }
  }

  #die(error: SpeechProviderError): void {
    if (this.#dead) return;
    this.#dead = error;
    this.#readyWait.reject(error);
    for (const reply of this.#creates.values()) reply.reject(error);
    for (const reply of this.#ends.values()) reply.reject(error);
    this.#creates.clear();
    this.#ends.clear();
    this.#onDeath(this, error);
  }
}

/** Hands out decoders: an idle one, else a new one, else the next one given back. */
class DecoderPool {
  readonly #options: PoolOptions;
  #slots: WorkerSlot[] = [];
  #idle: PooledDecoder[] = [];
  #busy = new Set<PooledDecoder>();
  /** Decoders alive or being created. */
  #count = 0;
  #nextId = 1;
  #waiters: Array<Deferred<PooledDecoder>> = [];
  /** The engine cannot work (library or model missing): fail fast until health() passes. */
  #failure: SpeechProviderError | undefined;
  #closed: SpeechProviderError | undefined;
  #stats = { loadMs: [] as number[], utterances: 0, audioMs: 0, decodeMs: 0, endMs: 0 };

  constructor(options: PoolOptions) {
    this.#options = options;
  }

  acquire(): Promise<PooledDecoder> {
    if (this.#closed) return Promise.reject(this.#closed);
    if (this.#failure) return Promise.reject(this.#failure);
    // Most recently used first: its memory is the likeliest to be warm.
    const idle = this.#idle.pop();
    if (idle) {
      this.#busy.add(idle);
      return Promise.resolve(idle);
    }
    if (this.#count < this.#options.maxDecoders) return this.#create();
    const waiter = deferred<PooledDecoder>();
    this.#waiters.push(waiter);
    this.#options.log.debug(
      { provider: NAME, waiting: this.#waiters.length, maxDecoders: this.#options.maxDecoders },
      'all pocketsphinx decoders busy; waiting for one',
    );
    return waiter.promise;
  }

  release(decoder: PooledDecoder): void {
    if (!this.#busy.delete(decoder)) return;
    if (decoder.slot.dead || this.#closed) return;
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#busy.add(decoder);
      waiter.resolve(decoder);
    } else this.#idle.push(decoder);
  }

  forgetFailure(): void {
    this.#failure = undefined;
  }

  stats(): PocketsphinxStats {
    return {
      workers: this.#slots.length,
      decoders: this.#idle.length + this.#busy.size,
      busyDecoders: this.#busy.size,
      waiting: this.#waiters.length,
      ...this.#stats,
      loadMs: [...this.#stats.loadMs],
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = sttError(NAME, 'pocketsphinx: the provider was closed (server shutting down).');
    for (const waiter of this.#waiters.splice(0)) waiter.reject(this.#closed);
    const slots = this.#slots.splice(0);
    this.#idle = [];
    this.#busy.clear();
    await Promise.all(slots.map((slot) => slot.terminate(this.#closed!)));
  }

  async #create(): Promise<PooledDecoder> {
    this.#count++;
    const slot = this.#pickSlot();
    slot.decoders++;
    const decoder = new PooledDecoder(this.#nextId++, slot);
    try {
      await slot.ready;
      const loadMs = await slot.create(decoder.id);
      this.#stats.loadMs.push(loadMs);
      this.#options.log.info(
        { provider: NAME, loadMs: Math.round(loadMs), decoders: this.#count },
        'pocketsphinx decoder loaded',
      );
    } catch (err) {
      this.#count--;
      slot.decoders--;
      throw err;
    }
    if (this.#closed) throw this.#closed;
    this.#busy.add(decoder);
    return decoder;
  }

  /** A new worker while under `maxWorkers` and every worker has work; else the least loaded. */
  #pickSlot(): WorkerSlot {
    const live = this.#slots;
    if (live.length < this.#options.maxWorkers && live.every((s) => s.decoders > 0)) {
      const slot = new WorkerSlot(this.#options.workerData, {
        onDeath: (dead, error) => this.#onDeath(dead, error),
        onFatal: (error) => {
          this.#failure = error;
          // Nobody waiting can be served by a decoder that cannot be made.
          for (const waiter of this.#waiters.splice(0)) waiter.reject(error);
        },
        onRecognised: (r) => {
          this.#stats.utterances++;
          this.#stats.audioMs += r.audioMs;
          this.#stats.decodeMs += r.decodeMs;
          this.#stats.endMs += r.endMs;
          this.#options.log.debug(
            {
              provider: NAME,
              audioMs: Math.round(r.audioMs),
              decodeMs: Math.round(r.decodeMs),
              endMs: Math.round(r.endMs),
            },
            'pocketsphinx utterance decoded',
          );
        },
      });
      this.#slots.push(slot);
      return slot;
    }
    return live.reduce((a, b) => (b.decoders < a.decoders ? b : a));
  }

  #onDeath(slot: WorkerSlot, error: SpeechProviderError): void {
    const at = this.#slots.indexOf(slot);
    if (at === -1) return; // closed: already removed
    this.#slots.splice(at, 1);
    const lost = slot.decoders;
    this.#count -= lost;
    this.#idle = this.#idle.filter((d) => d.slot !== slot);
    for (const d of this.#busy) if (d.slot === slot) this.#busy.delete(d);
    if (!this.#failure) {
      this.#options.log.error(
        { provider: NAME, err: error, decodersLost: lost },
        'pocketsphinx worker died; its decoders are replaced on demand',
      );
    }
    // Waiters can now have new decoders in the freed room.
    while (this.#waiters.length > 0 && this.#count < this.#options.maxDecoders && !this.#failure) {
      const waiter = this.#waiters.shift()!;
      this.#create().then(waiter.resolve, waiter.reject);
    }
  }
}

/** Rejects when `signal` fires, else settles as `promise` does. */
function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
