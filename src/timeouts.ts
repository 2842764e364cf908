/**
 * Waiting with a bound: for a piece of work, at most so long. The timer is
 * cleared as soon as the work settles.
 */

/**
 * Waits for `work`, or rejects with `onTimeout()` after `ms`. The timer never
 * keeps the process alive.
 *
 * @example await withTimeout(import(url), 10_000, () => new Error('import hung'));
 */
export async function withTimeout<T>(
  work: Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Waits for `work` (which must not reject) for at most `ms`: true when it
 * came in time, false when the time ran out first.
 *
 * @example if (!(await waitAtMost(session.idle(), 2_000))) log.warn('still busy');
 */
export async function waitAtMost(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([work.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}
