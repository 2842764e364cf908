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
import { join } from 'node:path';
import { coreShare } from '../../config/cores.js';
import type { SpeechProviderError } from '../../errors.js';
import type { ProviderHealth, SttEvent, SttOpenOptions, SttProvider, SttStream } from '../types.js';
import { SILENT_LOGGER, assertPcm16, deferred, emitSafely, messageOf, sttError } from './common.js';
import type { Deferred, SttLogger } from './common.js';
import { SilenceGate } from './silence-gate.js';
import { DecoderPool, POCKETSPHINX_INSTALL_HINT } from './pocketsphinx-pool.js';
import type { PocketsphinxStats, PooledDecoder, Recognition } from './pocketsphinx-pool.js';

export { POCKETSPHINX_INSTALL_HINT, SATURATION_BACKLOG_MS } from './pocketsphinx-pool.js';
export type { PocketsphinxStats } from './pocketsphinx-pool.js';

/** The rate the US English model is trained on. */
export const POCKETSPHINX_SAMPLE_RATE_HZ = 16_000;
/** The library's soname in Debian's `libpocketsphinx3` package. */
export const DEFAULT_POCKETSPHINX_LIBRARY = 'libpocketsphinx.so.3';
/** Where Debian's `pocketsphinx-en-us` puts the model. */
export const DEFAULT_POCKETSPHINX_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';
/** Decoders alive at once: at ~95 MB each, 4 is ~380 MB. More speakers at once wait their turn. */
export const DEFAULT_POCKETSPHINX_MAX_DECODERS = 4;
/**
 * Most worker threads: one per core (this process's share of them, with
 * `WORKERS`: each worker gets cores ÷ workers). Workers start as speakers need them (a
 * new one while every worker already hosts a decoder), so an idle server
 * has one, and four people speaking at once on two cores get both. Measured
 * on flite speech with the default search: 0.15–0.5 s of CPU per second of
 * audio per stream on a busy 2-core machine, so one core cannot carry four
 * speakers (docs/voice.md).
 */
export const DEFAULT_POCKETSPHINX_MAX_WORKERS = coreShare();
/**
 * The search's pruning with `fastSearch`: at most 3,000 HMMs and 5 word exits
 * per frame. Measured on flite speech: about a third less CPU than
 * pocketsphinx's defaults, the same words but one in ~80. (Also keeping only
 * the 2 best Gaussians, `-topn 2`, saved more but lost short phrases.)
 */
