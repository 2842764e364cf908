/** Messages between the load test and its child processes (see children.ts). */
import { PerformanceObserver, constants, monitorEventLoopDelay } from 'node:perf_hooks';
import type { CpuSplit, GcSummary } from '../report/model.js';
import { mainThreadCpuS } from './process-cpu.js';
import { round } from './stats.js';

/**
 * Event-loop delay is sampled by a timer of this period; node's histogram
 * counts the period itself, so it is taken off every reading.
 */
export const LAG_RESOLUTION_MS = 10;

/** Event-loop delay in ms from a histogram reading in ns, the timer period taken off. */
export function lagMs(ns: number): number {
  return Math.max(0, ns / 1e6 - LAG_RESOLUTION_MS);
}

/** A child's resource use over an interval. */
export interface ChildStats {
  /** CPU time ÷ wall time, percent of one core. */
  cpuPercent: number;
  /** CPU seconds (user + system) over the interval. */
  cpuS: number;
  /** Of `cpuS`, the seconds in the kernel (system calls: socket reads and writes, `epoll`). */
  systemS: number;
  /** Of `cpuS`, the seconds on the main thread (the event loop), where Linux's `/proc` tells. */
  mainThreadS?: number;
  lagP99Ms: number;
  lagMaxMs: number;
  rssMiB: number;
  /** Garbage collection over the interval: every pause of the event loop it caused. */
  gc: GcStats;
}

/**
 * A child's CPU per delta, split two ways: user against system (JavaScript,
 * V8 and Node against the kernel's socket work), and what ran off the main
 * thread (V8's helper threads: concurrent marking, parallel scavenges).
 *
 * @example splitPerDelta(stats, 100_000) // { userUs: 70.1, systemUs: 18.2, offMainUs: 9.4 }
 */
export function splitPerDelta(stats: ChildStats, deltas: number): CpuSplit {
  const per = (s: number): number => round((s * 1e6) / deltas, 1);
  return {
    userUs: per(stats.cpuS - stats.systemS),
    systemUs: per(stats.systemS),
    ...(stats.mainThreadS === undefined
      ? {}
      : { offMainUs: per(Math.max(0, stats.cpuS - stats.mainThreadS)) }),
  };
}

/** Garbage-collection pauses of an interval: scavenges (young generation) and the rest. */
export interface GcStats {
  minorCount: number;
  minorMeanMs: number;
  minorMaxMs: number;
  /** Mark-sweep-compact collections (their incremental marking steps are not counted again). */
  majorCount: number;
  /** The longest pause of a major collection's work: its last pause or one of its steps. */
  majorMaxMs: number;
  /** All pauses together. */
  totalMs: number;
}

/** Counts GC pauses from now on; `take()` returns and restarts the interval's counts, `stop()` ends it. */
export function watchGc(): { take(): GcStats; stop(): void } {
  const fresh = (): GcStats & { minorMs: number } => ({
    minorCount: 0,
    minorMeanMs: 0,
    minorMaxMs: 0,
    majorCount: 0,
    majorMaxMs: 0,
    totalMs: 0,
    minorMs: 0,
  });
  let now = fresh();
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as { detail?: { kind?: number } }).detail?.kind;
      now.totalMs += entry.duration;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        now.minorCount++;
        now.minorMs += entry.duration;
        now.minorMaxMs = Math.max(now.minorMaxMs, entry.duration);
      } else {
        // Node reports a major collection's incremental marking and weak
        // callbacks as entries of their own: one collection, several entries.
        if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) now.majorCount++;
        now.majorMaxMs = Math.max(now.majorMaxMs, entry.duration);
      }
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    take() {
      const { minorMs, ...stats } = now;
      stats.minorMeanMs = stats.minorCount > 0 ? minorMs / stats.minorCount : 0;
      now = fresh();
      return stats;
    },
    stop: () => observer.disconnect(),
  };
}

/** A child's GC over `seconds`, as the reports give it. */
export function summarizeGc(gc: GcStats, seconds: number): GcSummary {
  return {
    minorPerS: round(gc.minorCount / seconds, 1),
    minorMeanMs: round(gc.minorMeanMs, 2),
    minorMaxMs: round(gc.minorMaxMs, 2),
    majorCount: gc.majorCount,
    majorMaxMs: round(gc.majorMaxMs, 2),
    pausePercent: round((gc.totalMs / (seconds * 1000)) * 100, 2),
  };
}

/** Parent → child. `init` is never sent: it stands for the child's argv. */
export type ToChild = { type: 'init' } | { type: 'stats' } | { type: 'stop' };

/** Child → parent. */
export type FromChild = { type: 'ready'; url: string } | { type: 'stats'; stats: ChildStats };

/**
 * Wires a child: reads its init argument, answers `stats`, runs `stop` on
 * `stop` (or when the parent goes away) and exits.
 *
 * @example await serveChild<{ env: Record<string, string> }>(async (init) => ({ url, stop }));
 */
export async function serveChild<T>(
  start: (init: T) => Promise<{ url: string; stop: () => Promise<unknown> }>,
): Promise<void> {
  const init = JSON.parse(process.argv[2] ?? '{}') as T;
  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  lag.enable();
  const gc = watchGc();
  const sample = () => ({
    at: performance.now(),
    cpu: process.cpuUsage(),
    main: mainThreadCpuS(process.pid),
  });
  let since = sample();
  const { url, stop } = await start(init);
  let stopping = false;
  const exit = (): void => {
    if (stopping) return;
    stopping = true;
    void stop().finally(() => process.exit(0));
  };
  process.on('message', (message: ToChild) => {
    if (message.type === 'stop') exit();
    if (message.type === 'stats') {
      const now = sample();
      const systemUs = now.cpu.system - since.cpu.system;
      const cpuUs = now.cpu.user - since.cpu.user + systemUs;
      const stats: ChildStats = {
        cpuPercent: (cpuUs / 1000 / (now.at - since.at)) * 100,
        cpuS: cpuUs / 1e6,
        systemS: systemUs / 1e6,
        ...(now.main === undefined || since.main === undefined
          ? {}
          : { mainThreadS: now.main - since.main }),
        lagP99Ms: lagMs(lag.percentile(99)),
        lagMaxMs: lagMs(lag.max),
        rssMiB: process.memoryUsage.rss() / 2 ** 20,
        gc: gc.take(),
      };
      since = now;
      lag.reset();
      process.send?.({ type: 'stats', stats } satisfies FromChild);
    }
  });
  // The parent died without asking: do not outlive it.
  process.on('disconnect', exit);
  process.send?.({ type: 'ready', url } satisfies FromChild);
}
