/**
 * A session the server refuses is one error in the load test's report, not
 * two: the real load test CLI runs three sessions against a server that
 * takes one, and the two it turns away are counted once each, under the
 * reason the server gave.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadtestReport } from '../../loadtest/report/model.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const run = promisify(execFile);

let t: TestServer;
let dir: string;
let report: LoadtestReport;

beforeAll(async () => {
  t = await startTestServer({ env: { MAX_SESSIONS: '1' } });
  dir = await mkdtemp(join(tmpdir(), 'troupe-loadtest-refused-'));
  const args = ['--import', 'tsx', 'loadtest/loadtest.ts', '--url', t.wsUrl];
  args.push('--sessions', '3', '--ramp', '300ms', '--duration', '3s', '--think', '200ms');
  args.push('--out', dir, '--name', 'refused');
  // The load test's exit code says whether the run worked: errors make it non-zero.
  await run(process.execPath, args, { timeout: TEST_TIMEOUT_MS - 30_000 }).catch(() => undefined);
  report = JSON.parse(await readFile(join(dir, 'refused.json'), 'utf8')) as LoadtestReport;
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await t?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
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
