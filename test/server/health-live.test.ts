/**
 * `/health/live` for liveness probes: it answers while `/health` is still
 * waiting on an LLM that accepts connections and never answers (a probe
 * with a 1 s timeout on `/health` would fail, and a kubelet restart every
 * pod, though the fault is the LLM's).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('GET /health/live with an LLM that never answers', () => {
  let llm: Server;
  const held: Socket[] = [];
  let t: TestServer;

  beforeAll(async () => {
    llm = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => llm.listen(0, '127.0.0.1', resolve));
    const port = (llm.address() as { port: number }).port;
    // No cached probe: each /health asks the LLM anew.
    t = await startTestServer({
      env: { LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, HEALTH_CACHE_MS: '0' },
    });
  });
  afterAll(async () => {
    await t?.close();
    for (const s of held) s.destroy();
    await new Promise((resolve) => llm?.close(resolve));
  });

  it('answers 200 while /health still waits on the LLM', async () => {
    let healthDone = false;
    const asked = held.length;
    const health = request(`${t.url}/health`).then((r) => {
      healthDone = true;
      return r;
    });
    // /health's probe has reached the LLM (which holds it) before /health/live is asked.
    while (held.length === asked) await new Promise((r) => setImmediate(r));
    const live = await request(`${t.url}/health/live`);
    expect(live.status).toBe(200);
    expect(live.json()).toEqual({ live: true });
    expect(live.headers['cache-control']).toBe('no-store');
    expect(healthDone).toBe(false);
    const answer = await health;
    expect(answer.status).toBe(200);
    expect(answer.json<{ llm: { ok: boolean } }>().llm.ok).toBe(false);
  });
});
