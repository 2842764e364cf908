import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCharacters, formatCheckReport } from '../../src/characters/check.js';
import { character, characterDir, type CharacterDir } from '../helpers/characters.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'src/cli/bin.mjs');

/** Runs the `troupe` executable; resolves with its exit code and output. */
async function troupe(
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [BIN, ...args], {
      cwd: ROOT,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let chars: CharacterDir;
beforeAll(async () => {
  chars = await characterDir({
    'good.ts': character({
      name: 'Good One',
      extra: `tools: [defineTool({ name: 'roll', description: 'd', parameters: z.object({}), handler: () => 4 })],`,
    }),
    'bad.ts': `export default { name: 'Bad', instructions: 'x', toolMode: 'auto', llm: { temperature: 9 } };`,
  });
});
afterAll(async () => chars.cleanup());

describe('troupe check', () => {
  it('prints a table of every character and every error, and exits 1', async () => {
    const { code, stdout } = await troupe('check', chars.dir);
    expect(code).toBe(1);
    const lines = stdout.split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^id\s+name\s+tools\s+status$/));
    expect(lines).toContainEqual(expect.stringMatching(/^bad\s+-\s+-\s+error: shape$/));
    expect(lines).toContainEqual(expect.stringMatching(/^good\s+Good One\s+roll\s+ok$/));
    expect(stdout).toContain('1 ok, 1 with errors, 2 errors.');
    expect(stdout).toMatch(
      /error \[shape\] .*bad\.ts: toolMode: expected "native" or "prompt", got "auto"/,
    );
    expect(stdout).toMatch(
      /error \[shape\] .*bad\.ts: llm\.temperature: expected a number from 0 to 2, got 9/,
    );
  });

  it('exits 0 on the seed characters', async () => {
    const { code, stdout } = await troupe('check', 'characters');
    expect(code).toBe(0);
    for (const id of ['concierge', 'hello', 'narrator', 'plain', 'quizmaster', 'weather']) {
      expect(stdout).toMatch(new RegExp(`^${id}\\s.*\\sok$`, 'm'));
    }
  });

  it('reports in JSON on request', async () => {
    const { code, stdout } = await troupe('check', chars.dir, '--json');
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as {
      characters: { id: string; name: string | null }[];
      errors: { kind: string; path: string }[];
    };
    expect(report.characters.map((c) => c.id)).toEqual(['bad', 'good']);
    // A character that did not load has no name: null, not a placeholder.
    expect(report.characters.map((c) => c.name)).toEqual([null, 'Good One']);
    expect(report.errors.map((e) => e.path)).toEqual(['toolMode', 'llm.temperature']);
  });

  it('says what is wrong with a directory that does not exist, without pointing at CHARACTERS_DIR', async () => {
    const { code, stderr } = await troupe('check', '.tmp/nowhere');
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /^troupe: characters directory .*nowhere does not exist or is not a directory; give the folder holding your character files\.$/m,
    );
    expect(stderr).not.toContain('CHARACTERS_DIR');
  });

  it('warns about a folder with no characters and exits 1', async () => {
    const empty = await characterDir({ 'notes.txt': 'not a character', '_helper.ts': '' });
    try {
      const { code, stdout } = await troupe('check', empty.dir);
      expect(code).toBe(1);
      expect(stdout).toMatch(
        /^warning: no character files in \S+: a character is a \.ts, \.js or \.mjs file/m,
      );
    } finally {
      await empty.cleanup();
    }
  });

  it('lists its flags on --help and exits 0', async () => {
    const { code, stdout } = await troupe('check', '--help');
    expect(code).toBe(0);
    expect(stdout).toContain('Usage: troupe check [dir] [flags]');
    expect(stdout).toMatch(/--json\s+print the report as JSON/);
  });

  it('names the nearest flag for a mistyped one and exits 2', async () => {
    const { code, stderr } = await troupe('check', 'characters', '--jsn');
    expect(code).toBe(2);
    expect(stderr).toBe(
      'troupe check: unknown flag --jsn; did you mean --json?\n' +
        'Flags: --json, --help (troupe check --help says what each does).\n',
    );
  });

  it('refuses an unknown command with the usage', async () => {
    const { code, stderr } = await troupe('chekc');
    expect(code).toBe(2);
    expect(stderr).toContain('unknown command "chekc"');
    expect(stderr).toContain('Usage: troupe');
  });

  it('formats an empty directory', async () => {
    const empty = await characterDir();
    try {
      const text = formatCheckReport(await checkCharacters(empty.dir));
      expect(text).toContain('0 ok, 0 with errors, 0 errors.');
    } finally {
      await empty.cleanup();
    }
  });
});
