/**
 * The pocketsphinx worker thread: hosts one or more decoders of Debian's
 * `libpocketsphinx.so.3` (0.8+5prealpha) through koffi. Every call into the
 * library is synchronous, which is why it lives here and not on the event
 * loop. Messages are handled one at a time, in order, so a decoder's audio,
 * end and reset never overtake each other.
 *
 * Started by `pocketsphinx.ts` through `startModuleWorker`; not imported.
 */
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import koffi from 'koffi';
import { CMN_VECTOR_LENGTH, bindCmn } from './pocketsphinx-cmn.js';
import type { CmnAccess } from './pocketsphinx-cmn.js';

/** What the worker is started with. */
export interface PocketsphinxWorkerData {
  /** `dlopen` name or path of libpocketsphinx (it pulls in libsphinxbase). */
  libraryPath: string;
  /** Decoder arguments, as `pocketsphinx_continuous` takes them (`-hmm dir -lm file …`). */
  args: string[];
  /** Files and directories the arguments name, checked before loading for a clear error. */
  requiredPaths: string[];
  /** One Int32: samples decoded so far (the pool reads its backlog from it). */
  progress?: SharedArrayBuffer;
  /** One Int32, set to 1 when the pool closes: the work still queued is dropped. */
  stop?: SharedArrayBuffer;
  /**
   * Ask the decoder for its best hypothesis so far (`ps_get_hyp`) after each
   * this many ms of an utterance's audio, and report it when it changed
   * (`partial`). 0 or absent: never (text only at the utterance's end).
   */
  partialEveryMs?: number;
  /**
   * The cepstral mean a session's first utterance starts from (13 values).
   * Absent: the decoder's mean as the speakers before left it (as without
   * per-session CMN). Only used with per-session CMN.
   */
  cmnDefault?: number[];
  /** Keep live CMN per session (`cmn` requests, `cmn` in `text` replies). @defaultValue false */
  cmnPerSession?: boolean;
}

/** Requests to the worker. `decoder` ids are chosen by the pool. */
export type PocketsphinxRequest =
  | { op: 'create'; decoder: number }
  /** Audio of the decoder's current utterance; the first chunk after an end starts a new one. */
  | { op: 'audio'; decoder: number; pcm: Int16Array }
  /** Ends the utterance and answers with its text. */
  | { op: 'end'; decoder: number; seq: number }
  /** Drops the current utterance, if any. */
  | { op: 'reset'; decoder: number }
  /** Starts the decoder's next utterance from this cepstral mean (null: the default one). */
  | { op: 'cmn'; decoder: number; mean: Float32Array | null }
  | { op: 'free'; decoder: number }
  /** Frees every decoder and ends the thread (the pool closes). */
  | { op: 'close' };

/** Replies and reports from the worker. */
export type PocketsphinxReply =
  | { op: 'ready'; initMs: number }
  /** The library cannot be used at all: the worker is useless and says why. */
  | { op: 'fatal'; message: string }
  | {
      op: 'created';
      decoder: number;
      loadMs: number;
      /** Why per-session CMN is off for this decoder (asked for, but the library did not pass the checks). */
      cmnError?: string;
    }
  /** The best hypothesis of the utterance so far (it may still change), when partials are on. */
  | { op: 'partial'; decoder: number; text: string }
  | { op: 'create-failed'; decoder: number; message: string }
  | {
      op: 'text';
      decoder: number;
      seq: number;
      text: string;
      /** Audio in the utterance. */
      audioMs: number;
      /** Time spent in `ps_process_raw` (and `ps_get_hyp` for partials) for it (real-time factor = decodeMs / audioMs). */
      decodeMs: number;
      /** Time of `ps_end_utt` + `ps_get_hyp`: what is left to do after the last audio. */
      endMs: number;
      /** The decoder's cepstral mean after the utterance (per-session CMN only). */
      cmn?: Float32Array;
    }
  | { op: 'failed'; decoder: number; seq: number; message: string };

/** The engine's rate; the model is trained on 16 kHz audio. */
const SAMPLE_RATE_HZ = 16_000;

interface Decoder {
  ptr: unknown;
  inUtterance: boolean;
  samples: number;
  decodeMs: number;
  /** Samples since the last partial hypothesis, and that hypothesis. */
  sinceHyp: number;
  lastHyp: string;
  /** The decoder's `cmn_t` when per-session CMN works with it. */
  cmn: unknown;
}

/** The library's functions, bound once per worker. */
interface Binding {
  createDecoder(args: string[]): unknown;
  startUtt(ps: unknown): number;
  processRaw(ps: unknown, pcm: Int16Array): number;
  endUtt(ps: unknown): number;
  hypothesis(ps: unknown): string | null;
  free(ps: unknown): void;
  /** Live CMN access, or why it cannot work with this library. */
  cmn: CmnAccess | { error: string };
}

