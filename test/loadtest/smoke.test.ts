/**
 * The load test runs end to end, so the tool never rots: `--sim` starts the
 * simulator and a server in their own processes, 20 sessions talk to the
 * weather character for a few seconds, and the JSON and HTML reports say
 * what happened. Numbers are not judged here (a busy machine moves them);
 * that every session ran and nothing went wrong is.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadtestReport } from '../../loadtest/report/model.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';
import { FAST_SIM, runLoadtest, type LoadtestRun } from './run-loadtest.js';

const SESSIONS = 20;
/** How far two processes' epoch clocks may disagree here, in ms. */
const CLOCK_DISAGREEMENT_MS = 50;

let smoke: LoadtestRun | undefined;
let report: LoadtestReport;
let html: string;
let stdout: string;

beforeAll(async () => {
  const args = ['--sim', '--scenario', 'tools', '--sessions', String(SESSIONS)];
  smoke = await runLoadtest('smoke', [...args, '--ramp', '1s', '--duration', '5s', ...FAST_SIM]);
  ({ report, stdout } = smoke);
  html = await readFile(join(smoke.dir, 'smoke.html'), 'utf8');
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await smoke?.remove();
});

describe('npm run loadtest -- --sim (smoke)', () => {
  it('reaches every session and finishes turns without a single error', () => {
    const [phase] = report.phases;
    expect(report.phases).toHaveLength(1);
    expect(phase?.scenario).toBe('tools');
    expect(phase?.character).toBe('weather');
    expect(phase?.sessions).toMatchObject({ target: SESSIONS, reached: SESSIONS, failed: 0 });
    expect(phase?.errors).toEqual({});
    expect(phase?.turns.failed).toBe(0);
    expect(phase?.turns.completed).toBeGreaterThanOrEqual(SESSIONS);
  });

  it('measures TTFT, turn duration, tool rounds and added latency per delta', () => {
    const m = report.phases[0]!.metrics;
    expect(m.ttft.n).toBeGreaterThan(0);
    expect(m.turnDuration.n).toBe(report.phases[0]!.turns.completed);
    expect(m.toolRoundOverhead?.n).toBeGreaterThan(0);
    expect(m.addedPerDelta?.n).toBeGreaterThan(0);
    // Stamped by the simulator, read by the client: two processes, each with
    // its epoch clock fixed when it started (performance.timeOrigin). On a busy
    // machine the two can disagree by more than a delta's trip (a CI run saw
    // -0.001 ms), so only a gross error fails here.
    expect(m.addedPerDelta?.min).toBeGreaterThan(-CLOCK_DISAGREEMENT_MS);
    // TTFT can never beat the simulator's own time to first token.
    expect(m.ttft.min).toBeGreaterThanOrEqual(20);
  });

  it('reports the server it started and the simulator latency model', () => {
    expect(report.target.sim).toMatchObject({ ttftMs: 20, tokensPerSec: 200 });
    expect(report.phases[0]!.server?.cpuPercent).toBeGreaterThan(0);
    // The server's garbage collection over the phase (its pauses are the latency tail).
    expect(report.phases[0]!.server?.gc).toMatchObject({
      minorPerS: expect.any(Number),
      minorMeanMs: expect.any(Number),
      majorCount: expect.any(Number),
      pausePercent: expect.any(Number),
    });
    expect(stdout).toMatch(/GC [\d.]+% of the time: [\d.]+ scavenges\/s/);
    // Its CPU per delta, split: user + system is the whole; part of it ran off the main thread.
    const server = report.phases[0]!.server!;
    const split = server.cpuSplit!;
    expect(split.userUs + split.systemUs).toBeCloseTo(server.cpuUsPerDelta!, 0);
    if (process.platform === 'linux') {
      expect(split.offMainUs).toBeGreaterThanOrEqual(0);
      expect(split.offMainUs).toBeLessThan(server.cpuUsPerDelta!);
    }
    expect(stdout).toMatch(
      /µs per delta: [\d.]+ user \+ [\d.]+ system(, [\d.]+ off the main thread)?\)/,
    );
    expect(report.targets.map((t) => t.name)).toContain('errors (tools, 20 sessions)');
  });

  it('prints a final table and writes a self-contained HTML report', () => {
    expect(stdout).toMatch(/tool round overhead/i);
    expect(stdout).toMatch(/added latency per delta/i);
    expect(stdout).toMatch(/report: .*smoke\.json/);
    expect(html).toMatch(/^<!doctype html>/i);
    expect(html).toContain('<svg');
    expect(html).not.toMatch(/(src|href)="https?:/);
  });
});

describe('npm run loadtest -- --sim with DELTA_BATCH_MS (joined deltas)', () => {
  let joined: LoadtestReport;
  let run: LoadtestRun | undefined;

  beforeAll(async () => {
    const args = ['--sim', '--sessions', '5', '--ramp', '500ms', '--duration', '4s', ...FAST_SIM];
    // A window longer than a reply: every delta after an item's first is joined.
    run = await runLoadtest('joined', args, { ...process.env, DELTA_BATCH_MS: '1000' });
    joined = run.report;
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await run?.remove();
  });

  it('counts each of the LLM’s deltas a frame carries, with its own latency, and loses no text', () => {
    const phase = joined.phases[0]!;
    // No `lost_text`: the joined deltas make each reply's whole text.
    expect(phase.errors).toEqual({});
    expect(phase.turns.completed).toBeGreaterThan(0);
    expect(phase.deltaFramesPerSec).toBeGreaterThan(0);
    expect(phase.deltaFramesPerSec!).toBeLessThan(phase.deltasPerSec);
    // One latency sample per delta of the LLM, not per frame.
    const perSecond = phase.metrics.addedPerDelta!.n / phase.durationS;
    expect(perSecond).toBeGreaterThan(phase.deltaFramesPerSec!);
  });
});
