/**
 * The pocketsphinx decoder pool: worker threads (each hosting a few
 * decoders) and the decoders a stream borrows for the length of an utterance.
 *
 * The pool measures its own capacity: each worker counts the audio it has
 * decoded in shared memory, so the backlog (audio sent and not yet decoded)
 * is known at any time, and each utterance reports its real-time factor
 * (decode time / audio time). A backlog over {@link SATURATION_BACKLOG_MS}
 * or a stream waiting for a decoder means the pool is saturated: `stats()`,
 * the health detail and the metrics say so, and a warning is logged.
 */
import type { Worker } from 'node:worker_threads';
import type { SpeechProviderError } from '../../errors.js';
import { deferred, sttError } from './common.js';
import type { Deferred, SttLogger } from './common.js';
import { startModuleWorker } from './module-worker.js';
import type {
  PocketsphinxReply,
  PocketsphinxRequest,
  PocketsphinxWorkerData,
} from './pocketsphinx-worker.js';

const NAME = 'pocketsphinx';
/** What to run when the engine is missing. */
export const POCKETSPHINX_INSTALL_HINT = 'apt-get install pocketsphinx pocketsphinx-en-us';
/** Audio waiting to be decoded beyond which the pool counts as saturated, in ms. */
export const SATURATION_BACKLOG_MS = 1_000;
/** Utterances the recent real-time factor is averaged over. */
const RECENT_UTTERANCES = 20;
const SAMPLES_PER_MS = 16;
/**
 * How long a closing worker thread gets to end on its own (it finishes the
 * call into the library it is in, loading or decoding) before it is
 * terminated.
 */
const WORKER_CLOSE_MS = 5_000;

/** Counters of the engine, for health details and measurements. */
export interface PocketsphinxStats {
  workers: number;
  /** Most worker threads the pool may start. */
  maxWorkers: number;
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
  /** Audio sent to decoders and not decoded yet, in ms (the worst worker). */
  backlogMs: number;
  /** Decode time / audio time over the last 20 utterances (each stream's own share of a core). */
  recentRealTimeFactor: number;
  /** Streams are waiting for a decoder, or audio waits more than 1 s to be decoded. */
  saturated: boolean;
}

/** The text of an utterance and what it cost. */
export interface Recognition {
  text: string;
  audioMs: number;
  decodeMs: number;
  endMs: number;
  /** The decoder's cepstral mean after the utterance, with per-session CMN. */
  cmn?: Float32Array;
}

export interface PoolOptions {
  workerData: PocketsphinxWorkerData;
  maxDecoders: number;
  maxWorkers: number;
  log: SttLogger;
}

/** A decoder living in a worker. */
export class PooledDecoder {
  readonly id: number;
  readonly slot: WorkerSlot;
  constructor(id: number, slot: WorkerSlot) {
    this.id = id;
    this.slot = slot;
  }
  audio(pcm: Int16Array): void {
    this.slot.posted += pcm.length;
    this.slot.post({ op: 'audio', decoder: this.id, pcm }, [pcm.buffer as ArrayBuffer]);
  }
  reset(): void {
    this.slot.post({ op: 'reset', decoder: this.id });
  }
  /** Starts the next utterance from this cepstral mean (null: the default); ignored without per-session CMN. */
  setCmn(mean: Float32Array | null): void {
    this.slot.post({ op: 'cmn', decoder: this.id, mean: mean && mean.slice() });
  }
  end(): Promise<Recognition> {
    return this.slot.end(this.id);
  }
  /** Receives the utterance's partial hypotheses (when the worker makes them); unset when given back. */
  set onPartial(listener: ((text: string) => void) | undefined) {
    this.slot.listen(this.id, listener);
  }
}

/** One worker thread and the requests it owes answers to. */
class WorkerSlot {
  readonly ready: Promise<void>;
  /** Decoders created here (or being created). */
  decoders = 0;
  /** Samples of audio sent to this worker. */
  posted = 0;
  /** Samples the worker has decoded (it adds to it after each chunk). */
  readonly #progress = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
  /** Set to 1 on close: the worker drops what is still queued for it. */
  readonly #stop = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
  readonly #exited: Promise<void>;
  #worker: Worker;
  #dead: SpeechProviderError | undefined;
  #nextSeq = 1;
  #creates = new Map<number, Deferred<number>>();
  #ends = new Map<number, Deferred<Recognition>>();
  readonly #partials = new Map<number, (text: string) => void>();
  #readyWait = deferred<void>();
  #owed = 0;
  readonly #onDeath: (slot: WorkerSlot, error: SpeechProviderError) => void;
  readonly #onFatal: (error: SpeechProviderError) => void;
  readonly #onRecognised: (r: Recognition) => void;
  readonly #onCmnError: (message: string) => void;

