/**
 * The load test's goals, judged on a run's phases: added latency per delta,
 * TTFT through Troupe against TTFT direct, tools against no tools, capacity.
 */
import type {
  CapacityResult,
  Comparison,
  Distribution,
  PhaseReport,
  TargetCheck,
} from './model.js';

/** p99 added latency per delta, ms. */
export const TARGET_ADDED_P99_MS = 1;
/** p95 added latency per delta, ms: the capacity limit too. */
export const TARGET_ADDED_P95_MS = 10;
/** TTFT through Troupe ÷ TTFT direct: up to 999 sessions, and from 1000. */
export const TARGET_TTFT_RATIO = 1.02;
export const TARGET_TTFT_RATIO_1000 = 1.05;
/** Tools against the no-tools baseline: p95 increase, percent. */
export const TARGET_TOOLS_INCREASE_PCT = 2;
/** Concurrent streaming sessions on the machine. */
export const TARGET_CAPACITY_SESSIONS = 1000;

type Stat = 'p50' | 'p95' | 'p99';
type Metric = keyof PhaseReport['metrics'];

/**
 * Side-by-side numbers for `--compare`: tools against plain, or Troupe
 * against the simulator direct.
 *
 * @example compare(phases, 'baseline')[0].increasePct
 */
export function compare(
  phases: readonly PhaseReport[],
  mode: 'baseline' | 'direct' | null,
): Comparison[] {
  if (mode === null || phases.length < 2) return [];
  const [subject, baseline] = phases as [PhaseReport, PhaseReport];
  // [subject's metric, stat, label, the baseline's metric when another]
  const rows: Array<[Metric, Stat, string, Metric?]> =
    mode === 'baseline'
      ? [
          ['ttftExModel', 'p95', "TTFT p95, the model's tool-round time excluded"],
          ['ttftExModel', 'p50', "TTFT p50, the model's tool-round time excluded"],
          [
            'ttftExModelToolTurns',
            'p95',
            'the same p95, turns with a tool round only',
            'ttftExModel',
          ],
          ['ttftExModelOtherTurns', 'p95', 'the same p95, turns without one only'],
          ['ttftTroupe', 'p95', "Troupe's part of the TTFT p95 (all the model's time excluded)"],
          ['ttftTroupe', 'p50', "Troupe's part of the TTFT p50"],
          ['ttft', 'p95', 'TTFT p95 (tool turns wait for their extra model round)'],
          ['addedPerDelta', 'p95', 'added latency per delta p95'],
        ]
      : [
          ['ttft', 'p50', 'TTFT p50'],
          ['ttft', 'p95', 'TTFT p95'],
        ];
  return rows.map(([metric, stat, label, baselineMetric]) => {
    const a = value(subject.metrics[metric], stat);
    const b = value(baseline.metrics[baselineMetric ?? metric], stat);
    const ratio = a === null || b === null || b === 0 ? null : a / b;
    return {
      name: `${subject.name} vs ${baseline.name}`,
      metric: label,
      subject: subject.name,
      baseline: baseline.name,
      subjectValue: a,
      baselineValue: b,
      ratio,
      increasePct: ratio === null ? null : (ratio - 1) * 100,
    };
  });
}

/**
 * Every target the run can speak to, PASS or FAIL.
 *
 * @example checkTargets(report.phases, report.comparisons, report.capacity)
 */
export function checkTargets(
  phases: readonly PhaseReport[],
  comparisons: readonly Comparison[],
  capacity: CapacityResult | undefined,
): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const check = (
    name: string,
    v: number | null,
    op: '≤' | '≥',
    target: number,
    unit: string,
  ): void => {
    const pass = v !== null && (op === '≤' ? v <= target : v >= target);
    checks.push({ name, value: v, op, target, unit, pass });
  };
  for (const phase of phases) {
    const at = `${phase.name}, ${phase.sessions.target} sessions`;
    if (phase.scenario !== 'direct' && phase.metrics.addedPerDelta !== undefined) {
      check(
        `added latency per delta p99 (${at})`,
        phase.metrics.addedPerDelta.p99,
        '≤',
        TARGET_ADDED_P99_MS,
        'ms',
      );
      check(
        `added latency per delta p95 (${at})`,
        phase.metrics.addedPerDelta.p95,
        '≤',
        TARGET_ADDED_P95_MS,
        'ms',
      );
    }
    // Every session that failed to open is among the errors (under its own, or not_opened):
    // counting them again would count a refusal twice. The floor keeps older reports honest.
    const errors = Math.max(
      Object.values(phase.errors).reduce((sum, n) => sum + n, 0),
      phase.sessions.failed,
    );
    check(`errors (${at})`, errors, '≤', 0, '');
  }
  for (const c of comparisons) {
    if (c.baseline === 'direct' && c.metric.startsWith('TTFT')) {
      const sessions = phases[0]?.sessions.target ?? 0;
      const target = sessions >= 1000 ? TARGET_TTFT_RATIO_1000 : TARGET_TTFT_RATIO;
      check(
        `${c.metric}: through Troupe ÷ direct (${sessions} sessions)`,
        c.ratio,
        '≤',
        target,
        '×',
      );
    }
    if (c.baseline === 'plain' && c.metric.startsWith('TTFT p95, the model')) {
      check(
        `tools vs plain: ${c.metric}, increase`,
        c.increasePct,
        '≤',
        TARGET_TOOLS_INCREASE_PCT,
        '%',
      );
    }
  }
  if (capacity !== undefined) {
    check(
      `capacity: sessions with p95 added ≤ ${capacity.limitP95AddedMs} ms and no errors`,
      capacity.sessions,
      '≥',
      TARGET_CAPACITY_SESSIONS,
      'sessions',
    );
  }
  return checks;
}

function value(d: Distribution | undefined, stat: Stat): number | null {
  return d === undefined ? null : d[stat];
}
