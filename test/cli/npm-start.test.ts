import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { availableParallelism } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { STANDALONE_ENV } from '../helpers/files.js';

let started: ChildProcess | undefined;
afterEach(() => {
  // npm runs in a process group of its own: whatever it left behind goes with it.
  if (started?.pid !== undefined) {
    try {
      process.kill(-started.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  started = undefined;
});

/** The line saying the server (or, with more than one worker, every worker) listens, with its URL. */
const READY =
  availableParallelism() > 1
    ? /"url":"http:\/\/127\.0\.0\.1:(\d+)".*"msg":"workers ready"/
    : /"url":"http:\/\/127\.0\.0\.1:(\d+)".*"msg":"server listening"/;

/** Whether something accepts connections on the port. */
function serving(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('npm start as a process', () => {
  it('passes SIGTERM sent to npm on to the server, which drains and stops', async () => {
    const npm = await startNpm();
    process.kill(npm.pid, 'SIGTERM');
    await npm.ended;
    expect(npm.stdout()).toContain('"msg":"shutting down"');
    expect(npm.stdout()).toContain('"msg":"server stopped"');
    expect(await serving(npm.port)).toBe(false);
  });

  it('drains on Ctrl+C, where npm and the server both get SIGINT and npm passes its own on', async () => {
    const npm = await startNpm();
    // A terminal's Ctrl+C: the whole process group.
    process.kill(-npm.pid, 'SIGINT');
    await npm.ended;
    const out = npm.stdout();
    expect(out).not.toContain('second signal');
    // Every worker (one per core by default) drained and stopped.
    expect(out.split('"msg":"server stopped"').length - 1).toBe(availableParallelism());
    expect(await serving(npm.port)).toBe(false);
  });
});

/** `npm start` in a process group of its own, once it serves. */
async function startNpm(): Promise<{
  pid: number;
  port: number;
  stdout: () => string;
  ended: Promise<void>;
}> {
  const child = spawn('npm', ['start', '--silent'], {
    env: { ...process.env, ...STANDALONE_ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  started = child;
  let stdout = '';
  // 'end' comes only when every process holding the pipe (npm, a shell, the server) is gone.
  const ended = new Promise<void>((resolve) => child.stdout!.on('end', resolve));
  const port = await new Promise<number>((resolve) => {
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      // With one worker per core (the default), once every one listens.
      const m = READY.exec(stdout);
      if (m) resolve(Number(m[1]));
    });
  });
  expect(await serving(port)).toBe(true);
  return { pid: child.pid!, port, stdout: () => stdout, ended };
}
