import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { CharacterChange, CharacterRegistry } from '../../src/characters/registry.js';

/** Where test character directories go: inside the project, so `zod` and `src/` resolve. */
const TMP_ROOT = resolve('.tmp');

/** What a character file in a temp directory imports Troupe from. */
export const TROUPE = resolve('src/index.ts');

/** A temporary characters directory; files are written relative to it. */
export interface CharacterDir {
  dir: string;
  write(name: string, source: string): Promise<string>;
  remove(name: string): Promise<void>;
  cleanup(): Promise<void>;
}

/**
 * Creates a characters directory with the given files.
 *
 * @example
 * const chars = await characterDir({ 'a.ts': character({ name: 'A' }) });
 */
export async function characterDir(files: Record<string, string> = {}): Promise<CharacterDir> {
  await mkdir(TMP_ROOT, { recursive: true });
  const dir = await mkdtemp(join(TMP_ROOT, 'chars-'));
  const write = async (name: string, source: string) => {
    const file = join(dir, name);
    await mkdir(dirname(file), { recursive: true });
    // Write then rename, as editors do, so a watcher never sees a half-written file.
    const temp = join(dirname(file), `.${basename(file)}.tmp`);
    await writeFile(temp, source);
    await rename(temp, file);
    return file;
  };
  for (const [name, source] of Object.entries(files)) await write(name, source);
  return {
    dir,
    write,
    remove: (name) => rm(join(dir, name)),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** Source of a valid character module; `extra` is spliced into the exported object. */
export function character(fields: { name?: string; prompt?: string; extra?: string } = {}): string {
  return `import { z } from 'zod';
import { defineCharacter, defineTool } from ${JSON.stringify(TROUPE)};
void z; void defineTool;
export default defineCharacter({
  name: ${JSON.stringify(fields.name ?? 'Tester')},
  instructions: { prompt: ${JSON.stringify(fields.prompt ?? 'You are a test character.')} },
  ${fields.extra ?? ''}
});
`;
}

/** The next registry change that satisfies `match`. */
export function nextChange(
  registry: CharacterRegistry,
  match: (change: CharacterChange) => boolean = () => true,
): Promise<CharacterChange> {
  return new Promise((resolvePromise) => {
    const stop = registry.subscribe((change) => {
      if (!match(change)) return;
      stop();
      resolvePromise(change);
    });
  });
}
