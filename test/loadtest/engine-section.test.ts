/**
 * The engine bench's JSON as a section of the load-test report: the fields
 * the report shows are picked out, and a file of another shape is skipped.
 */
import { describe, expect, it } from 'vitest';
import { engineBenchSection } from '../../loadtest/report/engine-section.js';
import type { EngineBenchSection } from '../../loadtest/report/model.js';

/** What loadtest/engine-bench.ts writes (its `report` object), extra fields and all. */
function benchJson(): Record<string, unknown> {
  const percentiles = (p50: number, p90: number, p99: number, max: number) => ({
    n: 1000,
    p50,
    p90,
    p99,
    max,
    min: p50 / 2,
    mean: (p50 + p90) / 2,
  });
  const engine = (key: string, label: string, cpuMean: number, failures = 0) => ({
    key,
    label,
    cpuUs: {
      n: 600,
      p50: cpuMean * 0.6,
      p90: cpuMean * 2,
      p99: cpuMean * 4,
      max: cpuMean * 9,
      min: 1,
      mean: cpuMean,
    },
    wallMs: { n: 600, p50: 1.5, p90: 6, p99: 12, max: 30, min: 0.8, mean: 2.5 },
    cpuUsBlockMeans: [cpuMean * 1.2, cpuMean],
    failures,
    firstProblem: failures > 0 ? 'turn failed' : null,
  });
  return {
    generatedAt: '2026-11-22T00:06:12.123Z',
    machine: {
      cpuModel: 'AMD EPYC',
      cpuCount: 2,
      availableParallelism: 2,
      node: 'v20.20.2',
      v8: '11.3.244.8-node.38',
      platform: 'linux 6.18.44',
      arch: 'x64',
      totalMemGiB: 23.5,
    },
    gc: 'none (run node with --expose-gc to force one)',
    durationS: 21,
    assembler: [
      {
        shape: 'openai: 200 text + 2 parallel calls',
        chunksPerPass: 224,
        passesPerSample: [13250, 13600],
        mChunksPerSec: 12.18,
        samplesMChunksPerSec: [11.85, 12.18],
      },
      {
        shape: 'vllm: same, name + usage on every chunk',
        chunksPerPass: 220,
        passesPerSample: [17700],
        mChunksPerSec: 14.6,
        samplesMChunksPerSec: [14.6],
      },
    ],
    overhead: {
      targetP99Ms: 2,
      turns: 1000,
      warmupTurns: 50,
      rows: [
        {
          label: '(b) child-process sim',
          formula: 'sim receivedAt(round 1) − rounds[0].lastChunkAt − handlerMs',
          ms: percentiles(0.245, 1.438, 4.564, 9.007),
          failures: 0,
          firstProblem: null,
        },
        {
          label: "(a') in-process sim, runner side",
          formula: 'rounds[1].requestAt − rounds[0].lastChunkAt − handlerMs',
          ms: percentiles(0.043, 0.093, 1.814, 12.69),
          failures: 2,
          firstProblem: '3 rounds',
        },
      ],
    },
    headToHead: {
      turns: 600,
      warmupTurns: 400,
      blocks: 6,
      blockOrders: [['troupe', 'runTools', 'streamText']],
      targetRatio: 0.5,
      results: [
        engine('troupe', 'Troupe runTurn', 1764.8),
        engine('runTools', 'openai-node runTools', 3905.1),
        engine('streamText', 'AI SDK streamText', 4880.4, 1),
      ],
      ratios: {
        vsRunTools: 0.452,
        vsStreamText: 0.362,
        vsRunToolsP50: 0.39,
        vsStreamTextP50: 0.29,
        betterEngine: 'openai-node runTools',
        betterMeanUs: 3905.1,
        vsBetter: 0.452,
        verdict: 'FAILED',
      },
    },
  };
}

