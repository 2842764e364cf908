/**
 * Latency samples and their summaries: exact percentiles (nearest rank) from
 * every sample, plus a log-spaced histogram and a CDF for the report's charts.
 */
import type { Distribution } from '../report/model.js';

/** Bins of a summary's histogram. */
const HISTOGRAM_BINS = 40;
/** Points of a summary's CDF curve. */
const CDF_POINTS = 200;
/** Smallest histogram edge, ms: loopback deltas take tens of microseconds. */
const MIN_EDGE_MS = 0.001;

/** A growable list of samples (ms), cheap to push to on a hot path. */
export class Samples {
  #data = new Float64Array(1024);
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(value: number): void {
    if (!Number.isFinite(value)) return;
    if (this.#size === this.#data.length) {
      const bigger = new Float64Array(this.#data.length * 2);
      bigger.set(this.#data);
      this.#data = bigger;
    }
    this.#data[this.#size++] = value;
  }

  /** The samples from index `from` on (a copy). */
  slice(from = 0): Float64Array {
    return this.#data.slice(from, this.#size);
  }
}

/** Nearest-rank percentile of sorted values, p in [0, 1]. */
export function percentile(sorted: ArrayLike<number>, p: number): number | null {
  const n = sorted.length;
  if (n === 0) return null;
  return sorted[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]!;
}

/**
 * Summarises samples: percentiles, a log-spaced histogram and a CDF.
 *
 * @example summarize(samples.slice()).p95
 */
export function summarize(values: Float64Array | readonly number[]): Distribution {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  if (n === 0) {
    return {
      n: 0,
      min: null,
      mean: null,
      p50: null,
      p90: null,
      p95: null,
      p99: null,
      max: null,
      histogram: { edges: [], counts: [] },
      cdf: [],
    };
  }
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    n,
    min: sorted[0]!,
    mean: sum / n,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p95: percentile(sorted, 0.95),
    p99: percentile(sorted, 0.99),
    max: sorted[n - 1]!,
    histogram: histogram(sorted),
    cdf: cdf(sorted),
  };
}

/** Log-spaced bins from the smallest to the largest sample (latencies span decades). */
function histogram(sorted: Float64Array): { edges: number[]; counts: number[] } {
  const lo = Math.max(MIN_EDGE_MS, sorted[0]!);
  const hi = Math.max(lo * 1.01, sorted[sorted.length - 1]!);
  const ratio = Math.log(hi / lo);
  const edges = Array.from({ length: HISTOGRAM_BINS + 1 }, (_, i) =>
    i === HISTOGRAM_BINS ? hi : lo * Math.exp((ratio * i) / HISTOGRAM_BINS),
  );
  const counts = new Array<number>(HISTOGRAM_BINS).fill(0);
  for (const v of sorted) {
    const bin = v <= lo ? 0 : Math.floor((Math.log(v / lo) / ratio) * HISTOGRAM_BINS);
    counts[Math.min(HISTOGRAM_BINS - 1, Math.max(0, bin))]!++;
  }
  return { edges, counts };
}

/** The empirical CDF at evenly spaced ranks, with the tail (p99 → max) kept in detail. */
function cdf(sorted: Float64Array): Array<[number, number]> {
  const n = sorted.length;
  const points: Array<[number, number]> = [];
  const ranks = new Set<number>();
  for (let i = 1; i <= CDF_POINTS; i++) ranks.add(Math.ceil((i / CDF_POINTS) * n));
  // The tail is where latency stories are told: every sample above p99 (up to 100 of them).
  for (let r = Math.max(1, n - Math.min(100, Math.ceil(n * 0.01))); r <= n; r++) ranks.add(r);
  for (const r of [...ranks].sort((a, b) => a - b)) points.push([sorted[r - 1]!, r / n]);
  return points;
}

/** `value` rounded to `digits` decimals. */
export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
