/**
 * A clock of silence: calls back each time a stretch passes with no news.
 * The LLM stream's deadlines and its slow notices are both this clock.
 */

/**
 * Calls `onQuiet` each time `ms` pass without {@link heard} (counted from
 * creation, then from the last news or call). One timer, looked at when it
 * fires and set again for the rest: news only notes the time, so a stream
 * of chunks costs no timer work per chunk.
 *
 * @example
 * const clock = new QuietClock(60_000, () => stream.destroy(new Error('silent')));
 * // per chunk:
 * clock.heard(performance.now());
 */
export class QuietClock {
  readonly #ms: number;
  readonly #onQuiet: () => void;
  #since = performance.now();
  #timer: NodeJS.Timeout | undefined;

  constructor(ms: number, onQuiet: () => void) {
    this.#ms = ms;
    this.#onQuiet = onQuiet;
    this.#timer = setTimeout(this.#check, ms);
  }

  /** News at `at` (`performance.now()`): the silence starts again. */
  heard(at: number): void {
    this.#since = at;
  }

  /** No more calls. */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #check = (): void => {
    const now = performance.now();
    const quiet = now - this.#since;
    if (quiet < this.#ms) {
      this.#timer = setTimeout(this.#check, this.#ms - quiet);
      return;
    }
    this.#since = now;
    this.#timer = setTimeout(this.#check, this.#ms);
    this.#onQuiet();
  };
}
