/**
 * `/metrics` for an instance with workers: the primary asks each worker for
 * its metrics, adds its own (process metrics, its resume store's
 * evictions), and sums them (prom-client's
 * aggregation, by each metric's `aggregator`).
 *
 * Two things a plain sum of the live workers gets wrong, kept right here:
 * - **A counter never falls.** When a worker dies, the counters and
 *   histograms it last reported stay in the sums (its gauges go), so
 *   Prometheus sees no reset and `increase()` makes up nothing.
 * - **One stuck worker does not take `/metrics` down.** A worker that does
 *   not answer within {@link COLLECT_WAIT_MS} is counted as it last
 *   answered, and `troupe_metrics_stale_workers` says how many were.
 */
import type { Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { AggregatorRegistry, Gauge, Registry, type Counter } from 'prom-client';
import { processMetrics, storeEvictionsCounter } from '../metrics/index.js';
import { tellWorker } from './tell-worker.js';

/**
 * How long the primary waits for a worker's metrics before it uses the
 * ones it last gave; less when the scraper's own timeout asks (down to
 * {@link MIN_COLLECT_WAIT_MS}).
 */
export const COLLECT_WAIT_MS = 1_000;
const MIN_COLLECT_WAIT_MS = 50;

/** A registry's metrics as `getMetricsAsJSON()` gives them (and IPC carries them). */
type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** The metrics' messages from the primary to a worker. */
export type MetricsToWorker = { troupe: 'collect'; id: number };
/** The metrics' messages from a worker to the primary. */
export type MetricsToPrimary = { troupe: 'collected'; id: number; metrics: MetricsJson };

/**
 * Kinds of metric whose values only grow: kept from a worker that died.
 * (prom-client's JSON names the kind, though its types say an enum.)
 */
const KEPT_KINDS = new Set<unknown>(['counter', 'histogram']);

/** The primary's side of `/metrics`. */
export interface PrimaryMetrics {
  /** The instance's metrics, as Prometheus text, waiting at most `waitMs` for each worker. */
  text(waitMs?: number): Promise<string>;
  /** Takes a worker's answer; false for any other message. */
  take(worker: Worker, message: unknown): boolean;
  /** A worker that stopped: what it counted stays in the sums. */
  retire(worker: Worker): void;
  /** The records the primary's resume store let go for room, counted where it runs. */
  readonly storeEvictions: Counter;
}

/**
 * The primary's metrics: its own process metrics, the workers' and those
 * of workers that died.
 *
 * @example
 * const metrics = primaryMetrics({ workers: () => readyWorkers(), log });
 * worker.on('message', (m) => metrics.take(worker, m));
 */
export function primaryMetrics(options: {
  /** The workers that take connections (one still starting has nothing to count). */
  workers: () => Array<Worker | undefined>;
  log: Logger;
}): PrimaryMetrics {
  const own = new Registry();
  processMetrics(own);
  const stale = new Gauge({
    name: 'troupe_metrics_stale_workers',
    help: `Workers whose metrics in this scrape are from an earlier one: they did not answer within ${COLLECT_WAIT_MS} ms, or half the scraper's timeout if less (a stuck or busy event loop).`,
    registers: [own],
  });
  const storeEvictions = storeEvictionsCounter([own]);
  /** Each worker's latest metrics, until it stops. */
  const last = new Map<number, MetricsJson>();
  /** The counters and histograms of workers that stopped, summed. */
  let retired: MetricsJson = [];
  /** Each counter and histogram sample as last given, by {@link seriesKey}. */
  const given = new Map<string, number>();
  /**
   * Floating-point sums taken in another order can come out a hair lower
   * (a worker's count moved into `retired`): Prometheus would read that as
   * a reset. A growing sample is never given lower than it was.
   */
  const neverFall = (sums: MetricsJson): void => {
    for (const m of sums) {
      if (!KEPT_KINDS.has(m.type)) continue;
      for (const v of m.values) {
        const key = seriesKey(m.name, v);
        v.value = Math.max(v.value, given.get(key) ?? -Infinity);
        given.set(key, v.value);
      }
    }
  };
  let next = 0;
  const waiting = new Map<number, { worker: number; done: () => void }>();

  /** Asks a worker for its metrics: true when it answered in time. */
  function collect(worker: Worker, waitMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const id = ++next;
      const timer = setTimeout(() => {
        waiting.delete(id);
        // One that died meanwhile is retired, not late.
        if (!worker.isDead())
          options.log.warn(
            { worker: worker.id, pid: worker.process.pid, waitMs },
            last.has(worker.id)
              ? "worker's metrics not in time; its last ones are used"
              : "worker's metrics not in time; it has none yet",
          );
        resolve(false);
      }, waitMs);
      waiting.set(id, {
        worker: worker.id,
        done: () => {
          clearTimeout(timer);
          resolve(true);
        },
      });
      tellWorker(worker, { troupe: 'collect', id } satisfies MetricsToWorker);
    });
  }

  return {
    storeEvictions,
    async text(waitMs = COLLECT_WAIT_MS) {
      const wait = Math.min(COLLECT_WAIT_MS, Math.max(MIN_COLLECT_WAIT_MS, waitMs));
      const workers = options
        .workers()
        .filter((w): w is Worker => w !== undefined && w.isConnected());
      const answered = await Promise.all(workers.map((w) => collect(w, wait)));
      stale.set(workers.filter((w, i) => !answered[i] && !w.isDead()).length);
      const ownMetrics = await own.getMetricsAsJSON();
      // Put together after the last wait: a worker that stopped meanwhile is
      // in `retired` and no longer in `last`, never in both or neither.
      const sums = await AggregatorRegistry.aggregate([
        ownMetrics,
        ...last.values(),
        retired,
      ]).getMetricsAsJSON();
      neverFall(sums);
      return AggregatorRegistry.aggregate([sums]).metrics();
    },
    take(worker, message) {
      const m = message as MetricsToPrimary | undefined;
      if (m?.troupe !== 'collected') return false;
      // Late or not, it is newer than what the worker gave before (and one
      // still in the pipe when its worker died would count it twice).
      if (!worker.isDead()) last.set(worker.id, m.metrics);
      const w = waiting.get(m.id);
      if (w?.worker === worker.id) {
        waiting.delete(m.id);
        w.done();
      }
      return true;
    },
    retire(worker) {
      const metrics = last.get(worker.id);
      last.delete(worker.id);
      if (metrics) retired = sumSeries([retired, metrics.filter((m) => KEPT_KINDS.has(m.type))]);
    },
  };
}

