/**
 * The primary's watch for stuck workers judges their silence by its own
 * clock: a primary that itself stood still (SIGSTOP, a paused VM) does not
 * kill the workers whose reports wait unread in its channels.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { killStuckWorkers } from '../../src/server/cluster.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';

describe('the watch for stuck workers', () => {
  afterEach(() => vi.useRealTimers());

  function watch() {
    vi.useFakeTimers({ toFake: ['setInterval'] });
    let now = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    const killed: string[] = [];
    let silentMs = 0;
    const worker = {
      id: 1,
      process: { pid: 4242, kill: (signal: string) => void killed.push(signal) },
      isDead: () => false,
    };
    const router = {
      rooms: () => [{ worker, room: {}, silentMs }],
      remove: () => undefined,
    };
    const log = createMemoryLogger();
    killStuckWorkers(router as never, log as never, () => false);
    /** The next tick, `ms` after the last, with the worker silent for `silent` ms by then. */
    const tick = (ms: number, silent: number) => {
      now += ms;
      silentMs = silent;
      vi.advanceTimersToNextTimer();
    };
    return { tick, killed, log };
  }

  it('does not kill a worker for the time the primary itself stood still', () => {
    const { tick, killed } = watch();
    tick(1_000, 200);
    // Stopped 40 s: the first tick after sees the worker 40 s silent, its reports still unread.
    tick(40_000, 40_000);
    expect(killed).toEqual([]);
    // They are read then: the worker answers, and stays.
    tick(1_000, 300);
    expect(killed).toEqual([]);
  });

  it('kills a worker silent for 30 s while the primary ran', () => {
    const { tick, killed, log } = watch();
    tick(1_000, 200);
    tick(40_000, 40_000);
    // Still silent a tick later, with the primary running: stuck, killed.
    tick(1_000, 41_000);
    expect(killed).toEqual(['SIGKILL']);
    expect(log.entries.map((e) => e.msg)).toContain('worker unresponsive; killing it');
  });
});
