/**
 * `--instances 2 --kill-one` end to end: one of two servers behind nginx and
 * redis-server is stopped halfway, its sessions resume on the other, and
 * the run counts what really happened. The run lasts well past the turn
 * timeout after the stop, so a turn the stopped connection left waiting
 * would be counted as failed if nothing ended it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadtestReport } from '../../loadtest/report/model.js';
import { needs } from '../deploy/processes.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';
import { FAST_SIM, runLoadtest, type LoadtestRun } from './run-loadtest.js';

const SESSIONS = 10;

describe.runIf(needs('nginx') && needs('redis-server'))(
  'npm run loadtest -- --sim --instances 2 --kill-one',
  () => {
    let run: LoadtestRun | undefined;
    let report: LoadtestReport;

    beforeAll(async () => {
      const args = ['--sim', '--instances', '2', '--kill-one', '--sessions', String(SESSIONS)];
      // The stop comes at 8 s; a turn left waiting then would time out at ~13 s.
      args.push('--ramp', '1s', '--duration', '16s', '--turn-timeout', '5s', ...FAST_SIM);
      run = await runLoadtest('kill-one', args);
      report = run.report;
    }, TEST_TIMEOUT_MS);

    afterAll(async () => {
      await run?.remove();
    });

    it("resumes the stopped instance's sessions and counts no turn of theirs as failed", () => {
      const [phase] = report.phases;
      expect(phase?.sessions).toMatchObject({ target: SESSIONS, reached: SESSIONS, failed: 0 });
      expect(phase?.errors).toEqual({});
      expect(report.resume?.resumed).toBeGreaterThan(0);
      expect(report.resume?.failed).toBe(0);
      expect(phase?.turns.failed).toBe(0);
      // No turn outlives its connection: never more turns in flight than sessions.
      expect(phase?.activeTurns.peak).toBeLessThanOrEqual(SESSIONS);
    });
  },
);
