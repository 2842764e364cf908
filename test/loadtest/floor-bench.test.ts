/**
 * The floor bench runs end to end with one-word replies: both targets serve
 * every turn, and it prints CPU per delta and per turn for each. Numbers
 * are not judged (a busy machine moves them).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const run = promisify(execFile);

describe('npm run bench:floor -- --reply-words 1', () => {
  it(
    'gives each target a turn per delta, and its CPU per turn',
    async () => {
      const args = ['--import', 'tsx', 'loadtest/floor-bench.ts'];
      const small = ['--sessions', '4', '--seconds', '2', '--warmup', '1', '--rounds', '1'];
      const { stdout } = await run(
        process.execPath,
        [...args, ...small, '--think', '100', '--ttft', '20', '--reply-words', '1'],
        { timeout: TEST_TIMEOUT_MS - 30_000 },
      );
      for (const target of ['floor', 'troupe']) {
        expect(stdout).toMatch(
          new RegExp(
            `round 1 ${target} +[\\d.]+ µs per delta: [\\d.]+ user \\+ [\\d.]+ system(, [\\d.]+ off the main thread)? · \\d+ µs per turn \\(1\\.0 deltas\\)`,
          ),
        );
      }
      expect(stdout).toMatch(/server CPU per turn: floor \d+ µs, Troupe \d+ µs/);
    },
    TEST_TIMEOUT_MS,
  );

  it('refuses a reply length that is not a whole number', async () => {
    const failed = await run(process.execPath, [
      '--import',
      'tsx',
      'loadtest/floor-bench.ts',
      '--reply-words',
      '1.5',
    ]).catch((err: { code: number; stderr: string }) => err);
    expect(failed).toMatchObject({ code: 2 });
    expect((failed as { stderr: string }).stderr).toContain('--reply-words must be a whole number');
  });
});
