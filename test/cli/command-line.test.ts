import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { flagProblem, helpText, wantsHelp } from '../../src/cli/command-line.js';
import { DEMO_COMMAND, SERVER_FLAGS, START_COMMAND } from '../../src/cli/start-options.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Runs a CLI entry point under tsx; resolves with its exit code and output. */
async function cli(
  file: string,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', file, ...args],
      { cwd: ROOT },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('flagProblem', () => {
  it('names the nearest flag and lists the flags there are', () => {
    expect(flagProblem(['--prot', '9000'], START_COMMAND)).toBe(
      'unknown flag --prot; did you mean --port?\n' +
        `Flags: ${START_COMMAND.flags.map((f) => `--${f.name}`).join(', ')} (npm start -- --help says what each does).`,
    );
  });

  it('lists the flags without a guess when nothing is near', () => {
    expect(flagProblem(['--xyzzy-plugh'], START_COMMAND)).toMatch(
      /^unknown flag --xyzzy-plugh\nFlags: --port, /,
    );
  });

  it('asks for the value of a value flag and accepts --flag=value', () => {
    expect(flagProblem(['--port'], START_COMMAND)).toBe('--port needs a value: --port N.');
    expect(flagProblem(['--port', '--strict'], START_COMMAND)).toBe(
      '--port needs a value: --port N.',
    );
    expect(flagProblem(['--port=9000', '--strict', '--host', '0.0.0.0'], START_COMMAND)).toBe(
      undefined,
    );
    expect(flagProblem(['--strict=yes'], START_COMMAND)).toBe(
      '--strict takes no value (got "yes").',
    );
  });

  it('sees --help and -h only before --', () => {
    expect(wantsHelp(['--port', '1', '-h'])).toBe(true);
    expect(wantsHelp(['--', '--help'])).toBe(false);
  });
});

describe('the server flags', () => {
  it('are all flags the settings accept', () => {
    for (const flag of SERVER_FLAGS) {
      const args = flag.value ? [`--${flag.name}`, 'x'] : [`--${flag.name}`];
      // A bad value is fine here; an unknown flag is not.
      const err = (() => {
        try {
          loadConfig({}, args);
          return undefined;
        } catch (e) {
          return e as Error;
        }
      })();
      expect(err?.message ?? '', flag.name).not.toMatch(/Unknown option/);
    }
  });

  it('are listed in the help of npm start with what each does', () => {
    const text = helpText(START_COMMAND);
    for (const flag of SERVER_FLAGS) expect(text).toMatch(new RegExp(`--${flag.name}\\b.*\\S`));
    expect(text).toContain('docs/configuration.md');
    // Each default as the settings have it.
    expect(text).toMatch(/--workers N .*\(WORKERS, default auto\)/);
  });
});

describe('npm start and npm run demo', () => {
  it.each([
    ['src/cli/start.ts', 'Usage: npm start -- [flags]'],
    ['src/cli/demo.ts', 'Usage: npm run demo -- [flags]'],
  ])('%s lists its flags on --help and exits 0', async (file, usage) => {
    const { code, stdout } = await cli(file, '--help');
    expect(code).toBe(0);
    expect(stdout.startsWith(usage)).toBe(true);
    expect(stdout).toMatch(/--port N\s+port to listen on/);
    if (file.includes('demo')) expect(stdout).toContain(helpText(DEMO_COMMAND));
  });

  it('npm run demo is one process: it has no --workers, and says so of WORKERS', async () => {
    expect(helpText(DEMO_COMMAND)).not.toContain('--workers');
    expect(helpText(DEMO_COMMAND)).toContain("workers (WORKERS) are npm start's");
    const { code, stdout, stderr } = await cli('src/cli/demo.ts', '--workers', '2');
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^demo: unknown flag --workers/);
  });

  it('refuses a mistyped flag with the nearest one and exits 2, before starting anything', async () => {
    const { code, stdout, stderr } = await cli('src/cli/start.ts', '--prot', '9000');
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^troupe: unknown flag --prot; did you mean --port\?\nFlags: --port, /);
  });
});
