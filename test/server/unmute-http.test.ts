import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCharacters, type CharacterRegistry } from '../../src/characters/registry.js';
import { createMetrics } from '../../src/metrics/index.js';
import { createHttpHandler, type RouteContext } from '../../src/server/http-routes.js';
import type { ServerLlm } from '../../src/server/llm.js';
import type { ProviderHealth, SttProvider, TtsProvider } from '../../src/voice/types.js';
import { request } from '../helpers/http.js';

/** A speech engine that only answers health checks (as STT or TTS), counting them. */
type HealthOnly = SttProvider & TtsProvider & { probes: number };

function fakeProvider(name: string, answer: () => Promise<ProviderHealth>): HealthOnly {
  const provider: HealthOnly = {
    name,
    sampleRate: 24_000,
    continuous: false,
    reportsPauses: false,
    probes: 0,
    open(): never {
      throw new Error(`${name}: a health-only fake cannot open streams`);
    },
    health() {
      provider.probes++;
      return answer();
    },
    close: () => Promise.resolve(),
  };
  return provider;
}

const up = () => Promise.resolve({ ok: true, detail: 'model loaded' });

/** The LLM as the routes see it: reachable unless told otherwise. */
function fakeLlm(ok = true): ServerLlm {
  return {
    get: () => Promise.reject(new Error('no LLM in HTTP tests')),
    health: () =>
      Promise.resolve({
        ok,
        base_url: 'http://127.0.0.1:1/v1',
        model: 'sim',
        latency_ms: 1,
        checked_at: new Date(0).toISOString(),
      }),
  };
}

let registry: CharacterRegistry;
const servers: Server[] = [];

beforeAll(async () => {
  registry = await loadCharacters({ dir: 'characters', mcp: false });
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  await registry?.close();
});

/** Serves the routes on a loopback port with `extra` context; resolves with the base URL. */
async function serve(extra: Partial<RouteContext> = {}): Promise<string> {
  const server = createServer(
    createHttpHandler({
      registry,
      metrics: createMetrics({ processMetrics: false }),
      llm: fakeLlm(),
      sessions: () => ({ active: 0, max: 10 }),
      startedAt: performance.now(),
      shuttingDown: () => false,
      ...extra,
    }),
  );
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('GET /v1/voices', () => {
  it("lists every character as a voice of Unmute's list, its id as path_on_server", async () => {
    const res = await request(`${await serve()}/v1/voices`);
    expect(res.status).toBe(200);
    const voices = res.json<Array<Record<string, unknown>>>();
    expect(Array.isArray(voices)).toBe(true);
    const ids = registry.list().map((c) => c.id);
    expect(voices.map((v) => (v.source as { path_on_server: string }).path_on_server)).toEqual(ids);
    const weather = voices.find((v) => v.name === 'Weather');
    expect(weather).toEqual({
      name: 'Weather',
      good: true,
      instructions: {
        type: 'constant',
        text: registry.get('weather')!.description,
        // The character's instructions say `language: 'en'`.
        language: 'en',
        character: 'weather',
      },
      source: {
        source_type: 'file',
        path_on_server: 'weather',
        description: registry.get('weather')!.description,
      },
    });
  });

  it('gives names the frontend can tell apart, and at least one English voice to start on', async () => {
    const voices = (await request(`${await serve()}/v1/voices`)).json<
      Array<{ name: string; instructions: { language?: string } }>
    >();
    expect(new Set(voices.map((v) => v.name)).size).toBe(voices.length);
    // Unmute's configurator starts on a random voice whose language is absent or "en".
    expect(voices.some((v) => (v.instructions.language ?? 'en') === 'en')).toBe(true);
  });
});

describe('GET /v1/health', () => {
  it('says not ok, with speech down, when no speech engine is configured', async () => {
    const res = await request(`${await serve()}/v1/health`);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({
      tts_up: false,
      stt_up: false,
      llm_up: true,
      voice_cloning_up: false,
      ok: false,
    });
  });

  it('says ok when STT, TTS and the LLM are all up', async () => {
    const base = await serve({
      speech: { stt: fakeProvider('fake-stt', up), tts: fakeProvider('fake-tts', up) },
    });
    expect((await request(`${base}/v1/health`)).json()).toEqual({
      tts_up: true,
      stt_up: true,
      llm_up: true,
      voice_cloning_up: false,
      ok: true,
    });
  });

  it('says not ok when one engine is down, throws, or the LLM is unreachable', async () => {
    const down = await serve({
      speech: {
        stt: fakeProvider('fake-stt', up),
        tts: fakeProvider('fake-tts', () => Promise.resolve({ ok: false, detail: 'refused' })),
      },
    });
    expect((await request(`${down}/v1/health`)).json()).toMatchObject({
      tts_up: false,
      stt_up: true,
      ok: false,
    });
    const throwing = await serve({
      speech: {
        stt: fakeProvider('fake-stt', () => Promise.reject(new Error('socket hang up'))),
        tts: fakeProvider('fake-tts', up),
      },
    });
    const res = await request(`${throwing}/v1/health`);
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ stt_up: false, tts_up: true, ok: false });
    const noLlm = await serve({
      llm: fakeLlm(false),
      speech: { stt: fakeProvider('fake-stt', up), tts: fakeProvider('fake-tts', up) },
    });
    expect((await request(`${noLlm}/v1/health`)).json()).toMatchObject({
      llm_up: false,
      ok: false,
    });
  });

  it('says not ok while the server shuts down, so the frontend does not connect', async () => {
    const base = await serve({
      shuttingDown: () => true,
      speech: { stt: fakeProvider('fake-stt', up), tts: fakeProvider('fake-tts', up) },
    });
    expect((await request(`${base}/v1/health`)).json()).toMatchObject({ ok: false });
  });
});