function bind(libraryPath: string): Binding {
  const lib = koffi.load(libraryPath);
  // Signatures of pocketsphinx 5prealpha (Debian's "0.8+5prealpha"): ps_start_utt takes
  // no utterance id and ps_get_hyp no id out-parameter, unlike the 0.8 release.
  const errSetLogfp = lib.func('void err_set_logfp(void *fp)');
  const psArgs = lib.func('void *ps_args()');
  const cmdLnParse = lib.func(
    'void *cmd_ln_parse_r(void *inout, void *defn, int argc, const char **argv, int strict)',
  );
  const cmdLnFree = lib.func('int cmd_ln_free_r(void *config)');
  const psInit = lib.func('void *ps_init(void *config)');
  const psStartUtt = lib.func('int ps_start_utt(void *ps)');
  const psProcessRaw = lib.func(
    'int ps_process_raw(void *ps, const int16_t *data, size_t n, int no_search, int full_utt)',
  );
  const psEndUtt = lib.func('int ps_end_utt(void *ps)');
  const psGetHyp = lib.func('const char *ps_get_hyp(void *ps, _Out_ int32_t *score)');
  const psFree = lib.func('int ps_free(void *ps)');

  // Silence the library's log for the whole process: a NULL stream disables it. This
  // is done instead of `-logfn /dev/null`, which makes every ps_init close and reopen
  // one process-wide FILE — a race when two workers create decoders at once.
  errSetLogfp(null);

  return {
    createDecoder(args) {
      const config = cmdLnParse(null, psArgs(), args.length, args, 1);
      if (!config) return null;
      const ps = psInit(config);
      // ps_init keeps its own reference to the configuration.
      cmdLnFree(config);
      return ps;
    },
    startUtt: (ps) => psStartUtt(ps) as number,
    processRaw: (ps, pcm) => psProcessRaw(ps, pcm, pcm.length, 0, 0) as number,
    endUtt: (ps) => psEndUtt(ps) as number,
    hypothesis: (ps) => psGetHyp(ps, [0]) as string | null,
    free: (ps) => void psFree(ps),
    cmn: bindCmn(lib),
  };
}

/** The decoders of one worker and what each request does to them, one request at a time. */
class DecoderHost {
  readonly #lib: Binding;
  readonly #data: PocketsphinxWorkerData;
  readonly #reply: (message: PocketsphinxReply) => void;
  readonly #decoders = new Map<number, Decoder>();
  readonly #cmnAccess: CmnAccess | { error: string } | undefined;
  /** The mean a session without one of its own starts from; absent: the decoder's current one. */
  readonly #cmnFixed: Float32Array | undefined;
  readonly #partialEvery: number;
  readonly #progress: Int32Array | undefined;

  constructor(
    lib: Binding,
    data: PocketsphinxWorkerData,
    reply: (message: PocketsphinxReply) => void,
  ) {
    this.#lib = lib;
    this.#data = data;
    this.#reply = reply;
    this.#cmnAccess = data.cmnPerSession ? lib.cmn : undefined;
    this.#cmnFixed = data.cmnDefault ? Float32Array.from(data.cmnDefault) : undefined;
    this.#partialEvery = Math.round(((data.partialEveryMs ?? 0) * SAMPLE_RATE_HZ) / 1000);
    this.#progress = data.progress && new Int32Array(data.progress);
  }

  handle(message: Exclude<PocketsphinxRequest, { op: 'close' }>): void {
    const d = this.#decoders.get(message.decoder);
    switch (message.op) {
      case 'create':
        return this.#create(message.decoder);
      case 'audio':
        return this.#audio(d, message.decoder, message.pcm);
      case 'end':
        return this.#end(d, message.decoder, message.seq);
      case 'cmn': {
        const access = this.#cmnAccess;
        if (!d?.cmn || d.inUtterance || !access || 'error' in access) return;
        // No mean of the session's own yet: the decoder's, warmed up by the speakers before.
        const mean = message.mean ?? this.#cmnFixed;
        if (mean?.length === CMN_VECTOR_LENGTH) access.set(d.cmn, mean);
        return;
      }
      case 'reset':
        if (d?.inUtterance) {
          d.inUtterance = false;
          this.#lib.endUtt(d.ptr);
        }
        return;
      case 'free':
        if (!d) return;
        this.#decoders.delete(message.decoder);
        this.#lib.free(d.ptr);
        return;
    }
  }

