/**
 * The load test's goals: comparisons between phases (tools against plain,
 * Troupe against the simulator direct) and the PASS/FAIL target checks.
 */
import { describe, expect, it } from 'vitest';
import type { Comparison, Distribution, PhaseReport } from '../../loadtest/report/model.js';
import {
  TARGET_ADDED_P95_MS,
  TARGET_ADDED_P99_MS,
  TARGET_CAPACITY_SESSIONS,
  TARGET_TOOLS_INCREASE_PCT,
  TARGET_TTFT_RATIO,
  TARGET_TTFT_RATIO_1000,
  checkTargets,
  compare,
} from '../../loadtest/report/targets.js';
import { distribution, emptyDistribution, samplePhase } from './fixtures.js';

/** A distribution whose percentiles are the given ones (other fields as for one sample). */
function dist(stats: Partial<Pick<Distribution, 'p50' | 'p95' | 'p99'>>): Distribution {
  return { ...distribution([1]), ...stats };
}

/** A phase without errors or failed sessions. */
function cleanPhase(name: string, overrides: Partial<PhaseReport> = {}): PhaseReport {
  const base = samplePhase(name, 1, { errors: {} });
  return {
    ...base,
    sessions: { ...base.sessions, failed: 0 },
    ...overrides,
  };
}

/** Comparisons for checkTargets, with only the fields it reads mattering. */
function comparison(
  overrides: Partial<Comparison> & Pick<Comparison, 'metric' | 'baseline'>,
): Comparison {
  return {
    name: 'x vs y',
    subject: 'x',
    subjectValue: null,
    baselineValue: null,
    ratio: null,
    increasePct: null,
    ...overrides,
  };
}

