/**
 * Background calls across a reconnection in the same process: a session that
 * closes (its client dropped) parks the calls it is running here instead of
 * stopping them; when the conversation is resumed in this process, the
 * restored session takes them over — still running, or with the outcomes
 * they reached meanwhile. What nobody takes is dropped after `keepMs` (each
 * outcome was already counted and logged when it happened).
 */
import type { Logger } from 'pino';
import type { BackgroundCalls, BackgroundDone } from '../tools/background.js';

/** Options of {@link BackgroundHandover}. */
export interface BackgroundHandoverOptions {
  /** How long outcomes wait for a resume after the last parked call ended (the resume TTL). */
  keepMs: number;
  log: Logger;
}

/** What a resumed session takes over: calls still running, and outcomes reached meanwhile. */
export interface ParkedCalls {
  calls: BackgroundCalls;
  ended: BackgroundDone[];
}

interface Parked extends ParkedCalls {
  timer: NodeJS.Timeout | undefined;
}

/** The parked background calls of one server's closed sessions, by session id. */
export class BackgroundHandover {
  readonly #o: BackgroundHandoverOptions;
  readonly #parked = new Map<string, Parked>();

  constructor(options: BackgroundHandoverOptions) {
    this.#o = options;
  }

  /** Sessions with parked calls or outcomes. */
  get size(): number {
    return this.#parked.size;
  }

  /** A closing session's calls run on here, for a resume to take over. */
  park(sessionId: string, calls: BackgroundCalls): void {
    const entry: Parked = { calls, ended: [], timer: undefined };
    this.#parked.set(sessionId, entry);
    calls.park((done) => {
      entry.ended.push(done);
      if (calls.running === 0 && this.#parked.get(sessionId) === entry) this.#expire(sessionId);
    });
  }

  /** The parked calls of `sessionId` (once), or undefined. */
  claim(sessionId: string): ParkedCalls | undefined {
    const entry = this.#parked.get(sessionId);
    if (!entry) return undefined;
    this.#parked.delete(sessionId);
    clearTimeout(entry.timer);
    return { calls: entry.calls, ended: entry.ended };
  }

  /** The server stops: parked calls are stopped (each still reports its outcome) and dropped. */
  close(): void {
    for (const [id, entry] of this.#parked) {
      clearTimeout(entry.timer);
      this.#parked.delete(id);
      entry.calls.close();
    }
  }

  #expire(sessionId: string): void {
    const entry = this.#parked.get(sessionId)!;
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => {
      if (this.#parked.get(sessionId) !== entry) return;
      this.#parked.delete(sessionId);
      this.#o.log.info(
        { session: sessionId, outcomes: entry.ended.length },
        'parked background outcomes dropped',
      );
    }, this.#o.keepMs);
    entry.timer.unref();
  }
}
