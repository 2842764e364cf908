/**
 * `npm run chat -- --voice --mic` as a user runs it, against a real server
 * with the offline engines. The microphone is a fake `arecord` on PATH: a
 * small Node script that plays a flite recording in real time, then silence,
 * and says the question again when the test drops a trigger file (the user
 * talking over the reply). The player is a fake `aplay` that keeps what it is
 * fed. Every wait is on the CLI's output or exit, never a sleep.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SimScript } from '../../src/testing/index.js';
import { encodePcm16Base64, writeWav } from '../../src/voice/audio/pcm.js';
import { concat, silence, speech } from '../helpers/audio.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = 'src/cli/chat.ts';
const VOICE_TEST_TIMEOUT_MS = TEST_TIMEOUT_MS;

/**
 * Long enough (about 40 s spoken) that the user's second question lands while
 * it plays, however long a busy machine takes to hear that question: the
 * barge-in races the end of the reply, so the reply must be far longer.
 */
const LONG_REPLY =
  'Glasgow is cloudy this morning with light rain and about twelve degrees, and a gentle ' +
  'westerly breeze should pick up a little by the afternoon, so take a coat if you go out. ' +
  'Tomorrow looks brighter, with sunny spells in the east and a few showers in the west. ' +
  'The weekend starts dry and mild, and the wind should ease by Saturday evening. ' +
  'On Sunday a band of rain moves in from the Atlantic, heavy at times in the hills, ' +
  'clearing to blustery showers by the evening with a fresher feel. ' +
  'Early next week stays unsettled, and that is the end of the forecast.';
const SCRIPT: SimScript = {
  rules: [{ when: { user: 'weather' }, reply: { parts: [{ text: LONG_REPLY }] } }],
  fallback: { parts: [{ text: 'Noted.' }] },
};

const children = new Set<ChildProcess>();
let t: TestServer;
let dir: string;
let bin: string;
let trigger: string;
let played: string;

/** A fake recorder: real-time 40 ms frames of `first`, then silence; `again` once `trigger` exists. */
function fakeArecord(first: string, again: string): string {
  return `#!${process.execPath}
const { readFileSync, existsSync } = require('node:fs');
const FRAME_BYTES = 1920;
const SILENCE = Buffer.alloc(FRAME_BYTES);
let pending = readFileSync(${JSON.stringify(first)});
let triggered = false;
const start = Date.now();
let frames = 0;
// The client stops us with SIGTERM; if it dies instead, the broken pipe ends us.
process.stdout.on('error', () => process.exit(0));
function frame() {
  if (!triggered && existsSync(${JSON.stringify(trigger)})) {
    triggered = true;
    pending = Buffer.concat([pending, readFileSync(${JSON.stringify(again)})]);
  }
  let out = pending.subarray(0, FRAME_BYTES);
  pending = pending.subarray(out.length);
  if (out.length < FRAME_BYTES) out = Buffer.concat([out, SILENCE.subarray(out.length)]);
  process.stdout.write(out);
  frames++;
  setTimeout(frame, Math.max(0, start + frames * 40 - Date.now()));
}
frame();
`;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-chat-mic-e2e-'));
  bin = join(dir, 'bin');
  await mkdir(bin);
  trigger = join(dir, 'speak-again');
  played = join(dir, 'played.raw');
  const [server, question] = await Promise.all([
    startTestServer({
      env: { STT_PROVIDER: 'pocketsphinx', TTS_PROVIDER: 'espeak' },
      script: SCRIPT,
    }),
    speech("what's the weather in glasgow"),
  ]);
  t = server;
  const raw = (pcm: Int16Array) => Buffer.from(encodePcm16Base64(pcm), 'base64');
  const first = join(dir, 'first.raw');
  const again = join(dir, 'again.raw');
  await writeFile(first, raw(concat(silence(300), question, silence(1_000))));
  // No leading silence: the VAD hears it at once, well inside the long reply.
  await writeFile(again, raw(concat(question, silence(1_000))));
  await writeFile(join(bin, 'arecord'), fakeArecord(first, again));
  await writeFile(join(bin, 'aplay'), `#!/bin/sh\nexec /bin/cat >> '${played}'\n`);
  await chmod(join(bin, 'arecord'), 0o755);
  await chmod(join(bin, 'aplay'), 0o755);
});
afterAll(async () => {
  await t?.close();
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
});

/** The CLI with the fake devices on PATH; `output` resolves when stdout matches, rejects if it exits first. */
function startChat(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
    cwd: ROOT,
    stdio: 'pipe',
    env: { ...process.env, PATH: bin },
  });
  children.add(child);
  let stdout = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString('utf8');
    for (const watch of [...watchers]) watch();
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  child.stdin.end();
  const closed = once(child, 'close').then(([code]) => {
    children.delete(child);
    return code as number | null;
  });
  return {
    child,
    closed,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    output(pattern: RegExp): Promise<void> {
      return new Promise((resolve, reject) => {
        const watch = (): void => {
          if (!pattern.test(stdout)) return;
          watchers.delete(watch);
          resolve();
        };
        watchers.add(watch);
        watch();
        void closed.then(() =>
          reject(new Error(`the CLI exited before printing ${pattern}:\n${stdout}\n${stderr}`)),
        );
      });
    },
  };
}

describe('npm run chat -- --voice --mic', () => {
  it(
    'hears the user, plays the reply, and cuts it when the user talks over it',
    async () => {
      const run = startChat(['--url', t.wsUrl, '-c', 'weather', '--voice', '--mic']);
      // The reply has started playing: the user speaks again.
      await run.output(/you \(spoken\): [^\n]*\nWeather: Glasgow is cloudy/);
      await writeFile(trigger, '');
      await run.output(/Weather: Glasgow is cloudy[^]*\(reply cut after \d/);
      run.child.kill('SIGINT');
      expect(await run.closed).toBe(0);

      expect(run.stderr).toBe('');
      expect(run.stdout).toContain('(listening through arecord; speak, and press Ctrl+C');
      expect(run.stdout).toMatch(/you \(spoken\): [^\n]*weather/);
      // Only what was played before the user spoke is on screen, and the server
      // confirmed the truncation the client sent.
      expect(run.stdout).not.toContain('that is the end of the forecast.');
      const after = run.stdout.slice(run.stdout.indexOf('Weather: Glasgow is cloudy'));
      expect(after).toMatch(/\n {2}\[vad\] speech started\n[^]*\(reply cut after \d/);
      expect((await stat(played)).size).toBeGreaterThan(0);
    },
    VOICE_TEST_TIMEOUT_MS,
  );

  it(
    '--wav exits 1 naming the file when the server heard no speech in it',
    async () => {
      const silent = join(dir, 'silence.wav');
      await writeFile(silent, writeWav(new Int16Array(1_600), 16_000)); // 0.1 s
      const run = startChat(['--url', t.wsUrl, '-c', 'weather', '--wav', silent]);
      expect(await run.closed).toBe(1);
      expect(run.stderr).toBe(
        `chat: the server heard no speech in ${silent}; is it speech, and loud enough?\n`,
      );
      expect(run.stdout).not.toContain('you (spoken)');
    },
    VOICE_TEST_TIMEOUT_MS,
  );
});