describe('compare', () => {
  it('compares nothing without a mode or with fewer than two phases', () => {
    const phases = [samplePhase('tools', 1), samplePhase('plain', 2)];
    expect(compare(phases, null)).toEqual([]);
    expect(compare(phases.slice(0, 1), 'baseline')).toEqual([]);
    expect(compare([], 'direct')).toEqual([]);
  });

  it('compares tools with the plain baseline, overall and split by tool round', () => {
    const tools = samplePhase('tools', 1, { scenario: 'tools' });
    tools.metrics.ttftExModel = dist({ p50: 210, p95: 306 });
    tools.metrics.ttftExModelToolTurns = dist({ p95: 312 });
    tools.metrics.ttftExModelOtherTurns = dist({ p95: 303 });
    tools.metrics.ttftTroupe = dist({ p50: 11, p95: 40 });
    tools.metrics.ttft = dist({ p95: 500 });
    tools.metrics.addedPerDelta = dist({ p95: 1.5 });
    const plain = samplePhase('plain', 2);
    plain.metrics.ttftExModel = dist({ p50: 200, p95: 300 });
    plain.metrics.ttftExModelOtherTurns = dist({ p95: 300 });
    plain.metrics.ttftTroupe = dist({ p50: 10, p95: 40 });
    plain.metrics.ttft = dist({ p95: 250 });
    plain.metrics.addedPerDelta = dist({ p95: 2 });

    const rows = compare([tools, plain], 'baseline');

    expect(rows.map((r) => [r.metric, r.subjectValue, r.baselineValue])).toEqual([
      ["TTFT p95, the model's tool-round time excluded", 306, 300],
      ["TTFT p50, the model's tool-round time excluded", 210, 200],
      // Tool turns against every plain turn (plain has no tool turns).
      ['the same p95, turns with a tool round only', 312, 300],
      ['the same p95, turns without one only', 303, 300],
      ["Troupe's part of the TTFT p95 (all the model's time excluded)", 40, 40],
      ["Troupe's part of the TTFT p50", 11, 10],
      ['TTFT p95 (tool turns wait for their extra model round)', 500, 250],
      ['added latency per delta p95', 1.5, 2],
    ]);
    for (const r of rows) {
      expect(r).toMatchObject({ name: 'tools vs plain', subject: 'tools', baseline: 'plain' });
    }
    expect(rows[0]!.ratio).toBeCloseTo(1.02, 12);
    expect(rows[0]!.increasePct).toBeCloseTo(2, 9);
    expect(rows[1]!.increasePct).toBeCloseTo(5, 9);
    expect(rows[6]).toMatchObject({ ratio: 2, increasePct: 100 });
    expect(rows[7]).toMatchObject({ ratio: 0.75, increasePct: -25 });
  });

  it('compares Troupe with the simulator direct on TTFT p50 and p95', () => {
    const text = samplePhase('text', 1);
    text.metrics.ttft = dist({ p50: 204, p95: 315 });
    const direct = samplePhase('direct', 2, { scenario: 'direct', character: null });
    direct.metrics.ttft = dist({ p50: 200, p95: 300 });

    const rows = compare([text, direct], 'direct');

    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({
      name: 'text vs direct',
      metric: 'TTFT p50',
      subject: 'text',
      baseline: 'direct',
      subjectValue: 204,
      baselineValue: 200,
    });
    expect(rows[0]!.ratio).toBeCloseTo(1.02, 12);
    expect(rows[1]).toMatchObject({ metric: 'TTFT p95', subjectValue: 315, baselineValue: 300 });
    expect(rows[1]!.ratio).toBeCloseTo(1.05, 12);
    expect(rows[1]!.increasePct).toBeCloseTo(5, 9);
  });

  it('gives no ratio when a metric is missing, empty or zero in the baseline', () => {
    const tools = samplePhase('tools', 1, { scenario: 'tools' });
    tools.metrics.ttftExModel = dist({ p50: 0, p95: 300 });
    tools.metrics.addedPerDelta = dist({ p95: 1 });
    const plain = samplePhase('plain', 2);
    // No ttftExModel at all; the plain phase's TTFT p95 is 0; no stamped deltas.
    plain.metrics.ttft = dist({ p95: 0 });
    plain.metrics.addedPerDelta = emptyDistribution();

    const rows = compare([tools, plain], 'baseline');

    expect(rows.map((r) => [r.baselineValue, r.ratio, r.increasePct])).toEqual([
      [null, null, null],
      [null, null, null],
      [null, null, null],
      [null, null, null],
      [null, null, null],
      [null, null, null],
      [0, null, null],
      [null, null, null],
    ]);
    expect(rows[1]!.subjectValue).toBe(0);
  });

  it('gives a ratio of 0 when only the subject is 0', () => {
    const a = samplePhase('text', 1);
    a.metrics.ttft = dist({ p50: 0, p95: 0 });
    const b = samplePhase('direct', 2, { scenario: 'direct' });
    b.metrics.ttft = dist({ p50: 100, p95: 100 });
    expect(compare([a, b], 'direct').map((r) => [r.ratio, r.increasePct])).toEqual([
      [0, -100],
      [0, -100],
    ]);
  });
});

