/**
 * Latency samples and their summaries: nearest-rank percentiles, the
 * log-spaced histogram and the CDF with its detailed tail.
 */
import { describe, expect, it } from 'vitest';
import { Samples, percentile, summarize } from '../../loadtest/lib/stats.js';
import type { Distribution } from '../../loadtest/report/model.js';
import { logNormalSamples } from './fixtures.js';

/** 1, 2, …, n. */
const oneTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);

/** A shuffled copy, so summarize has to sort. */
function shuffled(values: readonly number[]): number[] {
  const out = [...values];
  for (let i = out.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Checks what every non-empty histogram and CDF must satisfy. */
function expectWellFormed(d: Distribution): void {
  const { edges, counts } = d.histogram;
  expect(edges.length).toBe(counts.length + 1);
  expect(counts.reduce((a, b) => a + b, 0)).toBe(d.n);
  for (let i = 1; i < edges.length; i++) expect(edges[i]!).toBeGreaterThan(edges[i - 1]!);
  expect(d.cdf.at(-1)).toEqual([d.max, 1]);
  for (let i = 1; i < d.cdf.length; i++) {
    expect(d.cdf[i]![0]).toBeGreaterThanOrEqual(d.cdf[i - 1]![0]);
    expect(d.cdf[i]![1]).toBeGreaterThanOrEqual(d.cdf[i - 1]![1]);
  }
}

describe('percentile', () => {
  it('takes the nearest rank of 1..100', () => {
    const sorted = oneTo(100);
    expect(percentile(sorted, 0.5)).toBe(50);
    expect(percentile(sorted, 0.9)).toBe(90);
    expect(percentile(sorted, 0.95)).toBe(95);
    expect(percentile(sorted, 0.99)).toBe(99);
    expect(percentile(sorted, 1)).toBe(100);
  });

  it('rounds the rank up between samples', () => {
    const sorted = [10, 20, 30, 40];
    expect(percentile(sorted, 0.5)).toBe(20);
    expect(percentile(sorted, 0.51)).toBe(30);
    expect(percentile(sorted, 0.99)).toBe(40);
  });

  it('clamps p = 0 to the smallest sample', () => {
    expect(percentile([3, 4, 5], 0)).toBe(3);
  });

  it('gives null for no samples', () => {
    expect(percentile([], 0.5)).toBeNull();
  });

  it('gives the only sample for every p', () => {
    for (const p of [0, 0.5, 0.99, 1]) expect(percentile([7], p)).toBe(7);
  });
});

describe('Samples', () => {
  it('grows past its initial capacity and keeps every sample in order', () => {
    const samples = new Samples();
    for (let i = 0; i < 5_000; i++) samples.push(i * 0.5);
    expect(samples.size).toBe(5_000);
    const all = samples.slice();
    expect(all).toBeInstanceOf(Float64Array);
    expect(all.length).toBe(5_000);
    expect(all[0]).toBe(0);
    expect(all[1_023]).toBe(511.5);
    expect(all[1_024]).toBe(512);
    expect(all[4_999]).toBe(2_499.5);
  });

  it('ignores NaN and infinities', () => {
    const samples = new Samples();
    for (const v of [1, Number.NaN, 2, Infinity, -Infinity, 3]) samples.push(v);
    expect(samples.size).toBe(3);
    expect([...samples.slice()]).toEqual([1, 2, 3]);
  });

  it('slices from an index to the end, as a copy', () => {
    const samples = new Samples();
    for (const v of [5, 6, 7, 8]) samples.push(v);
    expect([...samples.slice(2)]).toEqual([7, 8]);
    expect([...samples.slice(4)]).toEqual([]);
    const copy = samples.slice();
    copy[0] = 99;
    expect(samples.slice()[0]).toBe(5);
  });

  it('starts empty', () => {
    const samples = new Samples();
    expect(samples.size).toBe(0);
    expect(samples.slice().length).toBe(0);
  });
});

describe('summarize', () => {
  it('gives nulls and an empty histogram and CDF for no samples', () => {
    expect(summarize([])).toEqual({
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
    });
    expect(summarize(new Float64Array(0)).n).toBe(0);
  });

  it('gives nearest-rank percentiles of unsorted input', () => {
    const d = summarize(shuffled(oneTo(100)));
    expect(d).toMatchObject({ n: 100, min: 1, max: 100, p50: 50, p90: 90, p95: 95, p99: 99 });
    expect(d.mean).toBeCloseTo(50.5, 10);
  });

  it('takes a Float64Array as well as an array', () => {
    const values = shuffled(oneTo(100));
    expect(summarize(Float64Array.from(values))).toEqual(summarize(values));
  });

  it('bins every sample into log-spaced bins from the smallest to the largest', () => {
    const values = logNormalSamples(7, 3_000, 2, 1.2);
    const d = summarize(values);
    expectWellFormed(d);
    const { edges } = d.histogram;
    expect(edges[0]).toBe(d.min);
    expect(edges.at(-1)).toBe(d.max);
    // Log-spaced: every bin spans the same ratio.
    const ratio = edges[1]! / edges[0]!;
    for (let i = 1; i < edges.length; i++) {
      expect(edges[i]! / edges[i - 1]!).toBeCloseTo(ratio, 9);
    }
  });

  it('counts each sample in the bin whose edges hold it', () => {
    const values = [1, 2, 4, 8, 16, 32, 64, 100];
    const { edges, counts } = summarize(values).histogram;
    for (const v of values) {
      const bin = edges.findIndex((e, i) => i < counts.length && v >= e && v < edges[i + 1]!);
      // The largest sample sits on the last upper edge, in the last bin.
      const expected = bin === -1 ? counts.length - 1 : bin;
      expect(counts[expected]).toBeGreaterThan(0);
    }
    expect(counts.reduce((a, b) => a + b, 0)).toBe(values.length);
  });

  it('handles samples that are all equal', () => {
    const d = summarize(Array.from({ length: 50 }, () => 4.2));
    expect(d).toMatchObject({ n: 50, min: 4.2, max: 4.2, p50: 4.2, p99: 4.2 });
    expect(d.mean).toBeCloseTo(4.2, 10);
    expectWellFormed(d);
    expect(d.cdf.every(([v]) => v === 4.2)).toBe(true);
    expect(d.cdf.map(([, f]) => f)).toEqual(oneTo(50).map((r) => r / 50));
  });

  it('handles samples below a microsecond, zero included', () => {
    const d = summarize([0, 0, 0.0001, 0.0005]);
    expectWellFormed(d);
    expect(d.histogram.edges[0]).toBeGreaterThan(0);
    expect(summarize([0]).histogram.counts.reduce((a, b) => a + b, 0)).toBe(1);
  });

  it('summarizes a single sample', () => {
    const d = summarize([12.5]);
    expect(d).toMatchObject({ n: 1, min: 12.5, mean: 12.5, p50: 12.5, p99: 12.5, max: 12.5 });
    expectWellFormed(d);
    expect(d.cdf).toEqual([[12.5, 1]]);
  });

  it('draws a CDF that rises to [max, 1] and never falls', () => {
    const d = summarize(logNormalSamples(3, 2_500, 200, 0.4));
    expectWellFormed(d);
    expect(d.cdf[0]![1]).toBeGreaterThan(0);
    expect(d.cdf[0]![1]).toBeLessThanOrEqual(0.01);
    // Every point is a sample and its rank's fraction.
    const sorted = [...logNormalSamples(3, 2_500, 200, 0.4)].sort((a, b) => a - b);
    for (const [value, fraction] of d.cdf) {
      expect(sorted[Math.round(fraction * sorted.length) - 1]).toBe(value);
    }
  });

  it('keeps every sample above p99 in the CDF', () => {
    const values = logNormalSamples(5, 5_000, 100, 0.8);
    const d = summarize(values);
    const tail = values.filter((v) => v > d.p99!);
    expect(tail.length).toBeGreaterThan(10);
    const cdfValues = new Set(d.cdf.map(([v]) => v));
    for (const v of tail) expect(cdfValues.has(v)).toBe(true);
  });
});
