/**
 * The load test runs end to end, so the tool never rots: `--sim` starts the
 * simulator and a server in their own processes, 20 sessions talk to the
 * weather character for a few seconds, and the JSON and HTML reports say
 * what happened. Numbers are not judged here (a busy machine moves them);
 * that every session ran and nothing went wrong is.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadtestReport } from '../../loadtest/report/model.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const run = promisify(execFile);
const SESSIONS = 20;

let dir: string;
let report: LoadtestReport;
let html: string;
let stdout: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-loadtest-'));
  const args = [
    '--import',
    'tsx',
    'loadtest/loadtest.ts',
    '--sim',
    '--scenario',
    'tools',
    '--sessions',
    String(SESSIONS),
    '--ramp',
    '1s',
    '--duration',
    '5s',
    '--think',
    '200ms',
    '--sim-ttft',
    '20ms',
    '--sim-tps',
    '200',
    '--out',
    dir,
    '--name',
    'smoke',
  ];
  ({ stdout } = await run(process.execPath, args, { timeout: TEST_TIMEOUT_MS - 30_000 }));
  report = JSON.parse(await readFile(join(dir, 'smoke.json'), 'utf8')) as LoadtestReport;
  html = await readFile(join(dir, 'smoke.html'), 'utf8');
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
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
    expect(m.addedPerDelta?.min).toBeGreaterThanOrEqual(0);
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
  let joinedDir: string;

  beforeAll(async () => {
    joinedDir = await mkdtemp(join(tmpdir(), 'troupe-loadtest-joined-'));
    const args = ['--import', 'tsx', 'loadtest/loadtest.ts', '--sim', '--sessions', '5'];
    args.push('--ramp', '500ms', '--duration', '4s', '--think', '200ms', '--sim-ttft', '20ms');
    args.push('--sim-tps', '200', '--out', joinedDir, '--name', 'joined');
    // A window longer than a reply: every delta after an item's first is joined.
    await run(process.execPath, args, {
      timeout: TEST_TIMEOUT_MS - 30_000,
      env: { ...process.env, DELTA_BATCH_MS: '1000' },
    });
    joined = JSON.parse(await readFile(join(joinedDir, 'joined.json'), 'utf8')) as LoadtestReport;
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    if (joinedDir) await rm(joinedDir, { recursive: true, force: true });
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
