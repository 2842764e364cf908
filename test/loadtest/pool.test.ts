import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { sessionSignal } from '../../loadtest/lib/pool.js';

function listenerCount(signal: AbortSignal): number {
  return getEventListeners(signal, 'abort').length;
}

describe('sessionSignal', () => {
  it("aborts a session's own signal with the pool's, with the pool's reason", () => {
    const pool = new AbortController();
    const own = sessionSignal(pool.signal);
    expect(own.signal.aborted).toBe(false);
    pool.abort(new Error('stop'));
    expect(own.signal.aborted).toBe(true);
    expect((own.signal.reason as Error).message).toBe('stop');
  });

  it('starts aborted when the pool has already stopped', () => {
    const pool = new AbortController();
    pool.abort();
    expect(sessionSignal(pool.signal).signal.aborted).toBe(true);
  });

  it("puts one listener on the pool's signal, whatever the session waits on, and takes it off at release", async () => {
    const pool = new AbortController();
    const own = sessionSignal(pool.signal);
    expect(listenerCount(pool.signal)).toBe(1);
    for (let i = 0; i < 5; i++) await sleep(0, undefined, { signal: own.signal });
    expect(listenerCount(pool.signal)).toBe(1);
    own.release();
    expect(listenerCount(pool.signal)).toBe(0);
    pool.abort();
    expect(own.signal.aborted).toBe(false);
  });

  it("ends a wait on the session's signal when the pool stops", async () => {
    const pool = new AbortController();
    const own = sessionSignal(pool.signal);
    const waiting = sleep(60_000, undefined, { signal: own.signal });
    pool.abort();
    await expect(waiting).rejects.toThrow(/abort/i);
  });
});
