/**
 * The chat responses a simulator is writing: each has an abort controller,
 * so that `close()` can stop them all and `whenIdle()` can wait for none.
 */
import type { RequestOutcome } from './types.js';

/** The set of responses being written, with waiters for the moment it empties. */
export class Inflight {
  #controllers = new Set<AbortController>();
  #idleWaiters: Array<() => void> = [];

  /** How many responses are being written. */
  get size(): number {
    return this.#controllers.size;
  }

  /** Tracks a new response; its signal aborts with the reason it ended early. */
  start(): AbortController {
    const controller = new AbortController();
    this.#controllers.add(controller);
    return controller;
  }

  /** Forgets a finished response; the last one wakes every {@link whenIdle} waiter. */
  end(controller: AbortController): void {
    this.#controllers.delete(controller);
    if (this.#controllers.size === 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  /** Resolves once no response is being written. */
  whenIdle(): Promise<void> {
    if (this.#controllers.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Aborts every response being written, with `reason` as its outcome. */
  abortAll(reason: RequestOutcome): void {
    for (const controller of this.#controllers) controller.abort(reason);
  }
}
