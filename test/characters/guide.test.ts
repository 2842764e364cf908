/**
 * The guide's promise, kept: a fresh clone plus the five-minute character of
 * characters/README.md keeps the tests green. The character and its test are
 * taken from the guide's own code blocks, so this breaks when the guide does.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/**
 * The first ```ts block after the sentence of the guide that names `file`
 * ("Create `characters/dice.ts`").
 */
function guideBlock(guide: string, file: string): string {
  const at = guide.indexOf(`Create \`${file}\``);
  if (at < 0) throw new Error(`characters/README.md no longer says "Create \`${file}\`"`);
  const block = /```ts\n([\s\S]*?)```/.exec(guide.slice(at));
  if (!block) throw new Error(`no TypeScript block follows "Create \`${file}\`"`);
  return block[1]!;
}

/** The project's files (tracked, and new ones not ignored), as they are in the working tree, copied to `to`. */
async function copyProject(to: string): Promise<void> {
  const { stdout } = await run(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    { cwd: ROOT, maxBuffer: 1 << 24 },
  );
  for (const file of stdout.split('\0').filter(Boolean)) {
    await mkdir(dirname(join(to, file)), { recursive: true });
    await copyFile(join(ROOT, file), join(to, file)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err; // deleted in the working tree, not yet committed
    });
  }
  await symlink(join(ROOT, 'node_modules'), join(to, 'node_modules'), 'dir');
}

/** Runs a command in `cwd`; resolves with its exit code and output, whatever the code. */
async function exec(
  cwd: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, args, {
      cwd,
      maxBuffer: 1 << 24,
      env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('a new character from the guide', () => {
  let copy: string;

  beforeAll(async () => {
    copy = await mkdtemp(join(tmpdir(), 'troupe-guide-'));
    await copyProject(copy);
    const guide = readFileSync(join(ROOT, 'characters/README.md'), 'utf8');
    for (const file of ['characters/dice.ts', 'test/characters/dice.test.ts']) {
      await writeFile(join(copy, file), guideBlock(guide, file));
    }
  });
  afterAll(() => (copy ? rm(copy, { recursive: true, force: true }) : undefined));

  it('passes troupe check beside the seed characters', async () => {
    const { code, stdout } = await exec(copy, ['src/cli/bin.mjs', 'check', 'characters']);
    expect(stdout).toMatch(/^dice\s+Dice\s+roll_dice\s+ok$/m);
    expect(code, stdout).toBe(0);
  });

  it('keeps the guide test and the tests that list characters green', async () => {
    const { code, stdout, stderr } = await exec(copy, [
      'node_modules/vitest/vitest.mjs',
      'run',
      '--config',
      'vitest.config.ts',
      // The suites that look at characters/ as a whole, and the guide's own test.
      // (troupe check on the copy is the test above.)
      'test/characters/dice.test.ts',
      'test/server/http.test.ts',
      'test/server/startup.test.ts',
    ]);
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toMatch(/dice\.test\.ts/);
  });
});