describe('GET /health with speech engines', () => {
  it('shows each configured engine as {ok, provider, detail}, and null when not configured', async () => {
    const base = await serve({ speech: { stt: fakeProvider('pocketsphinx', up), tts: null } });
    const body = (await request(`${base}/health`)).json();
    expect(body).toMatchObject({
      status: 'ok',
      stt: { ok: true, provider: 'pocketsphinx', detail: 'model loaded' },
      tts: null,
    });
  });

  it('is degraded when a configured engine is down, and says why', async () => {
    const base = await serve({
      speech: {
        stt: fakeProvider('kyutai', () => Promise.reject(new Error('ECONNREFUSED'))),
        tts: fakeProvider('espeak', up),
      },
    });
    const body = (await request(`${base}/health`)).json<{
      status: string;
      stt: { ok: boolean; provider: string; detail: string };
    }>();
    expect(body.status).toBe('degraded');
    expect(body.stt).toMatchObject({ ok: false, provider: 'kyutai' });
    expect(body.stt.detail).toContain('ECONNREFUSED');
  });

  it('reuses an engine probe for healthCacheMs, across /health and /v1/health', async () => {
    const stt = fakeProvider('fake-stt', up);
    const tts = fakeProvider('fake-tts', up);
    const base = await serve({ speech: { stt, tts }, healthCacheMs: 60_000 });
    for (const path of ['/health', '/v1/health', '/health', '/v1/health']) {
      await request(`${base}${path}`);
    }
    expect([stt.probes, tts.probes]).toEqual([1, 1]);

    const fresh = fakeProvider('fake-stt', up);
    const uncached = await serve({ speech: { stt: fresh, tts: null }, healthCacheMs: 0 });
    await request(`${uncached}/health`);
    await request(`${uncached}/health`);
    expect(fresh.probes).toBe(2);
  });

  it('says an engine that never answers is down after the probe timeout, without a 500', async () => {
    const base = await serve({
      speech: { stt: fakeProvider('stuck', () => new Promise<never>(() => {})), tts: null },
    });
    const res = await request(`${base}/health`);
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({
      status: 'degraded',
      stt: { ok: false, provider: 'stuck', detail: expect.stringMatching(/no answer within/) },
    });
  });
});

describe('CORS for pages of other origins', () => {
  const UNMUTE = 'http://localhost:3000';

  it('lets an allowed origin read /v1/health and /v1/voices', async () => {
    const base = await serve({ allowedOrigins: [UNMUTE] });
    for (const path of ['/v1/health', '/v1/voices', '/health']) {
      const res = await request(`${base}${path}`, { headers: { origin: UNMUTE } });
      expect(res.status, path).toBe(200);
      expect(res.headers['access-control-allow-origin'], path).toBe(UNMUTE);
      expect(res.headers.vary, path).toBe('Origin');
    }
  });

  it('gives other origins no Access-Control-Allow-Origin, so their pages cannot read', async () => {
    const base = await serve({ allowedOrigins: [UNMUTE] });
    const res = await request(`${base}/v1/voices`, { headers: { origin: 'https://evil.example' } });
    expect(res.status).toBe(200);
    expect(res.headers).not.toHaveProperty('access-control-allow-origin');
    expect(res.headers.vary).toBe('Origin');
  });

  it('follows the realtime origin rules: "*" allows any, an empty list only the same origin', async () => {
    const any = await serve({ allowedOrigins: '*' });
    const star = await request(`${any}/v1/health`, { headers: { origin: 'https://a.example' } });
    expect(star.headers['access-control-allow-origin']).toBe('https://a.example');

    const none = await serve({ allowedOrigins: [] });
    const foreign = await request(`${none}/v1/health`, { headers: { origin: UNMUTE } });
    expect(foreign.headers).not.toHaveProperty('access-control-allow-origin');
    const same = await request(`${none}/v1/health`, { headers: { origin: none } });
    expect(same.headers['access-control-allow-origin']).toBe(none);
    // Not a browser: no CORS headers at all.
    const plain = await request(`${none}/v1/health`);
    expect(plain.headers).not.toHaveProperty('access-control-allow-origin');
    expect(plain.headers).not.toHaveProperty('vary');
  });

  it('answers an allowed preflight with 204 and the methods and headers it may use', async () => {
    const base = await serve({ allowedOrigins: [UNMUTE] });
    const res = await request(`${base}/v1/voices`, {
      method: 'OPTIONS',
      headers: {
        origin: UNMUTE,
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers).toMatchObject({
      'access-control-allow-origin': UNMUTE,
      'access-control-allow-methods': 'GET, HEAD',
      'access-control-allow-headers': 'content-type',
      'access-control-max-age': '600',
    });
    expect(res.body).toBe('');
  });

  it('refuses the preflight of another origin with a 403 that says how to allow it', async () => {
    const base = await serve({ allowedOrigins: [UNMUTE] });
    const res = await request(`${base}/v1/health`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
    });
    expect(res.status).toBe(403);
    expect(res.headers).not.toHaveProperty('access-control-allow-origin');
    expect(res.json<{ error: { message: string } }>().error.message).toMatch(
      /https:\/\/evil\.example.*ALLOWED_ORIGINS/,
    );
  });

  it('answers a plain OPTIONS (no preflight) with the methods it takes', async () => {
    const res = await request(`${await serve()}/v1/health`, { method: 'OPTIONS' });
    expect(res.status).toBe(204);
    expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
  });
});
