/** Bounded waits: every wait in a test names what it waited for when it fails. */

/** How long a bounded wait takes by default before the test fails. */
export const DEFAULT_WAIT_MS = 5_000;

/**
 * Resolves like `promise`, or rejects after `ms` saying what never happened.
 *
 * @example
 * const { code } = await within(client.closed, 'the close of the third client');
 */
export function within<T>(promise: Promise<T>, what: string, ms = DEFAULT_WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
