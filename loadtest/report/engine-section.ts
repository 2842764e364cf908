/**
 * The engine bench's JSON (loadtest/reports/engine-bench.json) as a section
 * of the load-test report, so both land in one place.
 */
import type { EngineBenchSection } from './model.js';

interface BenchJson {
  generatedAt: string;
  assembler: EngineBenchSection['assembler'];
  overhead: { targetP99Ms: number; rows: EngineBenchSection['overhead']['rows'] };
  headToHead: {
    targetRatio: number;
    results: EngineBenchSection['headToHead']['results'];
    ratios: { vsBetter: number; betterEngine: string };
  };
}

/**
 * Picks the report's fields out of the bench's JSON; undefined when it does
 * not have the expected shape (an older bench), so a report never fails on it.
 *
 * @example engineBenchSection(JSON.parse(await readFile('loadtest/reports/engine-bench.json', 'utf8')))
 */
export function engineBenchSection(json: unknown): EngineBenchSection | undefined {
  const b = json as Partial<BenchJson> | null;
  if (
    b === null ||
    typeof b !== 'object' ||
    typeof b.generatedAt !== 'string' ||
    !Array.isArray(b.assembler) ||
    !Array.isArray(b.overhead?.rows) ||
    !Array.isArray(b.headToHead?.results) ||
    typeof b.headToHead.ratios?.vsBetter !== 'number'
  ) {
    return undefined;
  }
  return {
    generatedAt: b.generatedAt,
    assembler: b.assembler.map(({ shape, chunksPerPass, mChunksPerSec }) => ({
      shape,
      chunksPerPass,
      mChunksPerSec,
    })),
    overhead: {
      targetP99Ms: b.overhead.targetP99Ms,
      rows: b.overhead.rows.map(({ label, ms, failures }) => ({
        label,
        ms: { p50: ms.p50, p90: ms.p90, p99: ms.p99, max: ms.max },
        failures,
      })),
    },
    headToHead: {
      results: b.headToHead.results.map(({ label, cpuUs, wallMs, failures }) => ({
        label,
        cpuUs: { p50: cpuUs.p50, mean: cpuUs.mean, p90: cpuUs.p90 },
        wallMs: { p50: wallMs.p50, mean: wallMs.mean, p90: wallMs.p90 },
        failures,
      })),
      vsBetter: b.headToHead.ratios.vsBetter,
      betterEngine: b.headToHead.ratios.betterEngine,
      targetRatio: b.headToHead.targetRatio,
    },
  };
}
