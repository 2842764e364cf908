/**
 * `--instances 2 --kill-one` end to end: one of two servers behind nginx and
 * redis-server is stopped halfway, its sessions resume on the other, and
 * the run counts what really happened. The run lasts well past the turn
 * timeout after the stop, so a turn the stopped connection left waiting
 * would be counted as failed if nothing ended it. A session that is not
 * resumed counts the turn its connection cut as failed, once.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
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

describe('a turn cut by a close, without resume', () => {
  let server: WebSocketServer;
  let run: LoadtestRun | undefined;

  beforeAll(async () => {
    // Just enough of a server: a session, then a close in the middle of the first reply.
    server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    server.on('connection', (ws) => {
      ws.send(JSON.stringify({ type: 'session.created', session: { id: 'sess_cut' } }));
      ws.on('message', (data) => {
        const event = JSON.parse(String(data)) as { type?: string };
        if (event.type !== 'response.create') return;
        ws.send(JSON.stringify({ type: 'response.created', response: { id: 'resp_cut' } }));
        ws.close(1011, 'gone');
      });
    });
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as AddressInfo;
    const url = `ws://127.0.0.1:${port}/v1/realtime`;
    const args = ['--url', url, '--sessions', '1', '--ramp', '0s', '--duration', '2s'];
    // Errors make the run's exit code non-zero: the report is what is checked.
    run = await runLoadtest('cut', args, process.env, { allowFailure: true });
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await run?.remove();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('counts the turn as failed once, beside the close', () => {
    const phase = run!.report.phases[0]!;
    expect(phase.errors).toEqual({ 'closed:1011': 1 });
    expect(phase.turns).toEqual({ completed: 0, failed: 1 });
  });
});
