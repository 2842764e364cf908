import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_TIMEOUT_MS } from '../../helpers/wait.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-stt-tsx-'));
  await run('flite', [
    '-voice',
    'kal16',
    '-t',
    'what is the weather like in paris',
    '-o',
    join(dir, 'utt.wav'),
  ]);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('PocketsphinxSttProvider under tsx', () => {
  it('starts its TypeScript worker when the server runs through tsx, and lets the process exit when idle', async () => {
    const src = (file: string) => pathToFileURL(join(ROOT, 'src/voice', file)).href;
    // The way `npm start` runs the server: `node --import tsx src/cli/start.ts`. `.mts` because
    // the temporary directory has no package.json saying "type": "module".
    const script = join(dir, 'start.mts');
    await writeFile(
      script,
      [
        `import { readFileSync } from 'node:fs';`,
        `import { PocketsphinxSttProvider } from ${JSON.stringify(src('stt/pocketsphinx.ts'))};`,
        `import { readWav } from ${JSON.stringify(src('audio/pcm.ts'))};`,
        `const stt = new PocketsphinxSttProvider();`,
        `const stream = stt.open({ signal: new AbortController().signal, onEvent: () => {} });`,
        `const { pcm } = readWav(readFileSync(${JSON.stringify(join(dir, 'utt.wav'))}));`,
        `for (let i = 0; i < pcm.length; i += 320) stream.write(pcm.subarray(i, i + 320));`,
        `console.log(JSON.stringify({ text: await stream.commit(), health: await stt.health() }));`,
        // No stt.close(): an idle pool must not keep the process alive.
      ].join('\n'),
    );
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', script], {
      cwd: ROOT,
      // Inside the test's own bound, so a hang fails with the child's output.
      timeout: TEST_TIMEOUT_MS - 30_000,
    });
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      text: string;
      health: { ok: boolean };
    };
    expect(result.text).toContain('paris');
    expect(result.health.ok).toBe(true);
    // pocketsphinx's own log is switched off: nothing reaches stderr.
    expect(stderr).toBe('');
  });
});
