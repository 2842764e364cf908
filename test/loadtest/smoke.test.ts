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
