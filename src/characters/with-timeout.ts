/**
 * Waits for `work`, or rejects with `onTimeout()` after `ms`. The timer never
 * keeps the process alive and is cleared as soon as `work` settles.
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
