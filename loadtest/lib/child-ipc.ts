/** Messages between the load test and its child processes (see children.ts). */
import { monitorEventLoopDelay } from 'node:perf_hooks';

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
  lagP99Ms: number;
  lagMaxMs: number;
  rssMiB: number;
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
  let since = { at: performance.now(), cpu: process.cpuUsage() };
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
      const now = { at: performance.now(), cpu: process.cpuUsage() };
      const cpuUs = now.cpu.user - since.cpu.user + (now.cpu.system - since.cpu.system);
      const stats: ChildStats = {
        cpuPercent: (cpuUs / 1000 / (now.at - since.at)) * 100,
        cpuS: cpuUs / 1e6,
        lagP99Ms: lagMs(lag.percentile(99)),
        lagMaxMs: lagMs(lag.max),
        rssMiB: process.memoryUsage.rss() / 2 ** 20,
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
