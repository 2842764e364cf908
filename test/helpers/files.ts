/** Temporary file trees for tests, removed after each test. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';

const roots: string[] = [];
afterEach(async () => {
  for (const r of roots.splice(0)) await rm(r, { recursive: true, force: true });
});

/**
 * A file system root with the given files (path → content), such as a fake
 * `/proc` and `/sys` for the control group readers; gone after the test.
 */
export async function fakeRoot(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), 'troupe-root-'));
  roots.push(root);
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, file)), { recursive: true });
    await writeFile(path.join(root, file), text);
  }
  return root;
}

/**
 * The environment of a server started as its own process for a test: any
 * free port, no LLM (a port nothing listens on), no speech engines, no file
 * watching.
 */
export const STANDALONE_ENV = {
  PORT: '0',
  LOG_LEVEL: 'info',
  LLM_BASE_URL: 'http://127.0.0.1:9/v1',
  CHARACTERS_WATCH: '0',
  STT_PROVIDER: 'none',
  TTS_PROVIDER: 'none',
} as const;