export const POCKETSPHINX_FAST_SEARCH_ARGS = Object.freeze(['-maxhmmpf', '3000', '-maxwpf', '5']);
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
  /** Prune the search harder ({@link POCKETSPHINX_FAST_SEARCH_ARGS}). @defaultValue true */
  fastSearch?: boolean;
  /** More decoder arguments, as `pocketsphinx_continuous` takes them (`['-beam', '1e-60']`). @defaultValue [] */
  extraArgs?: string[];
  /** Decoders alive at once (each ~95 MB). @defaultValue 4 */
  maxDecoders?: number;
  /** Most worker threads hosting the decoders (started as speakers need them). @defaultValue one per core */
  maxWorkers?: number;
  /** Longest utterance; a longer one fails its commit. @defaultValue 120000 */
  maxUtteranceMs?: number;
  /** Where model loads and timings go. @defaultValue silent */
  log?: SttLogger;
  /**
   * Stream words while the user speaks: every this many ms of an
   * utterance's audio the worker asks the decoder for its best hypothesis so
   * far (`ps_get_hyp`), and words two hypotheses in a row agree on go out as
   * `text` events (so `…transcription.delta`s come during the turn, not only
   * at its end). Costs worker CPU per utterance (see docs/voice.md); 0 = off.
   * @defaultValue 0
   */
  partialEveryMs?: number;
  /**
   * Keep pocketsphinx's live cepstral mean per stream: the decoder's mean is
   * saved when a stream's utterance ends and put back before its next one,
   * whichever shared decoder it gets, so a speaker is not normalised by
   * whoever used that decoder before. Turned off by itself (with a warning)
   * when the library does not pass its layout check. false: the mean carries
   * over from utterance to utterance on each decoder, whoever speaks.
   * @defaultValue true
   */
  cmnPerSession?: boolean;
  /**
   * The cepstral mean (13 values) a stream's first utterance starts from,
   * with `cmnPerSession`. By default a stream's first utterance starts from
   * the decoder's mean as the speakers before left it, as without
   * per-session CMN: measured on Flite speech, that heard first utterances
   * with 7.9% word errors, the model's `-cmninit` (from its `feat.params`)
   * with 22.8%, and a running average of recent sessions' means with 14.9%
   * (loadtest/stt-word-errors.ts, docs/voice.md).
   * @defaultValue the decoder's current mean
   */
  cmnDefault?: number[];
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
  readonly #partials: boolean;
  readonly #cmnPerSession: boolean;

  constructor(options: PocketsphinxOptions = {}) {
    this.#cmnPerSession = options.cmnPerSession ?? true;
    const partialEveryMs = Math.max(0, options.partialEveryMs ?? 0);
    this.#partials = partialEveryMs > 0;
    this.#log = options.log ?? SILENT_LOGGER;
    this.#libraryPath = options.libraryPath ?? DEFAULT_POCKETSPHINX_LIBRARY;
    const modelDir = options.modelDir ?? DEFAULT_POCKETSPHINX_MODEL_DIR;
    const hmm = join(modelDir, 'en-us');
    const lm = join(modelDir, 'en-us.lm.bin');
    const dict = join(modelDir, 'cmudict-en-us.dict');
    this.#requiredPaths = [hmm, lm, dict];
    const args = ['-hmm', hmm, '-lm', lm, '-dict', dict];
    if (!options.secondPass) args.push('-fwdflat', 'no');
    if (options.fastSearch ?? true) args.push(...POCKETSPHINX_FAST_SEARCH_ARGS);
    args.push(...(options.extraArgs ?? []));
    this.#maxSamples = Math.round(
      ((options.maxUtteranceMs ?? DEFAULT_POCKETSPHINX_MAX_UTTERANCE_MS) / 1000) *
        POCKETSPHINX_SAMPLE_RATE_HZ,
    );
    this.#pool = new DecoderPool({
      workerData: {
        libraryPath: this.#libraryPath,
        args,
        requiredPaths: this.#requiredPaths,
        ...(partialEveryMs > 0 ? { partialEveryMs } : {}),
        cmnPerSession: this.#cmnPerSession,
        ...(options.cmnDefault ? { cmnDefault: [...options.cmnDefault] } : {}),
      },
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
    return new PocketsphinxStream(this.#pool, options, this.#log, this.#maxSamples, {
      partials: this.#partials,
      cmnPerSession: this.#cmnPerSession,
    });
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
    const load =
      `${s.decoders} decoder(s), ${s.busyDecoders} busy, in ${s.workers} of ${s.maxWorkers} worker(s); ` +
      `real-time factor ${s.recentRealTimeFactor.toFixed(2)} per stream`;
    const saturation = s.saturated
      ? `; saturated: ${s.waiting} stream(s) waiting for a decoder, ${Math.round(s.backlogMs)} ms of audio not decoded yet`
      : '';
    return { ok: true, detail: `${this.#libraryPath} loads; ${load}${saturation}` };
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
  readonly #gate = new SilenceGate({ sampleRate: POCKETSPHINX_SAMPLE_RATE_HZ });
  /** Commits sent to the decoder and not answered yet. */
  #pendingEnds = 0;
  /** Why the utterance under way cannot be recognised; its commit rejects with it. */
  #failure: SpeechProviderError | undefined;
  readonly #partials: boolean;
  /** Partials: the words sent so far this utterance, and the previous hypothesis. */
  #sent: string[] = [];
  #previous: string[] = [];
  readonly #cmnPerSession: boolean;
  /** This stream's cepstral mean after its last utterance (null: none yet, the default). */
  #cmn: Float32Array | null = null;

  constructor(
    pool: DecoderPool,
    options: SttOpenOptions,
    log: SttLogger,
    maxSamples: number,
    features: { partials: boolean; cmnPerSession: boolean },
  ) {
    this.#partials = features.partials;
    this.#cmnPerSession = features.cmnPerSession;
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
    // Long silences (the end-of-turn window, pauses) are not decoded.
    if (!this.#gate.pass(pcm)) return;
    // A copy the worker can take over (transfer) without touching the caller's buffer.
    this.#post({ op: 'audio', pcm: pcm.slice() });
    this.#pool.noteAudio();
  }

  commit(): Promise<string> {
    if (this.#closed) return Promise.resolve('');
    const failure = this.#failure;
    const samples = this.#samples;
    this.#failure = undefined;
    this.#samples = 0;
    this.#gate.reset();
    const streamed = this.#sent.length > 0;
    this.#sent = [];
    this.#previous = [];
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
        if (result.cmn) this.#cmn = result.cmn;
        this.#releaseIfIdle();
        // With partials the words went out as they came; the session sends what is left.
        if (result.text && !this.#closed && !streamed) {
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
    this.#sent = [];
    this.#previous = [];
    this.#samples = 0;
    this.#gate.reset();
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
      lease.decoder.onPartial = undefined;
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
        // The decoder's mean is its last speaker's: start from this stream's own.
        if (this.#cmnPerSession) decoder.setCmn(this.#cmn);
        if (this.#partials) decoder.onPartial = (text) => this.#partial(text);
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
    lease.decoder.onPartial = undefined;
    this.#pool.release(lease.decoder);
  }

  /**
   * A hypothesis of the utterance so far: words it and the one before agree
   * on are taken as heard and sent (as `text`) once. A hypothesis that
   * revises words already sent sends nothing more; the commit's text is
   * the whole truth either way.
   */
  #partial(text: string): void {
    // A hypothesis of an utterance already committed (its end not answered yet) is stale.
    if (this.#closed || this.#pendingEnds > 0 || this.#samples === 0) return;
    const words = text.split(/\s+/).filter(Boolean);
    const previous = this.#previous;
    this.#previous = words;
    let agreed = 0;
    while (agreed < words.length && words[agreed] === previous[agreed]) agreed++;
    const sent = this.#sent;
    if (agreed <= sent.length || sent.some((w, i) => w !== words[i])) return;
    const fresh = words.slice(sent.length, agreed);
    emitSafely(
      this.#onEvent,
      { type: 'text', text: (sent.length > 0 ? ' ' : '') + fresh.join(' ') },
      this.#log,
      NAME,
    );
    sent.push(...fresh);
  }
}

function send(decoder: PooledDecoder, op: StreamOp): void {
  if (op.op === 'audio') decoder.audio(op.pcm);
  else if (op.op === 'reset') decoder.reset();
  else decoder.end().then(op.reply.resolve, op.reply.reject);
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
