/**
 * A built Unmute frontend served by Troupe at /unmute (UNMUTE_FRONTEND_DIR):
 * the page, its build assets and its public files, beside the web client's
 * own files, with nothing outside the build reachable. The build here is a
 * stand-in with the layout `next build` makes.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unmuteFrontendFile } from '../../src/server/unmute-frontend.js';
import { request } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('a built Unmute frontend served by Troupe', () => {
  let t: TestServer;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-unmute-build-'));
    const file = async (path: string, body: string) => {
      await mkdir(join(dir, path, '..'), { recursive: true });
      await writeFile(join(dir, path), body);
    };
    await file('.next/server/app/index.html', '<html>unmute page</html>');
    await file('.next/server/app/favicon.ico.body', 'icon');
    await file('.next/static/chunks/app/page-abc.js', 'console.log(1)');
    await file('public/decoderWorker.min.js', 'worker');
    await file('secret.txt', 'not served');
    t = await startTestServer({ env: { UNMUTE_FRONTEND_DIR: dir } });
  });
  afterAll(async () => {
    await t?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('serves its page at /unmute, its build assets and its public files', async () => {
    const page = await request(`${t.url}/unmute`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.body).toContain('unmute page');
    const chunk = await request(`${t.url}/_next/static/chunks/app/page-abc.js`);
    expect(chunk.status).toBe(200);
    expect(chunk.headers['cache-control']).toMatch(/immutable/);
    expect((await request(`${t.url}/decoderWorker.min.js`)).body).toBe('worker');
    expect((await request(`${t.url}/favicon.ico`)).headers['content-type']).toBe('image/x-icon');
  });

  it("keeps the web client's own files and page at /", async () => {
    expect((await request(`${t.url}/`)).body).not.toContain('unmute page');
    expect((await request(`${t.url}/app.js`)).status).toBe(200);
  });

  it('answers 404 for anything outside the build', async () => {
    for (const path of [
      '/secret.txt',
      '/_next/static/../../secret.txt',
      '/_next/static/%2e%2e/secret.txt',
      '/_next/static/chunks/missing.js',
    ]) {
      expect((await request(`${t.url}${path}`)).status, path).toBe(404);
    }
    expect(unmuteFrontendFile('/b', '/_next/static/../x.js')).toBeUndefined();
    expect(unmuteFrontendFile('/b', '/_next/static/.env')).toBeUndefined();
    expect(unmuteFrontendFile('/b', '/a/b.js')).toBeUndefined();
  });
});
