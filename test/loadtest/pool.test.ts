import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { sessionSignal } from '../../loadtest/lib/pool.js';
import { thinkPause } from '../../loadtest/lib/session-client.js';

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

describe('thinkPause', () => {
  it('is the think time itself without jitter', () => {
    expect(thinkPause({ thinkMs: 1_000, thinkJitterMs: 0 })).toBe(1_000);
  });

  it('draws pauses spread over think ± jitter, never below 0', () => {
    const pauses = Array.from({ length: 2_000 }, () =>
      thinkPause({ thinkMs: 1_000, thinkJitterMs: 500 }),
    );
    expect(Math.min(...pauses)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...pauses)).toBeLessThanOrEqual(1_500);
    // Both halves of the range are drawn: sessions started together drift apart.
    expect(pauses.filter((p) => p < 750).length).toBeGreaterThan(300);
    expect(pauses.filter((p) => p > 1_250).length).toBeGreaterThan(300);
    expect(thinkPause({ thinkMs: 100, thinkJitterMs: 100 })).toBeGreaterThanOrEqual(0);
  });
});
