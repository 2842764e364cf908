/**
 * `npm run chat` as a user runs it: the CLI in a child process with stdin
 * piped, against a real Troupe server (in this process) over the LLM
 * simulator's demo script. Every wait is on the child's exit, never a sleep.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { writeWav } from '../../src/voice/audio/pcm.js';
import { connect, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { TEST_TIMEOUT_MS } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = 'src/cli/chat.ts';
/** Starting tsx and talking over a socket takes a second or two: the suite's generous bound. */
const CLI_TEST_TIMEOUT_MS = TEST_TIMEOUT_MS;

const children = new Set<ChildProcess>();

interface ChatRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the chat CLI with `lines` on its stdin (and `env` over this process's);
 * resolves when it has exited and its output is in.
 */
async function runChat(
  args: string[],
  lines: string[] = [],
  env: Record<string, string> = {},
): Promise<ChatRun> {
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
  // The CLI may exit before reading stdin (bad flag, refused connection).
  child.stdin.on('error', () => undefined);
  child.stdin.end(lines.map((l) => `${l}\n`).join(''));
  // 'close', not 'exit': it fires once stdout and stderr are drained too.
  const [code] = (await once(child, 'close')) as [number | null];
  children.delete(child);
  return { code, stdout, stderr };
}

/** Asserts that `parts` occur in `text` in this order. */
function expectInOrder(text: string, parts: string[]): void {
  let from = 0;
  for (const part of parts) {
    const at = text.indexOf(part, from);
    expect(at, `"${part}" after offset ${from} in:\n${text}`).toBeGreaterThanOrEqual(0);
    from = at + part.length;
  }
}

/** A loopback port nobody listens on: bound by the OS, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** A folder for files the voice flags read, and an empty one to use as a PATH without players or recorders. */
let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'troupe-chat-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

afterEach(() => {
  // A CLI that hung past a failed test must not outlive it.
  for (const child of children) child.kill('SIGKILL');
  children.clear();
});

describe('npm run chat against a running server', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => {
    await t?.close();
  });

  it(
    'shows the greeting, the streamed replies and the tool call with its outcome',
    async () => {
      const r = await runChat(
        ['--character', 'weather', '--url', t.wsUrl],
        ["What's the weather in Glasgow?", 'Celsius, please.'],
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expectInOrder(r.stdout, [
        'connected to Weather (weather)',
        'Weather: Hi! Ask me about the weather anywhere.\n',
        "you: What's the weather in Glasgow?\n",
        'Weather: Sure — in celsius or fahrenheit?\n',
        'you: Celsius, please.\n',
        'Weather: Checking Glasgow.',
        '  [tool] get_current_weather {"location":"Glasgow, Scotland","format":"celsius"}\n',
        '  [tool] get_current_weather → ok in ',
        '"location":"Glasgow, Scotland"',
        "Weather: It's 5 °C and windy in Glasgow right now.\n",
      ]);
      // The greeting came as conversation.item.added and .done: shown once.
      expect(r.stdout.match(/Ask me about the weather/g)).toHaveLength(1);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'keeps the quizmaster’s state across lines, each sent after the previous reply',
    async () => {
      // The http(s) form of the URL is accepted and turned into ws://…/v1/realtime.
      const r = await runChat(
        ['-c', 'quizmaster', '--url', t.url],
        ["Let's do a quiz!", 'Paris', "What's my score?"],
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expectInOrder(r.stdout, [
        'Quizmaster: Welcome to the quiz!',
        "you: Let's do a quiz!\n",
        '  [tool] start_quiz → ok',
        'Question 1 of 3: What is the capital of France?',
        'you: Paris\n',
        '  [tool] answer {"answer":"Paris"}\n',
        '  [tool] answer → ok',
        'Correct! Question 2 of 3',
        "you: What's my score?\n",
        '  [tool] score → ok',
        'Score: 1 correct of 1 answered',
        'Quizmaster: Score: 1 correct of 1 answered (3 questions in all).\n',
      ]);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'shows the server’s error for an unknown character and exits 1',
    async () => {
      const r = await runChat(['--character', 'nobody', '--url', t.wsUrl], ['Hello there!']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('error [unknown_character]: No character "nobody"');
      expect(r.stderr).toMatch(/connection closed \(1008 unknown_character\): .*--character/);
      expect(r.stdout).not.toContain('you: Hello there!');
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'prints the server’s audio_not_supported error for --voice, answers in text, and exits 1',
    async () => {
      // No player on PATH, but --voice-out still wants the speech, so the client asks for it.
      const r = await runChat(
        [
          '--character',
          'weather',
          '--url',
          t.wsUrl,
          '--voice',
          '--voice-out',
          join(scratch, 'r.wav'),
        ],
        ['Hello there!'],
        { PATH: scratch },
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        'error [audio_not_supported]: session.update: session.output_modalities: this server has ' +
          'no text-to-speech engine (TTS_PROVIDER=none)',
      );
      expectInOrder(r.stdout, [
        '(the server does not speak: replies are shown as text only)\n',
        'you: Hello there!\n',
        'Weather: ',
      ]);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'stops saying a --wav file at the server’s first audio_not_supported and exits 1',
    async () => {
      // A minute of tone, 1500 chunks of 40 ms: far more than a busy machine can
      // send before the first refusal is back, so stopping early is observable.
      const seconds = 60;
      const wav = join(scratch, 'tone.wav');
      await writeFile(wav, writeWav(new Int16Array(seconds * 16_000).fill(1_000), 16_000));
      const r = await runChat(['--character', 'weather', '--url', t.wsUrl, '--wav', wav]);
      expect(r.code).toBe(1);
      // Chunks already on the wire when the first refusal arrives are refused
      // too (a stalled client catches up on overdue chunks at once), so the
      // count depends on the machine's load; that it stopped does not.
      const refusals = r.stderr.match(/error \[audio_not_supported\]/g) ?? [];
      expect(refusals.length).toBeGreaterThanOrEqual(1);
      expect(refusals.length).toBeLessThan((seconds * 1000) / 40 / 2);
      expect(r.stderr).toContain(
        'error [audio_not_supported]: input_audio_buffer.append: this server takes no audio',
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'says the endpoint was not found when the URL path is wrong',
    async () => {
      const r = await runChat(['--url', `${t.url}/nope`], ['Hello there!']);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `could not connect to ${t.url.replace('http:', 'ws:')}/nope: the server answered ` +
          'HTTP 404 Not Found: WebSocket endpoint is /v1/realtime (or /openai/v1/realtime) ' +
          '(check the URL path; the endpoint is usually /v1/realtime)\n',
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );
});

describe('npm run chat against a server that needs a token and takes one session', () => {
  let t: TestServer;
  let holder: TestClient | undefined;
  beforeAll(async () => {
    t = await startTestServer({ env: { AUTH_TOKEN: 'open-sesame', MAX_SESSIONS: '1' } });
  });
  afterAll(async () => {
    await holder?.close();
    await t?.close();
  });

  it(
    'sends --token as a bearer token',
    async () => {
      const r = await runChat(
        ['-c', 'plain', '--url', t.wsUrl, '--token', 'open-sesame'],
        ['Hello there!'],
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('Hello! How can I help?');
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'explains a 1008 close as an authentication failure when the token is wrong',
    async () => {
      const r = await runChat(['-c', 'plain', '--url', t.wsUrl, '--token', 'guess'], ['Hi']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        'connection closed (1008 invalid token): the server refused the session: ' +
          'authentication failed; pass the right --token',
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'explains a 1013 close as a busy server',
    async () => {
      holder = await connect(`${t.wsUrl}?character=plain`, {
        headers: { authorization: 'Bearer open-sesame' },
      });
      await holder.next('session.created');
      const r = await runChat(['-c', 'plain', '--url', t.wsUrl, '--token', 'open-sesame'], ['Hi']);
      expect(r.code).toBe(1);
      // The reason is the server's own words; the explanation after it is the client's.
      expect(r.stderr).toMatch(/^connection closed \(1013 server full.*\): the server is busy: /);
    },
    CLI_TEST_TIMEOUT_MS,
  );
});

describe('npm run chat without a server', () => {
  it(
    'exits 1 with one clear line when the connection is refused',
    async () => {
      const port = await closedPort();
      const r = await runChat(['--url', `127.0.0.1:${port}`], ['Hello there!']);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(
        `could not connect to ws://127.0.0.1:${port}/v1/realtime: connect ECONNREFUSED ` +
          `127.0.0.1:${port} (is the server running? Start it with npm start)\n`,
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'exits 2 naming a bad flag, the nearest one and the flags there are, without connecting',
    async () => {
      const r = await runChat(['--charcter', 'narrator']);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(
        "chat: Unknown option '--charcter'; did you mean --character?\n" +
          'Flags: --character, --url, --token, --no-color, --voice, --voice-out, --wav, --mic, --help.\n' +
          'Run npm run chat -- --help for the options.\n',
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'prints the usage for --help and exits 0',
    async () => {
      const r = await runChat(['--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('Usage: npm run chat -- [options]');
      expect(r.stdout).toContain('--token T');
      for (const flag of ['--voice ', '--voice-out FILE', '--wav FILE', '--mic ']) {
        expect(r.stdout).toContain(flag);
      }
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'exits 2 naming what to install when --mic finds no recorder, without connecting',
    async () => {
      const port = await closedPort();
      const r = await runChat(['--url', `127.0.0.1:${port}`, '--mic'], [], { PATH: scratch });
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(
        'chat: --mic needs a recorder on PATH and none was found (looked for arecord, parec, ' +
          'pw-record, rec). Install one, e.g. apt-get install alsa-utils (arecord), or use --wav FILE.\n',
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'exits 2 naming the file when --wav cannot be read, without connecting',
    async () => {
      const port = await closedPort();
      const missing = join(scratch, 'nope.wav');
      const r = await runChat(['--url', `127.0.0.1:${port}`, '--wav', missing]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(`^chat: --wav ${missing}: cannot read the file \\(ENOENT.*\\)\\.\\n$`),
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );
});
