/**
 * Bounded waits: every wait in a test names what it waited for when it fails.
 *
 * A bound turns a hang into a readable failure; it never measures speed. So
 * every bound here is sized for a machine ten times slower than an idle one
 * (several test runs side by side on two cores), and a passing test never
 * races against it. `TEST_TIME_SCALE` (a number, default 1) stretches every
 * bound at once — waits and the vitest test and hook timeouts — for a machine
 * slower still.
 */

/** The factor every bound in the suite is multiplied by: `TEST_TIME_SCALE`, default 1. */
export const TIME_SCALE = timeScale(process.env.TEST_TIME_SCALE);

/** How long a bounded wait takes by default before the test fails: 2 min. */
export const DEFAULT_WAIT_MS = 120_000 * TIME_SCALE;

/** The vitest test and hook timeout: 5 min, for suites that spawn processes or load speech engines. */
export const TEST_TIMEOUT_MS = 300_000 * TIME_SCALE;

/**
 * A bound for a wait that should take `ms` on an idle machine: `ms` scaled,
 * and never shorter than {@link DEFAULT_WAIT_MS}.
 */
export function bound(ms = 0): number {
  return Math.max(ms * TIME_SCALE, DEFAULT_WAIT_MS);
}

/**
 * Resolves like `promise`, or rejects after `bound(ms)` saying what never
 * happened. `ms` can lengthen the default bound, never shorten it: a test
 * that must see something *not* happen waits for an event that proves it.
 *
 * @example
 * const { code } = await within(client.closed, 'the close of the third client');
 */
export function within<T>(promise: Promise<T>, what: string, ms = DEFAULT_WAIT_MS): Promise<T> {
  const limit = bound(ms);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${limit} ms`)), limit);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function timeScale(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return 1;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) {
    throw new Error(`TEST_TIME_SCALE must be a positive number, got ${JSON.stringify(raw)}`);
  }
  return n;
}
