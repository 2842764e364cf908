/**
 * A third-party client against the server over TLS: the `openai` package's
 * own Realtime WebSocket client, which builds the URL from the client's
 * baseURL and authenticates with `Authorization: Bearer <apiKey>`.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { generate } from 'selfsigned';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

const TOKEN = 'sdk-test-token';

type AnyEvent = { type: string } & Record<string, unknown>;

/** Every event an SDK connection receives, and a bounded wait for one type. */
function record(rt: OpenAIRealtimeWS) {
  const events: AnyEvent[] = [];
  const waiters = new Set<() => void>();
  rt.on('event', (e) => {
    events.push(e as unknown as AnyEvent);
    for (const w of waiters) w();
  });
  const next = (type: string): Promise<AnyEvent> => {
    const find = () => events.find((e) => e.type === type);
    const seen = find();
    if (seen) return Promise.resolve(seen);
    return within(
      new Promise<AnyEvent>((resolve) => {
        const check = () => {
          const e = find();
          if (!e) return;
          waiters.delete(check);
          resolve(e);
        };
        waiters.add(check);
      }),
      `${type} from the SDK client (got: ${events.map((e) => e.type).join(', ')})`,
    );
  };
  return { events, next };
}

describe('the openai SDK realtime client over wss', () => {
  let t: TestServer;
  let dir: string;
  let ca: string;

  beforeAll(async () => {
    const pems = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [
        { name: 'basicConstraints', cA: true },
        { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
      ],
    });
    ca = pems.cert;
    dir = await mkdtemp(join(tmpdir(), 'troupe-tls-'));
    await writeFile(join(dir, 'cert.pem'), pems.cert);
    await writeFile(join(dir, 'key.pem'), pems.private);
    t = await startTestServer({
      env: {
        TLS_CERT: join(dir, 'cert.pem'),
        TLS_KEY: join(dir, 'key.pem'),
        AUTH_TOKEN: TOKEN,
        DEFAULT_CHARACTER: 'weather',
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('serves https and wss URLs', () => {
    expect(t.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(t.wsUrl).toMatch(/^wss:\/\/127\.0\.0\.1:\d+\/v1\/realtime$/);
  });

  it('streams a weather turn with its tool result to OpenAIRealtimeWS', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'troupe', options: { ca } }, client);
    const errors: Error[] = [];
    rt.on('error', (err) => errors.push(err));
    const { events, next } = record(rt);
    const deltas: string[] = [];
    rt.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const closed = new Promise<number>((resolve) => rt.socket.on('close', (code) => resolve(code)));

    const created = await next('session.created');
    expect(created.session).toMatchObject({ character: 'weather' });
    rt.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [{ type: 'input_text', text: 'Celsius, please.' }],
      },
    });
    rt.send({ type: 'response.create' });

    const done = await next('response.done');
    expect(done.response).toMatchObject({ status: 'completed' });
    const result = await next('troupe.tool_call.result');
    expect(result).toMatchObject({ name: 'get_current_weather', outcome: 'ok' });
    expect(String(result.output)).toMatch(/temperature/);
    // The character's tool, which the server ran: GA's mcp_call item, labelled with the character.
    const call = events.find(
      (e) =>
        e.type === 'response.output_item.done' && (e.item as { type: string }).type === 'mcp_call',
    );
    expect(call?.item).toMatchObject({
      id: result.item_id,
      name: 'get_current_weather',
      server_label: 'weather',
      output: result.output,
    });
    expect(deltas.join('')).toContain('Checking Glasgow.');
    expect(deltas.join('')).toContain("It's 5 °C and windy in Glasgow right now.");
    expect(errors).toEqual([]);

    rt.close({ code: 1000, reason: 'done' });
    expect(await within(closed, 'the SDK socket closing')).toBe(1000);
  });

  it('picks the character its model names: new OpenAIRealtimeWS({model: "plain"})', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'plain', options: { ca } }, client);
    const { next } = record(rt);
    expect((await next('session.created')).session).toMatchObject({ character: 'plain' });
    rt.close({ code: 1000, reason: 'done' });
  });

  it("ignores a model that names no character: the server's default character serves", async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime', options: { ca } }, client);
    const { next } = record(rt);
    expect((await next('session.created')).session).toMatchObject({ character: 'weather' });
    rt.close({ code: 1000, reason: 'done' });
  });

  it('is refused with 1008 when the SDK has the wrong API key', async () => {
    const client = new OpenAI({ apiKey: 'wrong', baseURL: `${t.url}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'troupe', options: { ca } }, client);
    rt.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => rt.socket.on('close', (code) => resolve(code)));
    expect(await within(closed, 'the refused SDK socket closing')).toBe(1008);
  });

  it('answers GET /health over https for a client that trusts the certificate', async () => {
    const res = await request(`${t.url}/health`, { ca });
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ok', llm: { ok: true } });
    // Without the CA, the certificate is not trusted.
    await expect(request(`${t.url}/health`)).rejects.toThrow(/self[- ]signed|certificate/i);
  });
});
