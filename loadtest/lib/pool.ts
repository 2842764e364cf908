/**
 * A pool of simulated users: starts them over a ramp, counts them, swaps
 * the recorder between measuring windows and stops them cleanly.
 */
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Recorder } from './recorder.js';
import type { ClientContext, Utterance } from './session-client.js';

/** Runs one simulated user until the pool stops; never throws. */
export type SessionRunner = (ctx: ClientContext, index: number) => Promise<void>;

/** Options of a {@link Pool}. */
export interface PoolOptions {
  /** Server WebSocket URL (or, for direct sessions, the LLM's base URL). */
  url: string;
  /** Character id; null: the server's default. */
  character: string | null;
  /** Pause between a reply and the user's next line. */
  thinkMs: number;
  /** Longest a turn may take before it counts as a `timeout`. */
  turnTimeoutMs: number;
  checkText: boolean;
  speech?: readonly Utterance[];
  silenceMs: number;
}

/** A pool of sessions; it is the context every session reads. */
export class Pool implements ClientContext {
  rec = new Recorder();
  stopping = false;
  readonly url: string;
  readonly character: string | null;
  readonly thinkMs: number;
  readonly turnTimeoutMs: number;
  readonly checkText: boolean;
  readonly speech: readonly Utterance[] | undefined;
  readonly silenceMs: number;
  /** Sessions started, opened, open now, and the most open at once. */
  started = 0;
  reached = 0;
  open = 0;
  peak = 0;
  readonly #abort = new AbortController();
  readonly #running: Array<Promise<void>> = [];
  readonly #runner: SessionRunner;

  constructor(options: PoolOptions, runner: SessionRunner) {
    this.url = options.url;
    this.character = options.character;
    this.thinkMs = options.thinkMs;
    this.turnTimeoutMs = options.turnTimeoutMs;
    this.checkText = options.checkText;
    this.speech = options.speech;
    this.silenceMs = options.silenceMs;
    this.#runner = runner;
    // Every session waits on this signal: as many listeners as sessions is expected.
    setMaxListeners(0, this.#abort.signal);
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  opened(): void {
    this.reached++;
    this.open++;
    if (this.open > this.peak) this.peak = this.open;
  }

  closed(): void {
    this.open--;
  }

  /** Starts `n` more sessions spread evenly over `rampMs`; resolves when the last has started. */
  async add(n: number, rampMs: number): Promise<void> {
    const begin = performance.now();
    for (let i = 0; i < n && !this.stopping; i++) {
      const due = begin + (n <= 1 ? 0 : (rampMs * i) / (n - 1));
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      this.#running.push(this.#runner(this, this.started++));
    }
  }

  /** Installs a fresh recorder and returns the one it replaces. */
  swap(): Recorder {
    const old = this.rec;
    this.rec = new Recorder(old.active);
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