  constructor(
    data: PocketsphinxWorkerData,
    hooks: {
      onDeath: (slot: WorkerSlot, error: SpeechProviderError) => void;
      onFatal: (error: SpeechProviderError) => void;
      onRecognised: (r: Recognition) => void;
      onCmnError: (message: string) => void;
    },
  ) {
    this.#onCmnError = hooks.onCmnError;
    this.#onDeath = hooks.onDeath;
    this.#onFatal = hooks.onFatal;
    this.#onRecognised = hooks.onRecognised;
    this.ready = this.#readyWait.promise;
    const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
    const workerData: PocketsphinxWorkerData = {
      ...data,
      progress: this.#progress.buffer,
      stop: this.#stop.buffer,
    };
    this.#worker = startModuleWorker(new URL(`./pocketsphinx-worker${ext}`, import.meta.url), {
      workerData,
    });
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => resolve()));
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

  /** Audio sent and not decoded yet, in samples (the counter wraps at 2^31: subtract as int32). */
  get backlog(): number {
    return Math.max(0, (this.posted - Atomics.load(this.#progress, 0)) | 0);
  }

  post(message: PocketsphinxRequest, transfer?: ArrayBuffer[]): void {
    if (!this.#dead) this.#worker.postMessage(message, transfer);
  }

  /** Routes a decoder's partial hypotheses to `listener` (none: dropped). */
  listen(decoder: number, listener: ((text: string) => void) | undefined): void {
    if (listener) this.#partials.set(decoder, listener);
    else this.#partials.delete(decoder);
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

  /**
   * Ends the worker: it drops the work queued for it, frees its decoders and
   * ends its thread itself. Not `terminate()` at once: a thread stopped inside
   * a call into the library (while it loads it, or decodes) aborts the whole
   * process ("FATAL ERROR: Error::ThrowAsJavaScriptException napi_throw").
   * Only a thread still running after {@link WORKER_CLOSE_MS} is terminated.
   */
  async close(error: SpeechProviderError): Promise<void> {
    this.#die(error);
    Atomics.store(this.#stop, 0, 1);
    // The process waits for the thread's end.
    this.#worker.ref();
    this.#worker.postMessage({ op: 'close' } satisfies PocketsphinxRequest);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<true>((resolve) => {
      timer = setTimeout(() => resolve(true), WORKER_CLOSE_MS);
    });
    const stuck = await Promise.race([this.#exited, late]);
    clearTimeout(timer);
    if (stuck) await this.#worker.terminate();
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
        void this.close(error);
        return;
      }
      case 'created':
      case 'create-failed': {
        const reply = this.#creates.get(m.decoder);
        if (!reply) return;
        this.#creates.delete(m.decoder);
        this.#paid();
        if (m.op === 'created') {
          if (m.cmnError) this.#onCmnError(m.cmnError);
          reply.resolve(m.loadMs);
        } else {
          const error = sttError(
            NAME,
            `pocketsphinx could not load its model: ${m.message}. Install it with \`${POCKETSPHINX_INSTALL_HINT}\` (or set modelDir).`,
          );
          this.#onFatal(error);
          reply.reject(error);
        }
        return;
      }
      case 'partial':
        this.#partials.get(m.decoder)?.(m.text);
        return;
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
        const result: Recognition = {
          text: m.text,
          audioMs: m.audioMs,
          decodeMs: m.decodeMs,
          endMs: m.endMs,
          ...(m.cmn ? { cmn: m.cmn } : {}),
        };
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
export class DecoderPool {
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
  /** Real-time factors of the last utterances. */
  #recent: number[] = [];
  /** Saturated at the last check (a warning is logged when it starts). */
  #saturated = false;
  /** Per-session CMN failed its check on some decoder (warned once). */
  #cmnWarned = false;

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
    this.#checkSaturation();
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
    const backlogMs = Math.max(0, ...this.#slots.map((s) => s.backlog)) / SAMPLES_PER_MS;
    const recent = this.#recent;
    return {
      workers: this.#slots.length,
      maxWorkers: this.#options.maxWorkers,
      backlogMs,
      recentRealTimeFactor:
        recent.length === 0 ? 0 : recent.reduce((a, b) => a + b, 0) / recent.length,
      saturated: this.#checkSaturation(backlogMs),
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
    await Promise.all(slots.map((slot) => slot.close(this.#closed!)));
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
        onCmnError: (message) => {
          if (this.#cmnWarned) return;
          this.#cmnWarned = true;
          this.#options.log.warn(
            { provider: NAME, reason: message },
            'pocketsphinx per-session CMN off: the library does not match the expected layout',
          );
        },
        onFatal: (error) => {
          this.#failure = error;
          // Nobody waiting can be served by a decoder that cannot be made.
          for (const waiter of this.#waiters.splice(0)) waiter.reject(error);
        },
        onRecognised: (r) => {
          if (r.audioMs > 0) {
            this.#recent.push(r.decodeMs / r.audioMs);
            if (this.#recent.length > RECENT_UTTERANCES) this.#recent.shift();
          }
          this.#checkSaturation();
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

  /** Whether the pool is saturated now; logs when that starts and ends. */
  #checkSaturation(
    backlogMs = Math.max(0, ...this.#slots.map((s) => s.backlog)) / SAMPLES_PER_MS,
  ): boolean {
    const saturated = this.#waiters.length > 0 || backlogMs > SATURATION_BACKLOG_MS;
    if (saturated !== this.#saturated) {
      this.#saturated = saturated;
      const fields = {
        provider: NAME,
        waiting: this.#waiters.length,
        backlogMs: Math.round(backlogMs),
        workers: this.#slots.length,
        decoders: this.#count,
      };
      if (saturated) this.#options.log.warn(fields, 'pocketsphinx saturated');
      else this.#options.log.info(fields, 'pocketsphinx keeps up again');
    }
    return saturated;
  }

  /** Checks the backlog after audio went out (cheap: one atomic read per worker). */
  noteAudio(): void {
    this.#checkSaturation();
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
