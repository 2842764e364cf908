/**
 * A pool of simulated users: starts them over a ramp, counts them, swaps
 * the recorder between measuring windows and stops them cleanly.
 */
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Recorder } from './recorder.js';
import type { ResumeLog } from './resume-log.js';
import type { ClientContext, SessionSettings, Utterance } from './session-client.js';

/**
 * Runs one simulated user until the pool stops; never throws. `signal` is
 * the session's own, aborted with the pool's ({@link sessionSignal}): its
 * per-turn waits listen on it.
 */
export type SessionRunner = (
  ctx: ClientContext,
  index: number,
  signal: AbortSignal,
) => Promise<void>;

/** Options of a {@link Pool}: how its sessions talk. */
export type PoolOptions = SessionSettings;

/** A pool of sessions; it is the context every session reads. */
export class Pool implements ClientContext {
  rec = new Recorder();
  stopping = false;
  declare readonly url: string;
  declare readonly character: string | null;
  declare readonly thinkMs: number;
  declare readonly thinkJitterMs: number;
  declare readonly turnTimeoutMs: number;
  declare readonly checkText: boolean;
  declare readonly speech: readonly Utterance[] | undefined;
  declare readonly silenceMs: number;
  declare readonly resume: ResumeLog | undefined;
  /** Sessions started, opened, open now, and the most open at once. */
  started = 0;
  reached = 0;
  /** Sessions an error ended before they opened (each counted under its error). */
  unopenedErrors = 0;
  open = 0;
  peak = 0;
  readonly #abort = new AbortController();
  readonly #running: Array<Promise<void>> = [];
  readonly #runner: SessionRunner;

  constructor(options: PoolOptions, runner: SessionRunner) {
    Object.assign(this, options);
    this.#runner = runner;
    // Every session waits on this signal: as many listeners as sessions is expected.
    setMaxListeners(0, this.#abort.signal);
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Turns in flight now. */
  active = 0;

  turnsInFlight(change: 1 | -1): void {
    this.active += change;
    this.rec.noteActive(this.active);
  }

  opened(): void {
    this.reached++;
    this.open++;
    if (this.open > this.peak) this.peak = this.open;
  }

  closed(): void {
    this.open--;
  }

  failedUnopened(): void {
    this.unopenedErrors++;
  }

  /** Sessions that never opened and have no error of their own (still connecting at the end). */
  get silentFailures(): number {
    return this.started - this.reached - this.unopenedErrors;
  }

  /** Starts `n` more sessions spread evenly over `rampMs`; resolves when the last has started. */
  async add(n: number, rampMs: number): Promise<void> {
    const begin = performance.now();
    for (let i = 0; i < n && !this.stopping; i++) {
      const due = begin + (n <= 1 ? 0 : (rampMs * i) / (n - 1));
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const own = sessionSignal(this.#abort.signal);
      this.#running.push(this.#runner(this, this.started++, own.signal).finally(own.release));
    }
  }

  /** Installs a fresh recorder and returns the one it replaces. */
  swap(): Recorder {
    const old = this.rec;
    this.rec = new Recorder(this.active);
    return old;
  }

  /**
   * Lets sessions finish the turn they are in, then closes them; after
   * `graceMs` the rest are cut off.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([Promise.all(this.#running), late]);
    clearTimeout(timer);
    this.#abort.abort();
    await Promise.all(this.#running);
  }
}

/**
 * A session's own signal, aborted when `shared` (the pool's) is. A session
 * listens on the pool's signal once, and its per-turn waits listen on this
 * one: an `EventTarget` walks all its listeners at every add and remove, so
 * per-turn listeners on the signal every session shares cost each turn as
 * much as there are sessions (~5 µs a turn at 1000). The pool makes one per
 * session and calls `release` when the session ends.
 *
 * @example
 * const own = sessionSignal(pool.signal);
 * runner(pool, index, own.signal).finally(own.release);
 */
export function sessionSignal(shared: AbortSignal): { signal: AbortSignal; release(): void } {
  const own = new AbortController();
  const abort = (): void => own.abort(shared.reason);
  if (shared.aborted) abort();
  else shared.addEventListener('abort', abort, { once: true });
  return { signal: own.signal, release: () => shared.removeEventListener('abort', abort) };
}
