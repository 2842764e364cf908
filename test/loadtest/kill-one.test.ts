/**
 * `--instances 2 --kill-one` end to end: one of two servers behind nginx and
 * redis-server is stopped halfway, its sessions resume on the other, and
 * the run counts what really happened. The run lasts well past the turn
 * timeout after the stop, so a turn the stopped connection left waiting
 * would be counted as failed if nothing ended it.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadtestReport } from '../../loadtest/report/model.js';
import { needs } from '../deploy/processes.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const run = promisify(execFile);
const SESSIONS = 10;

describe.runIf(needs('nginx') && needs('redis-server'))(
  'npm run loadtest -- --sim --instances 2 --kill-one',
  () => {
    let dir: string;
    let report: LoadtestReport;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'troupe-kill-one-'));
      const args = [
        '--import',
        'tsx',
        'loadtest/loadtest.ts',
        '--sim',
        '--instances',
        '2',
        '--kill-one',
        '--sessions',
        String(SESSIONS),
        '--ramp',
        '1s',
        // The stop comes at 8 s; a turn left waiting then would time out at ~13 s.
        '--duration',
        '16s',
        '--turn-timeout',
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
        'kill-one',
      ];
      await run(process.execPath, args, { timeout: TEST_TIMEOUT_MS - 30_000 });
      report = JSON.parse(await readFile(join(dir, 'kill-one.json'), 'utf8')) as LoadtestReport;
    }, TEST_TIMEOUT_MS);

    afterAll(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
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
