import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEB_DIR } from '../../src/server/http-routes.js';
import {
  metricValue,
  rawRequest,
  rawUpgrade,
  request,
  scrape,
  statusLine,
} from '../helpers/http.js';
import { connect } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

/** A loopback port nothing listens on: taken from the OS, then released. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

const modelProbes = (t: TestServer) =>
  t.simulator.requests.filter((r) => r.method === 'GET' && r.path === '/v1/models').length;

describe('HTTP routes', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ env: { HEALTH_CACHE_MS: '60000' } });
  });
  afterAll(() => t?.close());

  it('says ok on GET /health, with the LLM reachable', async () => {
    const res = await request(`${t.url}/health`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json()).toMatchObject({
      status: 'ok',
      sessions: { active: 0, max: 1000 },
      characters: { loaded: expect.any(Number), errors: 0 },
      // LLM_MODEL unset: the one model the LLM offers, picked when the probe found it up.
      llm: { ok: true, base_url: t.simulator.url, model: 'sim-model' },
      stt: null,
      tts: null,
    });
  });

  it('reuses its LLM probe for HEALTH_CACHE_MS', async () => {
    // One probe for this server's whole life so far (HEALTH_CACHE_MS is a minute),
    // and one look at the models when the client connected to pick one.
    expect(modelProbes(t)).toBe(2);
    await request(`${t.url}/health`);
    await request(`${t.url}/health`);
    await request(`${t.url}/health`);
    expect(modelProbes(t)).toBe(2);
  });

  it('exports Prometheus text on GET /metrics: Troupe, Unmute and process metrics', async () => {
    const res = await request(`${t.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    for (const name of [
      'troupe_sessions_active',
      'troupe_tool_calls_total',
      'character_tool_calls_total',
      'character_tool_errors_total',
      'character_tool_latency_seconds',
      'troupe_process_cpu_seconds_total',
      'troupe_process_resident_memory_bytes',
    ]) {
      expect(res.body).toContain(`# TYPE ${name} `);
    }
    expect(metricValue(res.body, 'troupe_sessions_active')).toBe(0);
    // Unmute's error counter starts at zero for every error type, so rates work from the start.
    expect(metricValue(res.body, 'character_tool_errors_total', { error_type: 'timeout' })).toBe(0);
  });

  it('lists the characters on GET /v1/characters with their tool names', async () => {
    const res = await request(`${t.url}/v1/characters`);
    expect(res.status).toBe(200);
    const body = res.json<{ characters: Array<{ id: string; tools: string[] }>; errors: number }>();
    expect(body.errors).toBe(0);
    // Each seed character with its tools; an author's own characters may be listed too.
    expect(Object.fromEntries(body.characters.map((c) => [c.id, c.tools]))).toMatchObject({
      hello: ['sayHello'],
      narrator: ['log_story_event'],
      plain: [],
      quizmaster: expect.arrayContaining(['start_quiz', 'answer', 'score']),
      weather: ['get_current_weather', 'get_n_day_weather_forecast'],
    });
    const health = (await request(`${t.url}/health`)).json<{ characters: { loaded: number } }>();
    expect(health.characters.loaded).toBe(body.characters.length);
  });

  it.runIf(existsSync(`${WEB_DIR}index.html`))('serves the web client at GET /', async () => {
    const res = await request(`${t.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.body).toMatch(/<html/i);
    const head = await request(`${t.url}/`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
  });

  it('does not serve files outside the web folder', async () => {
    for (const path of [
      '/../package.json',
      '/%2e%2e/package.json',
      '/..%2fpackage.json',
      '/%2e%2e%2fpackage.json',
      '/.env',
      '/../../etc/passwd',
      '/%2F..%2F..%2Fpackage.json',
    ]) {
      const res = await request(`${t.url}${path}`);
      expect(res.status, path).toBe(404);
      expect(res.body, path).not.toContain('"name": "troupe"');
      expect(res.json(), path).toHaveProperty('error.message');
    }
  });

  it('answers 405 to other methods', async () => {
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await request(`${t.url}/health`, { method });
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('GET, HEAD');
      expect(res.json()).toHaveProperty('error.message');
    }
  });

  it("tells a POST to OpenAI's WebRTC and session paths what to use instead", async () => {
    // The Agents SDK's default transport in a browser posts its SDP offer here.
    for (const path of ['/v1/realtime/calls', '/v1/realtime', '/openai/v1/realtime/calls']) {
      const res = await request(`${t.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/sdp' },
      });
      expect(res.status, path).toBe(501);
      expect(res.json<{ error: { message: string } }>().error.message, path).toMatch(
        /over WebSocket only; WebRTC calls .* are not served: connect a WebSocket to \/v1\/realtime/,
      );
    }
    const sessions = await request(`${t.url}/v1/realtime/sessions`, { method: 'POST' });
    expect(sessions.status).toBe(501);
    expect(sessions.json<{ error: { message: string } }>().error.message).toMatch(
      /makes no sessions over HTTP .* mint a client secret \(POST \/v1\/realtime\/client_secrets\)/,
    );
    // Without AUTH_TOKEN no key is checked: minting one is refused, saying so.
    const mint = await request(`${t.url}/v1/realtime/client_secrets`, { method: 'POST' });
    expect(mint.status).toBe(400);
    expect(mint.json()).toMatchObject({ error: { code: 'no_auth_token' } });
    // A page may read the answer: its preflight lets the POST through.
    const preflight = await request(`${t.url}/v1/realtime/calls`, {
      method: 'OPTIONS',
      headers: {
        origin: t.url,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-methods']).toBe('GET, HEAD, POST');
  });

  it('answers an unknown path with a JSON 404 that lists the routes', async () => {
    const res = await request(`${t.url}/nope`);
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json<{ error: { message: string } }>().error.message).toContain('/v1/realtime');
  });

  it('refuses a WebSocket on a path other than /v1/realtime', async () => {
    await expect(connect(`${t.url.replace('http', 'ws')}/v1/other`)).rejects.toThrow(/404/);
    await expect(connect(`${t.url.replace('http', 'ws')}/`)).rejects.toThrow(/404/);
  });

  it('sends unknown_character and closes with 1008 for ?character=nope', async () => {
    const c = await connect(`${t.wsUrl}?character=nope`);
    const error = await c.next('error');
    expect(error.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'unknown_character',
      param: 'character',
    });
    expect((error.error as { message: string }).message).toContain('weather');
    expect((await within(c.closed, 'the close after unknown_character')).code).toBe(1008);
  });

  it('sends unknown_variant for ?variant=zzz and invalid_dialect for ?dialect=xyz', async () => {
    const variant = await connect(`${t.wsUrl}?character=hello&variant=zzz`);
    expect((await variant.next('error')).error).toMatchObject({ code: 'unknown_variant' });
    expect((await within(variant.closed, 'the close after unknown_variant')).code).toBe(1008);

    const dialect = await connect(`${t.wsUrl}?dialect=xyz`);
    expect((await dialect.next('error')).error).toMatchObject({ code: 'invalid_dialect' });
    expect((await within(dialect.closed, 'the close after invalid_dialect')).code).toBe(1008);

    const text = await scrape(t.url);
    expect(metricValue(text, 'troupe_protocol_errors_total', { code: 'unknown_variant' })).toBe(1);
    expect(metricValue(text, 'troupe_protocol_errors_total', { code: 'invalid_dialect' })).toBe(1);
  });

  it('answers 400 to a request target that is not a URL, and keeps serving', async () => {
    // Node's parser lets absolute-form targets like these through; URL() does not.
    for (const target of ['http://[', 'http://a:b/', 'http://x:65536/health']) {
      const socket = await rawRequest(t.server.port, `GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(await within(statusLine(socket), `the answer to GET ${target}`), target).toBe(
        'HTTP/1.1 400 Bad Request',
      );
      socket.destroy();
    }
    expect((await request(`${t.url}/health`)).status).toBe(200);
  });

  it('answers a request Node cannot parse with 400, and oversized headers with 431', async () => {
    const bad = await rawRequest(t.server.port, 'GET /a b HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await within(statusLine(bad), 'the answer to a bad request line')).toBe(
      'HTTP/1.1 400 Bad Request',
    );
    bad.destroy();
    const big = await rawRequest(
      t.server.port,
      `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    expect(await within(statusLine(big), 'the answer to oversized headers')).toBe(
      'HTTP/1.1 431 Request Header Fields Too Large',
    );
    big.destroy();
  });

  it('answers 400 to a WebSocket upgrade whose target is not a URL, and keeps serving', async () => {
    const socket = await rawUpgrade(t.server.port, 'http://[');
    expect(await within(statusLine(socket), 'the answer to the upgrade')).toBe(
      'HTTP/1.1 400 Bad Request',
    );
    socket.destroy();
    const c = await connect(t.wsUrl);
    await c.next('session.created');
    await c.close();
  });

  it('survives clients that reset the connection while they are refused a WebSocket', async () => {
    // Reset right after the request: the server's 404 meets a dead socket.
    for (let i = 0; i < 20; i++) {
      const socket = await rawUpgrade(t.server.port, '/not-realtime');
      socket.resetAndDestroy();
    }
    // And once the 404 has been read.
    const socket = await rawUpgrade(t.server.port, '/not-realtime');
    expect(await within(statusLine(socket), 'the 404 answer')).toBe('HTTP/1.1 404 Not Found');
    socket.resetAndDestroy();
    expect((await request(`${t.url}/health`)).status).toBe(200);
  });
});

describe('a WebSocket refused on another path', () => {
  it('does not hold up shutdown when the client never closes its end', async () => {
    const t = await startTestServer();
    const socket = await rawUpgrade(t.server.port, '/not-realtime');
    try {
      expect(await within(statusLine(socket), 'the 404 answer')).toBe('HTTP/1.1 404 Not Found');
      // Our side stays open (allowHalfOpen): the server must hang up by itself,
      // or server.close() would wait for this socket forever.
      await within(t.server.close(), 'shutdown with a half-open refused socket');
    } finally {
      socket.destroy();
      await t.close();
    }
  });
});

describe('GET /health with the LLM down', () => {
  let t: TestServer;

  beforeAll(async () => {
    const port = await closedPort();
    t = await startTestServer({
      env: { LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, HEALTH_CACHE_MS: '0' },
    });
  });
  afterAll(() => t?.close());

  it('says degraded, with the LLM not ok and why', async () => {
    const res = await request(`${t.url}/health`);
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({
      status: 'degraded',
      llm: { ok: false, latency_ms: null, error: 'ECONNREFUSED' },
    });
  });
});

describe('GET /health without a cache', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ env: { HEALTH_CACHE_MS: '0' } });
  });
  afterAll(() => t?.close());

  it('probes the LLM on every request', async () => {
    await request(`${t.url}/health`);
    // The first probe's one look at the models, to pick one, comes with it.
    const first = modelProbes(t);
    await request(`${t.url}/health`);
    await request(`${t.url}/health`);
    expect(modelProbes(t)).toBe(first + 2);
  });
});
