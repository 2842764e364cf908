/**
 * The container's health check (src/cli/healthcheck.mjs, deploy/Dockerfile's
 * HEALTHCHECK), run as the image runs it, against a server on plain HTTP
 * and one on TLS: with TLS the check must speak https to it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTlsTestServer } from '../helpers/tls-server.js';
import { freePort } from './processes.js';

/** Runs the check with `env`: its exit code and what it said. */
async function check(env: Record<string, string>): Promise<{ code: number | null; said: string }> {
  const child = spawn(process.execPath, ['src/cli/healthcheck.mjs'], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let said = '';
  child.stdout.on('data', (d: Buffer) => (said += d.toString()));
  child.stderr.on('data', (d: Buffer) => (said += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, said };
}

describe('the container health check', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it('passes against a plain server on PORT, as the image sets HOST', async () => {
    const t = await startTestServer();
    servers.push(t);
    const port = new URL(t.url).port;
    expect(await check({ PORT: port, HOST: '0.0.0.0' })).toEqual({ code: 0, said: '' });
  });

  it('passes against a TLS server (TLS_CERT set), whose certificate names another host', async () => {
    const t = await startTlsTestServer();
    servers.push(t);
    const port = new URL(t.url).port;
    expect(await check({ PORT: port, TLS_CERT: 'set' })).toEqual({ code: 0, said: '' });
  });

  it('fails, saying why, where nothing listens', async () => {
    const { code, said } = await check({ PORT: String(await freePort()) });
    expect(code).toBe(1);
    expect(said).toMatch(/^health check: connect ECONNREFUSED/);
  });
});
