import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { character, characterDir } from '../helpers/characters.js';

/**
 * How `npm start` runs the server: Node itself, with tsx as a loader. Not the
 * `tsx` command, which stands between the signal and the server: it gives the
 * server 30 ms to acknowledge a relayed SIGTERM and then kills it with SIGKILL
 * (exit 143), so on a busy machine a drain would never happen.
 */
const NODE_ARGS = ['--import', 'tsx'];

/** Runs a CLI entry point; resolves on exit with everything it printed. */
function run(
  args: string[],
  env: Record<string, string>,
  onStdout?: (text: string, kill: (signal: NodeJS.Signals) => void) => void,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...NODE_ARGS, ...args], {
      env: { ...process.env, ...env },
      stdio: 'pipe',
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      onStdout?.(stdout, (signal) => child.kill(signal));
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A server on a free port that logs JSON lines, with an LLM nobody answers at and no watcher. */
const SERVING = {
  PORT: '0',
  LOG_LEVEL: 'info',
  LLM_BASE_URL: 'http://127.0.0.1:9/v1',
  CHARACTERS_WATCH: '0',
};

describe('npm start', () => {
  it('exits 1 with one message naming every bad setting', async () => {
    const r = await run(['src/cli/start.ts'], { PORT: 'eighty', LOG_LEVEL: 'loud' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('troupe: invalid configuration:');
    expect(r.stderr).toContain('PORT: expected a whole number from 0 to 65535, got "eighty"');
    expect(r.stderr).toContain('LOG_LEVEL: expected one of fatal, error, warn, info');
  });

  it('serves, then stops on SIGTERM with exit code 0', async () => {
    let signalled = false;
    const r = await run(
      ['src/cli/start.ts'],
      {
        // One process: the workers have tests of their own (below, and test/server/cluster.test.ts).
        WORKERS: '1',
        ...SERVING,
      },
      (stdout, kill) => {
        if (!signalled && stdout.includes('"msg":"server listening"')) {
          signalled = true;
          kill('SIGTERM');
        }
      },
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('"msg":"server stopped"');
  });

  it('ignores SIGUSR1 (no debugger opens), and drains on SIGHUP with exit code 0', async () => {
    let step = 0;
    const r = await run(
      ['src/cli/start.ts'],
      {
        WORKERS: '1',
        ...SERVING,
      },
      (stdout, kill) => {
        if (step === 0 && stdout.includes('"msg":"server listening"')) {
          step = 1;
          kill('SIGUSR1');
        } else if (step === 1 && stdout.includes('SIGUSR1 ignored')) {
          step = 2;
          kill('SIGHUP');
        }
      },
    );
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain('Debugger listening');
    expect(r.stdout).toContain('"signal":"SIGHUP","msg":"signal received"');
    expect(r.stdout).toContain('"msg":"server stopped"');
  });

  it('takes SIGTERM then SIGINT at once as one request: a drain, not a kill', async () => {
    let signalled = false;
    const r = await run(
      ['src/cli/start.ts'],
      {
        WORKERS: '2',
        ...SERVING,
      },
      (stdout, kill) => {
        if (!signalled && stdout.includes('"msg":"workers ready"')) {
          signalled = true;
          kill('SIGTERM');
          kill('SIGINT');
        }
      },
    );
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).not.toContain('second signal');
    expect(r.stdout).toContain('"msg":"all workers stopped"');
  });

  it('runs one worker per core by default, and stops them all on SIGTERM with exit code 0', async () => {
    const cores = availableParallelism();
    // Every worker's readiness, not a time: the primary says so once all of them listen.
    const ready = cores > 1 ? '"msg":"workers ready"' : '"msg":"server listening"';
    let signalled = false;
    const r = await run(
      ['src/cli/start.ts'],
      {
        ...SERVING,
      },
      (stdout, kill) => {
        if (!signalled && stdout.includes(ready)) {
          signalled = true;
          kill('SIGTERM');
        }
      },
    );
    expect(r.code).toBe(0);
    if (cores > 1) {
      expect(r.stdout).toContain(`"workers":${cores}`);
      expect(r.stdout).toContain('"msg":"all workers stopped"');
    }
    // Everything the instance printed, when a worker did not say it stopped.
    expect(r.stdout.split('"msg":"server stopped"').length - 1, r.stdout + r.stderr).toBe(cores);
  });
});

describe('npm run demo', () => {
  it('prints the web client URL and chat command, and every seed character completes its lines', async () => {
    // TOOL_TIMEOUT_MS: the tools' 100 ms default is a latency goal a busy machine can miss.
    // WORKERS is npm start's: the demo, one process, says so and runs.
    const simPort = await freePort();
    const r = await run(['src/cli/demo.ts', '--check', '--sim-port', String(simPort)], {
      PORT: '0',
      TOOL_TIMEOUT_MS: '60000',
      WORKERS: '2',
    });
    expect(r.stderr).toBe('demo: WORKERS=2 applies to npm start; the demo runs one process.\n');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/web client {3}http:\/\/127\.0\.0\.1:\d+\//);
    // Where to wire a client of one's own, and the simulated LLM another server can use.
    expect(r.stdout).toMatch(/realtime {5}ws:\/\/127\.0\.0\.1:\d+\/v1\/realtime\n/);
    expect(r.stdout).toContain(`simulator    http://127.0.0.1:${simPort}/v1 `);
    expect(r.stdout).toMatch(
      /npm run chat -- --character weather --url ws:\/\/127\.0\.0\.1:\d+\/v1\/realtime/,
    );
    for (const tool of [
      'get_current_weather',
      'log_story_event',
      'sayHello',
      'start_quiz',
      'score',
    ]) {
      expect(r.stdout).toContain(`[tool] ${tool}`);
    }
    expect(r.stdout).toContain('demo check: every response completed');
  });

  it('talks once to each character that is not a seed one, and exits 1 when a character did not load', async () => {
    const chars = await characterDir({
      'shop.ts': character({
        name: 'Shop',
        extra: `tools: [defineTool({ name: 'view_cart', description: 'Show the cart', parameters: z.object({}), handler: () => ({ items: 2 }) })],`,
      }),
      'chatty.ts': character({ name: 'Chatty' }),
      'broken.ts': character({ extra: 'maxToolRounds: 0,' }),
    });
    try {
      const r = await run(['src/cli/demo.ts', '--check'], {
        PORT: '0',
        CHARACTERS_DIR: chars.dir,
        TOOL_TIMEOUT_MS: '60000',
      });
      expect(r.stdout).toContain('2 ok, 1 with errors');
      expect(r.stdout).toContain('you: Please use view_cart.');
      expect(r.stdout).toContain('[tool] view_cart');
      expect(r.stdout).toContain('you: Hello there!');
      expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
        'demo check: failed: 1 character with errors (listed above); every response completed',
      );
      expect(r.code).toBe(1);
    } finally {
      await chars.cleanup();
    }
  });

  it("says why the simulator's port cannot be had, before serving", async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = (taken.address() as AddressInfo).port;
    try {
      const r = await run(['src/cli/demo.ts', `--sim-port=${port}`], { PORT: '0' });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `demo: the simulator's port ${port} is taken; choose another with --sim-port.\n`,
      );
    } finally {
      taken.close();
    }
    const bad = await run(['src/cli/demo.ts', '--sim-port', '70000'], { PORT: '0' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('demo: --sim-port: expected a port from 0 to 65535, got "70000".\n');
  });
});

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