describe('engineBenchSection', () => {
  it("picks the report's fields out of the bench's JSON", () => {
    const section = engineBenchSection(benchJson());

    expect(section).toEqual({
      generatedAt: '2026-11-22T00:06:12.123Z',
      assembler: [
        { shape: 'openai: 200 text + 2 parallel calls', chunksPerPass: 224, mChunksPerSec: 12.18 },
        {
          shape: 'vllm: same, name + usage on every chunk',
          chunksPerPass: 220,
          mChunksPerSec: 14.6,
        },
      ],
      overhead: {
        targetP99Ms: 2,
        rows: [
          {
            label: '(b) child-process sim',
            ms: { p50: 0.245, p90: 1.438, p99: 4.564, max: 9.007 },
            failures: 0,
          },
          {
            label: "(a') in-process sim, runner side",
            ms: { p50: 0.043, p90: 0.093, p99: 1.814, max: 12.69 },
            failures: 2,
          },
        ],
      },
      headToHead: {
        results: [
          {
            label: 'Troupe runTurn',
            cpuUs: { p50: 1764.8 * 0.6, mean: 1764.8, p90: 1764.8 * 2 },
            wallMs: { p50: 1.5, mean: 2.5, p90: 6 },
            failures: 0,
          },
          {
            label: 'openai-node runTools',
            cpuUs: { p50: 3905.1 * 0.6, mean: 3905.1, p90: 3905.1 * 2 },
            wallMs: { p50: 1.5, mean: 2.5, p90: 6 },
            failures: 0,
          },
          {
            label: 'AI SDK streamText',
            cpuUs: { p50: 4880.4 * 0.6, mean: 4880.4, p90: 4880.4 * 2 },
            wallMs: { p50: 1.5, mean: 2.5, p90: 6 },
            failures: 1,
          },
        ],
        vsBetter: 0.452,
        betterEngine: 'openai-node runTools',
        targetRatio: 0.5,
      },
    } satisfies EngineBenchSection);
  });

  it('survives a round trip through JSON text, as read from the file', () => {
    const json = benchJson();
    expect(engineBenchSection(JSON.parse(JSON.stringify(json)))).toEqual(engineBenchSection(json));
  });

  it('returns a new object that shares nothing with the input', () => {
    const json = benchJson();
    const section = engineBenchSection(json)!;
    const rows = (json.overhead as { rows: Array<{ ms: { p50: number } }> }).rows;
    rows[0]!.ms.p50 = 99;
    expect(section.overhead.rows[0]!.ms.p50).toBe(0.245);
  });

  it('returns undefined for null, undefined and values that are not objects', () => {
    for (const value of [null, undefined, 42, 'engine-bench', true]) {
      expect(engineBenchSection(value)).toBeUndefined();
    }
  });

  it('returns undefined, not a crash, when a row or result misses a field', () => {
    const noMs = benchJson();
    delete (noMs.overhead as { rows: Array<Record<string, unknown>> }).rows[0]!.ms;
    expect(engineBenchSection(noMs)).toBeUndefined();
    const noCpu = benchJson();
    delete (noCpu.headToHead as { results: Array<Record<string, unknown>> }).results[0]!.cpuUs;
    expect(engineBenchSection(noCpu)).toBeUndefined();
    const noTarget = benchJson();
    delete (noTarget.headToHead as Record<string, unknown>).targetRatio;
    expect(engineBenchSection(noTarget)).toBeUndefined();
  });

  it('returns undefined for an empty object or array', () => {
    expect(engineBenchSection({})).toBeUndefined();
    expect(engineBenchSection([])).toBeUndefined();
  });

  it.each<[string, (json: Record<string, unknown>) => void]>([
    ['generatedAt', (j) => delete j.generatedAt],
    ['a string generatedAt', (j) => (j.generatedAt = 1_795_313_277_260)],
    ['assembler', (j) => delete j.assembler],
    ['overhead', (j) => delete j.overhead],
    ['overhead.rows', (j) => delete (j.overhead as Record<string, unknown>).rows],
    ['headToHead', (j) => delete j.headToHead],
    ['headToHead.results', (j) => delete (j.headToHead as Record<string, unknown>).results],
    ['headToHead.ratios', (j) => delete (j.headToHead as Record<string, unknown>).ratios],
    [
      'a numeric headToHead.ratios.vsBetter',
      (j) => {
        const ratios = (j.headToHead as { ratios: Record<string, unknown> }).ratios;
        ratios.vsBetter = '0.452';
      },
    ],
  ])('returns undefined for JSON without %s', (_what, spoil) => {
    const json = benchJson();
    spoil(json);
    expect(engineBenchSection(json)).toBeUndefined();
  });
});
