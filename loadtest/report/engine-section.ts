/**
 * The engine bench's JSON (loadtest/reports/engine-bench.json) as a section
 * of the load-test report, so both land in one place.
 */
import { z } from 'zod';
import type { EngineBenchSection } from './model.js';

const stats = <K extends string>(...keys: K[]) =>
  z.object(Object.fromEntries(keys.map((k) => [k, z.number()])) as Record<K, z.ZodNumber>);

/** The fields of the bench's JSON the report shows; anything else is ignored. */
const BENCH_JSON = z.object({
  generatedAt: z.string(),
  assembler: z.array(
    z.object({ shape: z.string(), chunksPerPass: z.number(), mChunksPerSec: z.number() }),
  ),
  overhead: z.object({
    targetP99Ms: z.number(),
    rows: z.array(
      z.object({
        label: z.string(),
        ms: stats('p50', 'p90', 'p99', 'max'),
        failures: z.number(),
      }),
    ),
  }),
  headToHead: z.object({
    targetRatio: z.number(),
    results: z.array(
      z.object({
        label: z.string(),
        cpuUs: stats('p50', 'mean', 'p90'),
        wallMs: stats('p50', 'mean', 'p90'),
        failures: z.number(),
      }),
    ),
    ratios: z.object({ vsBetter: z.number(), betterEngine: z.string() }),
  }),
});

/**
 * Picks the report's fields out of the bench's JSON; undefined when it does
 * not have the expected shape (an older bench), so a report never fails on it.
 *
 * @example engineBenchSection(JSON.parse(await readFile('loadtest/reports/engine-bench.json', 'utf8')))
 */
export function engineBenchSection(json: unknown): EngineBenchSection | undefined {
  const parsed = BENCH_JSON.safeParse(json);
  if (!parsed.success) return undefined;
  const { generatedAt, assembler, overhead, headToHead } = parsed.data;
  return {
    generatedAt,
    assembler,
    overhead: { targetP99Ms: overhead.targetP99Ms, rows: overhead.rows },
    headToHead: {
      results: headToHead.results,
      vsBetter: headToHead.ratios.vsBetter,
      betterEngine: headToHead.ratios.betterEngine,
      targetRatio: headToHead.targetRatio,
    },
  };
}
