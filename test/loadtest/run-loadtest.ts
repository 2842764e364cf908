/**
 * Runs the load test as a user would (`npm run loadtest -- …`), in a
 * temporary folder of its own, for the tests that check it end to end.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { LoadtestReport } from '../../loadtest/report/model.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const run = promisify(execFile);

/** A fast simulator and short think times: many turns in a few seconds. */
export const FAST_SIM = ['--think', '200ms', '--sim-ttft', '20ms', '--sim-tps', '200'];

/** One finished run: its report, what it printed, and where its files are. */
export interface LoadtestRun {
  report: LoadtestReport;
  stdout: string;
  /** The run's folder (`<name>.json`, `<name>.html`): {@link LoadtestRun.remove} it when done. */
  dir: string;
  remove(): Promise<void>;
}

/**
 * Runs `loadtest/loadtest.ts` with `args`, writing its reports as `name`
 * into a fresh temporary folder, and reads the JSON report back. With
 * `allowFailure`, a run that exits non-zero (its report counts errors) is
 * read all the same.
 *
 * @example const { report, remove } = await runLoadtest('smoke', ['--sim', '--sessions', '5']);
 */
export async function runLoadtest(
  name: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  { allowFailure = false }: { allowFailure?: boolean } = {},
): Promise<LoadtestRun> {
  const dir = await mkdtemp(join(tmpdir(), `troupe-loadtest-${name}-`));
  const argv = ['--import', 'tsx', 'loadtest/loadtest.ts', ...args, '--out', dir, '--name', name];
  const options = { timeout: TEST_TIMEOUT_MS - 30_000, env };
  // The exit code says whether the run worked: a run with errors exits non-zero after its report.
  const { stdout } = await run(process.execPath, argv, options).catch((err: unknown) => {
    if (allowFailure && typeof (err as { code?: unknown }).code === 'number') {
      return { stdout: String((err as { stdout?: unknown }).stdout ?? '') };
    }
    throw err;
  });
  const report = JSON.parse(await readFile(join(dir, `${name}.json`), 'utf8')) as LoadtestReport;
  return { report, stdout, dir, remove: () => rm(dir, { recursive: true, force: true }) };
}
