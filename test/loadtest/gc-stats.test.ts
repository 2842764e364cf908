/**
 * The GC pauses a load-test child reports (loadtest/lib/child-ipc.ts): a
 * major collection counted once, though Node reports its incremental
 * marking as entries of their own.
 */
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { watchGc } from '../../loadtest/lib/child-ipc.js';

/** Keeps a window of objects alive until the old generation has been collected `times` times. */
async function churn(times: number, majors: () => number): Promise<void> {
  let keep: object[] = [];
  for (let i = 0; majors() < times; i++) {
    keep.push({ i, s: `x${i}` });
    if (keep.length > 200_000) keep = keep.slice(100_000);
    // Let the observers hear of each collection as it comes.
    if (i % 100_000 === 0) await new Promise((r) => setImmediate(r));
  }
}

describe('watchGc', () => {
  it('counts each major collection once, and its steps only in the pauses', async () => {
    const kinds = new Map<number, number>();
    const observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const kind = (e as { detail?: { kind?: number } }).detail?.kind ?? 0;
        kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    const gc = watchGc();
    try {
      await churn(2, () => kinds.get(constants.NODE_PERFORMANCE_GC_MAJOR) ?? 0);
      await new Promise((r) => setImmediate(r));
      const stats = gc.take();
      expect(stats.majorCount).toBe(kinds.get(constants.NODE_PERFORMANCE_GC_MAJOR));
      expect(stats.minorCount).toBe(kinds.get(constants.NODE_PERFORMANCE_GC_MINOR));
      expect(stats.majorCount).toBeGreaterThanOrEqual(2);
      expect(stats.majorMaxMs).toBeGreaterThan(0);
    } finally {
      gc.stop();
      observer.disconnect();
    }
  });
});
