/**
 * A session the server refuses is one error in the load test's report, not
 * two: the real load test CLI runs three sessions against a server that
 * takes one, and the two it turns away are counted once each, under the
 * reason the server gave.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadtestReport } from '../../loadtest/report/model.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';
import { runLoadtest, type LoadtestRun } from './run-loadtest.js';

let t: TestServer;
let run: LoadtestRun | undefined;
let report: LoadtestReport;

beforeAll(async () => {
  t = await startTestServer({ env: { MAX_SESSIONS: '1' } });
  const args = ['--url', t.wsUrl, '--sessions', '3', '--ramp', '300ms', '--duration', '3s'];
  // The load test's exit code says whether the run worked: errors make it non-zero.
  run = await runLoadtest('refused', [...args, '--think', '200ms'], process.env, {
    allowFailure: true,
  });
  report = run.report;
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await t?.close();
  await run?.remove();
});

describe('load test: sessions the server refuses', () => {
  it('counts each refused session once, under the reason it was given', () => {
    const phase = report.phases[0]!;
    expect(phase.sessions).toMatchObject({ target: 3, reached: 1, failed: 2 });
    expect(Object.values(phase.errors).reduce((a, b) => a + b, 0)).toBe(2);
    expect(phase.errors).not.toHaveProperty('not_opened');
    const check = report.targets.find((c) => c.name.startsWith('errors'));
    expect(check).toMatchObject({ value: 2, pass: false });
  });
});
