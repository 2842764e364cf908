/**
 * `npm run chat -- --voice --wav …` as a user runs it: the CLI in a child
 * process against a real Troupe server (in this process) with the offline
 * engines — pocketsphinx hears a question spoken by flite, espeak-ng speaks
 * the answer. Every wait is on the child's exit, never a sleep.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readWav } from '../../src/voice/audio/pcm.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = 'src/cli/chat.ts';
/** tsx start-up, cold engines (2–3 s), 2.7 s of speech said in real time, a paced reply. */
const VOICE_TEST_TIMEOUT_MS = TEST_TIMEOUT_MS;

const children = new Set<ChildProcess>();
let t: TestServer;
let dir: string;
/** A PATH without any audio player, so the run is the same on every machine. */
let noPlayers: string;
let question: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-chat-voice-e2e-'));
  noPlayers = join(dir, 'bin');
  await mkdir(noPlayers);
  question = join(dir, 'q.wav');
  const [server] = await Promise.all([
    startTestServer({ env: { STT_PROVIDER: 'pocketsphinx', TTS_PROVIDER: 'espeak' } }),
    promisify(execFile)('flite', [
      '-voice',
      'kal16',
      '-t',
      "what's the weather in glasgow",
      '-o',
      question,
    ]),
  ]);
  t = server;
});
afterAll(async () => {
  await t?.close();
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
});

/** Runs the chat CLI with `args` and an empty stdin; resolves once it has exited. */
async function runChat(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
    cwd: ROOT,
    stdio: 'pipe',
    env: { ...process.env, ...env },
  });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  child.stdin.end();
  const [code] = (await once(child, 'close')) as [number | null];
  children.delete(child);
  return { code, stdout, stderr };
}

describe('npm run chat -- --voice --wav', () => {
  it(
    'says the question, shows what the server heard and the reply, and writes the spoken reply to --voice-out',
    async () => {
      const out = join(dir, 'out.wav');
      const started = performance.now();
      const r = await runChat(
        ['--url', t.wsUrl, '-c', 'weather', '--voice', '--wav', question, '--voice-out', out],
        { PATH: noPlayers },
      );
      const tookMs = performance.now() - started;
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const lines = r.stdout.split('\n');
      const spoken = lines.findIndex((l) => l.startsWith('you (spoken): '));
      expect(lines[spoken], r.stdout).toMatch(/weather/);
      // The greeting came before the question; the reply after it, as text.
      expect(lines.indexOf('Weather: Hi! Ask me about the weather anywhere.')).toBeLessThan(spoken);
      expect(lines.indexOf('Weather: Sure — in celsius or fahrenheit?')).toBeGreaterThan(spoken);
      expect(r.stdout).toContain('  [vad] speech started\n');

      const wav = readWav(new Uint8Array(await readFile(out)));
      expect(wav.sampleRate).toBe(24_000);
      expect(wav.channels).toBe(1);
      const seconds = wav.pcm.length / wav.sampleRate;
      expect(seconds).toBeGreaterThan(0.5);
      console.log(
        `--wav run: ${Math.round(tookMs)} ms, ${seconds.toFixed(2)} s of speech in out.wav`,
      );
    },
    VOICE_TEST_TIMEOUT_MS,
  );
});
