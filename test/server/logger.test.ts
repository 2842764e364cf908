import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/server/logger.js';

let child: ChildProcess | undefined;
afterEach(() => {
  child?.kill('SIGKILL');
  child = undefined;
});

describe('the server logger', () => {
  it('lets the process exit after SIGTERM while its stdout reader never reads', async () => {
    const proc = spawn('node', ['--import', 'tsx', 'test/server/fixtures/log-flood.ts'], {
      // stdout is a pipe nobody reads: it fills after 64 KB.
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    await new Promise<void>((resolve) =>
      proc.stderr.on('data', (d: Buffer) => d.toString().includes('logged') && resolve()),
    );
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('writes every line before a process exits right after logging (logsWritten)', async () => {
    const run = () =>
      new Promise<string>((resolve) => {
        const proc = spawn('node', ['--import', 'tsx', 'test/server/fixtures/log-exit.ts'], {
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let out = '';
        proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
        proc.on('close', () => resolve(out));
      });
    for (const out of await Promise.all([run(), run(), run()])) {
      expect(out.split('"msg":"burst line"').length - 1).toBe(200);
      expect(out).toContain('"msg":"last line"');
    }
  });

  it('writes the lines of a server that logs and goes quiet (they leave in batches, not at exit)', async () => {
    const proc = spawn('node', ['--import', 'tsx', 'test/server/fixtures/log-exit.ts', '--stay'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child = proc;
    let out = '';
    await new Promise<void>((resolve) =>
      proc.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('"msg":"last line"')) resolve();
      }),
    );
    expect(out.split('"msg":"burst line"').length - 1).toBe(200);
  });

  it('writes the lines still waiting for their batch when the process exits', async () => {
    const proc = spawn(
      'node',
      ['--import', 'tsx', 'test/server/fixtures/log-exit.ts', '--lines', '20', '--no-wait'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    child = proc;
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((resolve) => proc.on('close', resolve));
    expect(out.split('"msg":"burst line"').length - 1).toBe(20);
    expect(out).toContain('"msg":"last line"');
  });

  it('redacts credentials whatever field a caller puts them in', () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'info', content: false }, { write: (l) => lines.push(l) });
    log.info({ apiKey: 'sk-secret-1', headers: { authorization: 'Bearer x' } }, 'configured');
    expect(lines.join('')).not.toContain('sk-secret-1');
    expect(lines.join('')).not.toContain('Bearer x');
  });
});