  /** Frees every decoder (the thread is about to end). */
  freeAll(): void {
    for (const d of this.#decoders.values()) this.#lib.free(d.ptr);
    this.#decoders.clear();
  }

  #create(decoder: number): void {
    const t0 = performance.now();
    const missing = this.#data.requiredPaths.filter((p) => !existsSync(p));
    const ptr = missing.length === 0 ? this.#lib.createDecoder(this.#data.args) : null;
    if (!ptr) {
      this.#reply({
        op: 'create-failed',
        decoder,
        message:
          missing.length > 0
            ? `model files are missing: ${missing.join(', ')}`
            : 'ps_init failed: the model files are unreadable or do not match each other',
      });
      return;
    }
    let cmn: unknown;
    let cmnError: string | undefined;
    const access = this.#cmnAccess;
    if (access) {
      // Checked on every decoder, right after ps_init, before anything touches its mean.
      const checked = 'error' in access ? access : access.check(ptr);
      if ('cmn' in checked) cmn = checked.cmn;
      else cmnError = checked.error;
    }
    this.#decoders.set(decoder, {
      ptr,
      inUtterance: false,
      samples: 0,
      decodeMs: 0,
      sinceHyp: 0,
      lastHyp: '',
      cmn,
    });
    this.#reply({
      op: 'created',
      decoder,
      loadMs: performance.now() - t0,
      ...(cmnError ? { cmnError } : {}),
    });
  }

  #audio(d: Decoder | undefined, decoder: number, pcm: Int16Array): void {
    if (!d) {
      // Counted even when dropped: the pool's backlog is audio not yet handled.
      if (this.#progress) Atomics.add(this.#progress, 0, pcm.length);
      return;
    }
    const t0 = performance.now();
    if (!d.inUtterance) {
      this.#lib.startUtt(d.ptr);
      d.inUtterance = true;
      d.samples = 0;
      d.decodeMs = 0;
      d.sinceHyp = 0;
      d.lastHyp = '';
    }
    this.#lib.processRaw(d.ptr, pcm);
    d.samples += pcm.length;
    d.sinceHyp += pcm.length;
    if (this.#partialEvery > 0 && d.sinceHyp >= this.#partialEvery) {
      d.sinceHyp = 0;
      const text = (this.#lib.hypothesis(d.ptr) ?? '').trim();
      if (text !== d.lastHyp) {
        d.lastHyp = text;
        this.#reply({ op: 'partial', decoder, text });
      }
    }
    d.decodeMs += performance.now() - t0;
    if (this.#progress) Atomics.add(this.#progress, 0, pcm.length);
  }

  #end(d: Decoder | undefined, decoder: number, seq: number): void {
    if (!d) {
      this.#reply({ op: 'failed', decoder, seq, message: 'no such decoder' });
      return;
    }
    const t0 = performance.now();
    try {
      const text = this.#endUtterance(d);
      const access = this.#cmnAccess;
      const cmn = d.cmn && access && !('error' in access) ? access.get(d.cmn) : undefined;
      this.#reply({
        op: 'text',
        decoder,
        seq,
        text,
        audioMs: (d.samples / SAMPLE_RATE_HZ) * 1000,
        decodeMs: d.decodeMs,
        endMs: performance.now() - t0,
        ...(cmn ? { cmn } : {}),
      });
    } catch (err) {
      this.#reply({ op: 'failed', decoder, seq, message: (err as Error).message });
    }
    d.samples = 0;
    d.decodeMs = 0;
  }

  #endUtterance(d: Decoder): string {
    if (!d.inUtterance) return '';
    d.inUtterance = false;
    if (this.#lib.endUtt(d.ptr) < 0) throw new Error('ps_end_utt failed');
    return (this.#lib.hypothesis(d.ptr) ?? '').trim();
  }
}

function run(): void {
  const port = parentPort;
  if (!port) throw new Error('pocketsphinx-worker.ts must run in a worker thread');
  const data = workerData as PocketsphinxWorkerData;
  const reply = (message: PocketsphinxReply): void => port.postMessage(message);

  const started = performance.now();
  let lib: Binding;
  try {
    lib = bind(data.libraryPath);
  } catch (err) {
    reply({
      op: 'fatal',
      message: `cannot load ${data.libraryPath}: ${(err as Error).message}`,
    });
    return;
  }
  reply({ op: 'ready', initMs: performance.now() - started });
  const host = new DecoderHost(lib, data, reply);
  const stop = data.stop && new Int32Array(data.stop);
  port.on('message', (message: PocketsphinxRequest) => {
    if (message.op === 'close') {
      host.freeAll();
      // Nothing else keeps the thread: it ends, between two calls into the library.
      port.close();
    } else if (!stop || Atomics.load(stop, 0) === 0) host.handle(message);
  });
}

run();
