/**
 * Load-test report fixtures: realistic `LoadtestReport`s built from seeded
 * random samples, so the report renderers get plausible shapes (long tails,
 * several phases, a capacity search, the engine bench) without running a load test.
 */
import type {
  Distribution,
  EngineBenchSection,
  LoadtestReport,
  PhaseReport,
} from '../../loadtest/report/model.js';
import { summarize } from '../../loadtest/lib/stats.js';
import { createRng } from '../../src/testing/simulator/index.js';

/** `count` log-normal samples around `medianMs`; `spread` is the log-space σ. */
export function logNormalSamples(
  seed: number,
  count: number,
  medianMs: number,
  spread: number,
): number[] {
  const random = createRng(seed);
  return Array.from({ length: count }, () => {
    // Box–Muller; 1 − u keeps log away from 0.
    const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    return medianMs * Math.exp(spread * z);
  });
}

/** No samples: every statistic null, histogram and CDF empty. */
export function emptyDistribution(): Distribution {
  return summarize([]);
}

/** A distribution as the load test reports it. */
export const distribution = (samples: number[]): Distribution => summarize(samples);

/** A phase with plausible numbers; `overrides` replace whole fields. */
export function samplePhase(
  name: string,
  seed: number,
  overrides: Partial<PhaseReport> = {},
): PhaseReport {
  return {
    name,
    scenario: 'text',
    character: 'echo',
    sessions: { target: 200, reached: 198, peak: 198, failed: 2 },
    durationS: 62.4,
    turns: { completed: 1_840, failed: 3 },
    activeTurns: { mean: 96.4, peak: 150 },
    deltasPerSec: 4_210.5,
    metrics: {
      ttft: distribution(logNormalSamples(seed, 1_800, 210, 0.35)),
      turnDuration: distribution(logNormalSamples(seed + 1, 1_800, 1_900, 0.25)),
      addedPerDelta: distribution(logNormalSamples(seed + 2, 4_000, 0.6, 0.9)),
    },
    errors: { timeout: 3, connect: 2 },
    clientLagMs: { p50: 10.2, p99: 14.8, max: 31.5 },
    server: { cpuPercent: 38.5, lagP99Ms: 12.1, lagMaxMs: 40.3, rssMiB: 182.4 },
    ...overrides,
  };
}

/** The engine bench's section, shaped like loadtest/reports/engine-bench.json. */
export function sampleEngineBench(): EngineBenchSection {
  return {
    generatedAt: '2026-11-22T00:06:12.123Z',
    assembler: [
      { shape: 'openai: 200 text + 2 parallel calls', chunksPerPass: 224, mChunksPerSec: 12.18 },
      { shape: 'vllm: same, name + usage on every chunk', chunksPerPass: 220, mChunksPerSec: 14.6 },
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
          failures: 0,
        },
      ],
    },
    headToHead: {
      results: [
        {
          label: 'Troupe runTurn',
          cpuUs: { p50: 898, mean: 1_764.8, p90: 4_070 },
          wallMs: { p50: 1.86, mean: 3.15, p90: 7.38 },
          failures: 0,
        },
        {
          label: 'openai-node runTools',
          cpuUs: { p50: 2_310, mean: 3_905.1, p90: 7_800 },
          wallMs: { p50: 3.9, mean: 5.7, p90: 11.2 },
          failures: 0,
        },
        {
          label: 'AI SDK streamText',
          cpuUs: { p50: 3_120, mean: 4_880.4, p90: 9_950 },
          wallMs: { p50: 4.8, mean: 6.9, p90: 13.4 },
          failures: 0,
        },
      ],
      vsBetter: 0.452,
      betterEngine: 'openai-node runTools',
      targetRatio: 0.5,
    },
  };
}