describe('checkTargets', () => {
  it('checks added latency per delta p99 and p95 for each phase through Troupe', () => {
    const a = cleanPhase('text');
    a.metrics.addedPerDelta = dist({ p95: 3, p99: 0.8 });
    const b = cleanPhase('capacity 400', { scenario: 'tools' });
    b.metrics.addedPerDelta = dist({ p95: 12, p99: 1.2 });

    const checks = checkTargets([a, b], [], undefined);

    expect(checks.map((c) => [c.name, c.value, c.op, c.target, c.unit, c.pass])).toEqual([
      [
        'added latency per delta p99 (text, 200 sessions)',
        0.8,
        '≤',
        TARGET_ADDED_P99_MS,
        'ms',
        true,
      ],
      ['added latency per delta p95 (text, 200 sessions)', 3, '≤', TARGET_ADDED_P95_MS, 'ms', true],
      ['errors (text, 200 sessions)', 0, '≤', 0, '', true],
      [
        'added latency per delta p99 (capacity 400, 200 sessions)',
        1.2,
        '≤',
        TARGET_ADDED_P99_MS,
        'ms',
        false,
      ],
      [
        'added latency per delta p95 (capacity 400, 200 sessions)',
        12,
        '≤',
        TARGET_ADDED_P95_MS,
        'ms',
        false,
      ],
      ['errors (capacity 400, 200 sessions)', 0, '≤', 0, '', true],
    ]);
  });

  it('passes a value exactly at its target', () => {
    const phase = cleanPhase('text');
    phase.metrics.addedPerDelta = dist({ p95: TARGET_ADDED_P95_MS, p99: TARGET_ADDED_P99_MS });
    expect(checkTargets([phase], [], undefined).every((c) => c.pass)).toBe(true);
  });

  it('fails an added-latency check with no samples (null value)', () => {
    const phase = cleanPhase('text');
    phase.metrics.addedPerDelta = emptyDistribution();
    const added = checkTargets([phase], [], undefined).filter((c) =>
      c.name.startsWith('added latency'),
    );
    expect(added).toHaveLength(2);
    expect(added.map((c) => [c.value, c.pass])).toEqual([
      [null, false],
      [null, false],
    ]);
  });

  it('checks no added latency for the direct phase or a phase without the metric', () => {
    const direct = cleanPhase('direct', { scenario: 'direct', character: null });
    const voice = cleanPhase('voice', { scenario: 'voice' });
    delete voice.metrics.addedPerDelta;

    const checks = checkTargets([direct, voice], [], undefined);

    expect(checks.map((c) => c.name)).toEqual([
      'errors (direct, 200 sessions)',
      'errors (voice, 200 sessions)',
    ]);
  });

  it('counts errors of every kind and sessions that failed to open, each once', () => {
    // Two sessions failed to connect (their error is connect), two never opened (not_opened).
    const phase = samplePhase('text', 1, {
      errors: { timeout: 3, connect: 2, 'error:llm_error': 1, not_opened: 2 },
      sessions: { target: 50, reached: 46, peak: 46, failed: 4 },
    });
    const errors = checkTargets([phase], [], undefined).find((c) => c.name.startsWith('errors'));
    expect(errors).toEqual({
      name: 'errors (text, 50 sessions)',
      value: 8,
      op: '≤',
      target: 0,
      unit: '',
      pass: false,
    });

    const onlyFailed = cleanPhase('text', {
      sessions: { target: 50, reached: 49, peak: 49, failed: 1 },
    });
    const check = checkTargets([onlyFailed], [], undefined).find((c) =>
      c.name.startsWith('errors'),
    );
    expect(check).toMatchObject({ value: 1, pass: false });
  });

  it('holds TTFT through Troupe to 1.02× direct below 1000 sessions', () => {
    const phases = [
      cleanPhase('text', { sessions: { target: 999, reached: 999, peak: 999, failed: 0 } }),
      cleanPhase('direct', { scenario: 'direct' }),
    ];
    const comparisons = [
      comparison({ metric: 'TTFT p50', baseline: 'direct', ratio: 1.01 }),
      comparison({ metric: 'TTFT p95', baseline: 'direct', ratio: 1.03 }),
    ];

    const ratios = checkTargets(phases, comparisons, undefined).filter((c) => c.unit === '×');

    expect(ratios).toEqual([
      {
        name: 'TTFT p50: through Troupe ÷ direct (999 sessions)',
        value: 1.01,
        op: '≤',
        target: TARGET_TTFT_RATIO,
        unit: '×',
        pass: true,
      },
      {
        name: 'TTFT p95: through Troupe ÷ direct (999 sessions)',
        value: 1.03,
        op: '≤',
        target: TARGET_TTFT_RATIO,
        unit: '×',
        pass: false,
      },
    ]);
    expect(TARGET_TTFT_RATIO).toBe(1.02);
  });

  it('allows TTFT through Troupe 1.05× direct from 1000 sessions', () => {
    const phases = [
      cleanPhase('text', { sessions: { target: 1000, reached: 1000, peak: 1000, failed: 0 } }),
      cleanPhase('direct', { scenario: 'direct' }),
    ];
    const comparisons = [
      comparison({ metric: 'TTFT p95', baseline: 'direct', ratio: 1.03 }),
      comparison({ metric: 'TTFT p50', baseline: 'direct', ratio: 1.06 }),
    ];

    const ratios = checkTargets(phases, comparisons, undefined).filter((c) => c.unit === '×');

    expect(ratios.map((c) => [c.name, c.target, c.pass])).toEqual([
      ['TTFT p95: through Troupe ÷ direct (1000 sessions)', TARGET_TTFT_RATIO_1000, true],
      ['TTFT p50: through Troupe ÷ direct (1000 sessions)', TARGET_TTFT_RATIO_1000, false],
    ]);
    expect(TARGET_TTFT_RATIO_1000).toBe(1.05);
  });

  it('fails a TTFT ratio that could not be computed', () => {
    const checks = checkTargets(
      [cleanPhase('text')],
      [comparison({ metric: 'TTFT p95', baseline: 'direct', ratio: null })],
      undefined,
    );
    expect(checks.find((c) => c.unit === '×')).toMatchObject({ value: null, pass: false });
  });

  it("holds tools to a 2% increase over plain on TTFT p95 without the model's tool round", () => {
    const phases = [cleanPhase('tools', { scenario: 'tools' }), cleanPhase('plain')];
    const rows = (pct: number): Comparison[] => [
      comparison({
        metric: "TTFT p95, the model's tool-round time excluded",
        baseline: 'plain',
        ratio: 1 + pct / 100,
        increasePct: pct,
      }),
      comparison({
        metric: "TTFT p50, the model's tool-round time excluded",
        baseline: 'plain',
        increasePct: 50,
      }),
      comparison({
        metric: 'TTFT p95 (tool turns wait for their extra model round)',
        baseline: 'plain',
        increasePct: 80,
      }),
      comparison({ metric: 'added latency per delta p95', baseline: 'plain', increasePct: 30 }),
    ];

    const pass = checkTargets(phases, rows(1.5), undefined).filter((c) => c.unit === '%');
    const fail = checkTargets(phases, rows(2.5), undefined).filter((c) => c.unit === '%');

    expect(pass).toEqual([
      {
        name: "tools vs plain: TTFT p95, the model's tool-round time excluded, increase",
        value: 1.5,
        op: '≤',
        target: TARGET_TOOLS_INCREASE_PCT,
        unit: '%',
        pass: true,
      },
    ]);
    expect(fail).toHaveLength(1);
    expect(fail[0]).toMatchObject({ value: 2.5, pass: false });
    expect(TARGET_TOOLS_INCREASE_PCT).toBe(2);
  });

  it('checks capacity as at least 1000 sessions', () => {
    const capacity = (sessions: number | null) => ({
      sessions,
      stoppedBecause: 'max sessions reached',
      limitP95AddedMs: 10,
      steps: [],
    });

    const [enough] = checkTargets([], [], capacity(1000));
    const [short] = checkTargets([], [], capacity(900));
    const [none] = checkTargets([], [], capacity(null));

    expect(enough).toEqual({
      name: 'capacity: sessions with p95 added ≤ 10 ms and no errors',
      value: 1000,
      op: '≥',
      target: TARGET_CAPACITY_SESSIONS,
      unit: 'sessions',
      pass: true,
    });
    expect(short).toMatchObject({ value: 900, op: '≥', pass: false });
    expect(none).toMatchObject({ value: null, pass: false });
  });

  it('checks nothing for a run with no phases, comparisons or capacity', () => {
    expect(checkTargets([], [], undefined)).toEqual([]);
  });
});