/** A sample's name (a histogram's bucket, sum or count) and labels, as one key. */
function seriesKey(name: string, v: MetricsJson[number]['values'][number]): string {
  const labels = Object.entries(v.labels).sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify([(v as { metricName?: string }).metricName ?? name, labels]);
}

/**
 * Sums metrics series by series (name, sample name and labels), at once:
 * no scrape sees a sum half made.
 */
function sumSeries(sets: MetricsJson[]): MetricsJson {
  const byName = new Map<string, MetricsJson[number]>();
  const byKey = new Map<string, { value: number }>();
  for (const metrics of sets) {
    for (const m of metrics) {
      let into = byName.get(m.name);
      if (!into) byName.set(m.name, (into = { ...m, values: [] }));
      for (const v of m.values) {
        const key = seriesKey(m.name, v);
        const seen = byKey.get(key);
        if (seen) seen.value += v.value;
        else {
          const copy = { ...v };
          byKey.set(key, copy);
          into.values.push(copy);
        }
      }
    }
  }
  return [...byName.values()];
}

/**
 * The worker's side: answers the primary's requests with this registry's metrics.
 *
 * @example answerMetrics(metrics.registry);
 */
export function answerMetrics(registry: Registry): void {
  process.on('message', (m: MetricsToWorker) => {
    if (m?.troupe !== 'collect') return;
    void registry.getMetricsAsJSON().then(
      (metrics) => {
        if (process.connected) {
          process.send!({ troupe: 'collected', id: m.id, metrics } satisfies MetricsToPrimary);
        }
      },
      // Unanswered, the primary uses what this worker last gave, and logs it.
      () => undefined,
    );
  });
}