/** A full report: four phases (one with an empty metric), targets, comparisons, capacity and the engine bench. */
export function sampleReport(): LoadtestReport {
  const plain = samplePhase('plain', 1, { scenario: 'plain', errors: {} });
  const tools = samplePhase('tools', 11, {
    scenario: 'tools',
    character: 'weather',
    errors: { 'error:llm_error': 1, timeout: 4 },
  });
  tools.metrics.ttft = distribution(logNormalSamples(12, 1_800, 260, 0.4));
  tools.metrics.toolRoundOverhead = distribution(logNormalSamples(13, 1_500, 0.35, 0.8));
  tools.metrics.ttftExModel = distribution(logNormalSamples(14, 1_800, 215, 0.36));
  tools.metrics.ttftExModelToolTurns = distribution(logNormalSamples(15, 700, 218, 0.36));
  tools.metrics.ttftExModelOtherTurns = distribution(logNormalSamples(16, 1_100, 213, 0.36));
  tools.metrics.ttftTroupe = distribution(logNormalSamples(17, 1_800, 12, 0.5));
  const voice = samplePhase('voice', 21, {
    scenario: 'voice',
    character: 'narrator',
    sessions: { target: 50, reached: 50, peak: 50, failed: 0 },
    deltasPerSec: 620.2,
    clientLagMs: { p50: 22, p99: 71.4, max: 140.9 },
  });
  voice.metrics.firstAudio = distribution(logNormalSamples(22, 400, 480, 0.3));
  const direct = samplePhase('direct', 31, {
    scenario: 'direct',
    character: null,
    errors: {},
  });
  // The direct phase talks to the simulator itself: no server, no stamped deltas.
  delete direct.server;
  direct.metrics = {
    ttft: distribution(logNormalSamples(32, 1_800, 200, 0.3)),
    turnDuration: distribution(logNormalSamples(33, 1_800, 1_850, 0.22)),
    addedPerDelta: emptyDistribution(),
  };
  return {
    kind: 'troupe-loadtest',
    version: 1,
    generatedAt: '2026-11-22T03:14:15.926Z',
    command: 'npm run loadtest -- --sim --sessions 200 --duration 60 --find-capacity',
    machine: {
      cpuModel: 'AMD EPYC 7B13',
      cpus: 2,
      memGiB: 23.5,
      node: 'v20.20.2',
      platform: 'linux 6.18.44',
    },
    target: {
      url: 'ws://127.0.0.1:8787/v1/realtime',
      sim: { ttftMs: 200, tokensPerSec: 60, jitterMs: 20, profile: 'steady' },
    },
    phases: [plain, tools, voice, direct],
    comparisons: [
      {
        name: 'tools vs plain',
        metric: 'TTFT p95',
        subject: 'tools',
        baseline: 'plain',
        subjectValue: tools.metrics.ttft.p95,
        baselineValue: plain.metrics.ttft.p95,
        ratio: 1.214,
        increasePct: 21.4,
      },
      {
        name: 'plain vs direct',
        metric: 'TTFT p95',
        subject: 'plain',
        baseline: 'direct',
        subjectValue: null,
        baselineValue: direct.metrics.ttft.p95,
        ratio: null,
        increasePct: null,
      },
    ],
    targets: [
      {
        name: 'Added latency per delta p95',
        value: 1.92,
        target: 5,
        op: '≤',
        unit: 'ms',
        pass: true,
      },
      { name: 'Tool round overhead p99', value: 2.81, target: 2, op: '≤', unit: 'ms', pass: false },
      { name: 'Sessions opened', value: 99, target: 98, op: '≥', unit: '%', pass: true },
      {
        name: 'TTFT ex-model p95 over direct',
        value: null,
        target: 10,
        op: '≤',
        unit: '%',
        pass: false,
      },
    ],
    capacity: {
      sessions: 400,
      stoppedBecause: 'p95 added latency 63.2 ms exceeded the 50 ms limit at 500 sessions',
      limitP95AddedMs: 50,
      steps: [
        { sessions: 100, p95AddedMs: 1.4, errors: 0, pass: true },
        { sessions: 200, p95AddedMs: 2.9, errors: 0, pass: true },
        { sessions: 300, p95AddedMs: 8.7, errors: 1, pass: true },
        { sessions: 400, p95AddedMs: 31.5, errors: 2, pass: true },
        { sessions: 500, p95AddedMs: 63.2, errors: 9, pass: false },
      ],
    },
    engineBench: sampleEngineBench(),
  };
}
