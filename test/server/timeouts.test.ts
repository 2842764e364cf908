import { afterEach, describe, expect, it, vi } from 'vitest';
import { waitAtMost, withTimeout } from '../../src/timeouts.js';

describe('waiting with a bound', () => {
  afterEach(() => vi.useRealTimers());

  it('waitAtMost says whether the work came in time, and leaves no timer behind', async () => {
    vi.useFakeTimers();
    expect(await waitAtMost(Promise.resolve('done'), 1_000)).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    const never = new Promise(() => {});
    const waiting = waitAtMost(never, 1_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await waiting).toBe(false);
  });

  it('withTimeout rejects with its error when the work is late', async () => {
    vi.useFakeTimers();
    const late = withTimeout(new Promise(() => {}), 50, () => new Error('too slow'));
    const seen = late.catch((e: Error) => e.message);
    await vi.advanceTimersByTimeAsync(50);
    expect(await seen).toBe('too slow');
    expect(await withTimeout(Promise.resolve(7), 50, () => new Error('x'))).toBe(7);
  });
});
