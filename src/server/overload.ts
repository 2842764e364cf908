/**
 * Overload: whether this process is too busy to take a new session. A
 * saturated server that keeps accepting makes every client wait (connections
 * pile up in the accept queue and time out); one that refuses at once with
 * 1013 and a retry hint lets clients and load balancers go elsewhere.
 *
 * The event loop is sampled every {@link SAMPLE_MS}: how late a timer
 * fires (its lag) and how much of the time the loop was busy rather than
 * waiting for I/O (its utilisation, `performance.eventLoopUtilization`). The
 * process is overloaded while, over the last ten samples (about a second),
 * the loop was busy more than `busy` of the time — it has no time left for
 * the deltas of the sessions it already holds — or the mean lag is above
 * `lagMs` (leaving out the window's longest sample: a single long pause,
 * such as a module compiling or the process stopped, is not overload), or
 * its CPU use is above `cpu` (a fraction of one core), when set, or its heap is near V8's limit (`heap`), or its
 * container's memory is near the container's limit (`container`: every
 * process in the container counts, and the kernel kills at that limit
 * whatever V8's is). Utilisation counts the main thread only, so work on
 * other threads (speech recognition) does not look like overload, and a
 * machine busy with other processes does not either.
 */
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { containerShare as ownContainer, heapShare } from '../session/memory.js';
import type { Gauge } from 'prom-client';

/** How often the event loop is sampled. */
const SAMPLE_MS = 100;
/** The mean lag and CPU use are taken over this many samples (about a second). */
const WINDOW_SAMPLES = 10;

/** Options of {@link createOverloadMonitor}. */
export interface OverloadOptions {
  /** Mean event-loop lag (ms) above which the process is overloaded; 0 = never. */
  lagMs: number;
  /** Event-loop utilisation (0–1) above which the process is overloaded; unset or 0 = never. */
  busy?: number;
  /** CPU use (fraction of one core) above which the process is overloaded; unset = never. */
  cpu?: number;
  /**
   * Share of V8's heap limit in use (0–1) above which the process is
   * overloaded: sessions it takes now would grow it to an out-of-memory
   * crash that ends every session. Unset or 0 = never.
   */
  heap?: number;
  /**
   * Share of the container's memory limit in use (0–1; cgroup v2 or v1,
   * usage less inactive file cache) above which the process is overloaded.
   * Without a limit the share is 0. Unset or 0 = never.
   */
  container?: number;
  /** Reads the container's share (tests); this process's container by default. */
  containerShare?: () => number;
  /** The retry hint given to refused clients (ms). */
  retryMs: number;
  /** Set to the current mean lag (seconds) at each sample. */
  lagGauge?: Gauge;
}

/** Why a session is refused, and when to try again. */
export interface OverloadVerdict {
  reason: 'event_loop_busy' | 'event_loop_lag' | 'cpu' | 'memory' | 'container_memory';
  /** The measured value: utilisation (0–1), lag in ms, CPU as a fraction of one core, or the heap's or container's share of its limit (0–1). */
  value: number;
  retryAfterMs: number;
}

/** A running monitor. */
export interface OverloadMonitor {
  /** Undefined when a new session may start; O(1). */
  check(): OverloadVerdict | undefined;
  /** The mean lag (ms), utilisation and CPU use over the last second, and the heap's and container's shares of their limits. */
  readonly state: { lagMs: number; busy: number; cpu: number; heap: number; container: number };
  stop(): void;
}

/**
 * Starts sampling.
 *
 * @example
 * const overload = createOverloadMonitor({ lagMs: 500, retryMs: 2000 });
 * const verdict = overload.check(); // then refuse with 1013 if set
 */
export function createOverloadMonitor(options: OverloadOptions): OverloadMonitor {
  const samples: Array<{ lag: number; cpuUs: number; elu: EventLoopUtilization }> = [];
  let expected = performance.now() + SAMPLE_MS;
  let lastCpu = process.cpuUsage();
  let lastElu = performance.eventLoopUtilization();
  let lagMs = 0;
  let busy = 0;
  let cpu = 0;
  let heap = 0;
  let container = 0;
  const readContainer = options.containerShare ?? ownContainer;
  let timer: NodeJS.Timeout;
  const tick = (): void => {
    const now = performance.now();
    const lag = Math.max(0, now - expected);
    const used = process.cpuUsage(lastCpu);
    lastCpu = process.cpuUsage();
    const elu = performance.eventLoopUtilization(lastElu);
    lastElu = performance.eventLoopUtilization();
    samples.push({ lag, cpuUs: used.user + used.system, elu });
    if (samples.length > WINDOW_SAMPLES) samples.shift();
    let lagSum = 0;
    let lagMax = 0;
    let cpuUs = 0;
    let active = 0;
    let idle = 0;
    for (const s of samples) {
      lagSum += s.lag;
      lagMax = Math.max(lagMax, s.lag);
      cpuUs += s.cpuUs;
      active += s.elu.active;
      idle += s.elu.idle;
    }
    // The window's longest sample left out: one pause (a module compiling, a
    // long collection, the process stopped) is not overload, however long;
    // lag at every turn is. A 3.5 s stop made the mean 350 ms and refused
    // the very connections that had waited through it.
    lagMs = samples.length > 1 ? (lagSum - lagMax) / (samples.length - 1) : lagSum;
    busy = active + idle > 0 ? active / (active + idle) : 0;
    // Each sample covers SAMPLE_MS plus its lag.
    cpu = cpuUs / 1000 / (samples.length * SAMPLE_MS + lagSum);
    if (options.heap) heap = heapShare();
    if (options.container) container = readContainer();
    options.lagGauge?.set(lagMs / 1000);
    expected = now + SAMPLE_MS;
    timer = setTimeout(tick, SAMPLE_MS).unref();
  };
  timer = setTimeout(tick, SAMPLE_MS).unref();
  return {
    check() {
      // A full window: the first second after start (modules compiling) is not overload.
      if (options.busy && samples.length === WINDOW_SAMPLES && busy > options.busy) {
        return {
          reason: 'event_loop_busy',
          value: Math.round(busy * 100) / 100,
          retryAfterMs: options.retryMs,
        };
      }
      if (options.lagMs > 0 && lagMs > options.lagMs) {
        return {
          reason: 'event_loop_lag',
          value: Math.round(lagMs),
          retryAfterMs: options.retryMs,
        };
      }
      if (options.cpu !== undefined && cpu > options.cpu) {
        return { reason: 'cpu', value: Math.round(cpu * 100) / 100, retryAfterMs: options.retryMs };
      }
      if (options.heap && heap > options.heap) {
        return {
          reason: 'memory',
          value: Math.round(heap * 100) / 100,
          retryAfterMs: options.retryMs,
        };
      }
      if (options.container && container > options.container) {
        return {
          reason: 'container_memory',
          value: Math.round(container * 100) / 100,
          retryAfterMs: options.retryMs,
        };
      }
      return undefined;
    },
    get state() {
      return { lagMs, busy, cpu, heap, container };
    },
    stop() {
      clearTimeout(timer);
    },
  };
}
