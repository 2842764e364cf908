import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, scrape } from '../helpers/http.js';
import { connect, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

const TOKEN = 'auth-test-token';

/** The `error` a refused client was sent before its close. */
function errorOf(c: TestClient): { code: string; message: string } {
  const error = c.events.find((e) => e.type === 'error');
  return error?.error as { code: string; message: string };
}

describe('realtime auth with AUTH_TOKEN set', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ env: { AUTH_TOKEN: TOKEN, MAX_FRAME_BYTES: '2048' } });
  });
  afterAll(() => t?.close());

  it('lets a client in with an Authorization: Bearer header', async () => {
    const c = await connect(t.wsUrl, { headers: { authorization: `Bearer ${TOKEN}` } });
    await c.next('session.created');
    await c.close();
  });

  it('lets a browser in with the token subprotocol and accepts `realtime`, never the token', async () => {
    const c = await connect(t.wsUrl, {
      protocols: ['realtime', `openai-insecure-api-key.${TOKEN}`],
    });
    expect(c.ws.protocol).toBe('realtime');
    await c.next('session.created');
    await c.close();
  });

  it('takes the Bearer scheme in any case', async () => {
    const c = await connect(t.wsUrl, { headers: { authorization: `bearer ${TOKEN}` } });
    await c.next('session.created');
    await c.close();
  });

  it('lets a browser in that offers only the token subprotocol', async () => {
    // A browser fails the connection unless the server picks one of the offered protocols.
    const c = await connect(t.wsUrl, { protocols: [`openai-insecure-api-key.${TOKEN}`] });
    await c.next('session.created');
    await c.close();
  });

  it('lets a client in with ?token=', async () => {
    const c = await connect(`${t.wsUrl}?token=${TOKEN}`);
    await c.next('session.created');
    await c.close();
  });

  it('closes a client without a token with 1008, saying authentication is required, and counts it', async () => {
    const before = metricValue(await scrape(t.url), 'troupe_connections_rejected_total', {
      reason: 'auth',
    });
    const c = await connect(t.wsUrl);
    const { code, reason } = await within(c.closed, 'the close of a client without a token');
    expect(code).toBe(1008);
    expect(reason).toMatch(/authentication/);
    expect(c.events.map((e) => e.type)).not.toContain('session.created');

    const wrong = [
      await connect(t.wsUrl, { headers: { authorization: 'Bearer nope' } }),
      await connect(`${t.wsUrl}?token=nope`),
      await connect(t.wsUrl, { protocols: ['realtime', 'openai-insecure-api-key.nope'] }),
    ];
    for (const w of wrong) {
      expect((await within(w.closed, 'the close of a client with a wrong token')).code).toBe(1008);
      expect(w.events.map((e) => e.type)).not.toContain('session.created');
    }
    // Told before the close, as an `error` a browser's SDK shows (it cannot read the close).
    expect(errorOf(c)).toMatchObject({ code: 'missing_api_key', message: /AUTH_TOKEN/ });
    expect(errorOf(wrong[0]!)).toMatchObject({
      code: 'invalid_api_key',
      message:
        "The token given (the Authorization header) is neither this server's token (AUTH_TOKEN) nor a client secret it minted.",
    });
    expect(errorOf(wrong[2]!).message).toMatch(/\(the subprotocol\)/);
    expect(JSON.stringify(wrong.map(errorOf))).not.toContain('nope');
    const after = metricValue(await scrape(t.url), 'troupe_connections_rejected_total', {
      reason: 'auth',
    });
    expect(after).toBe((before ?? 0) + 4);
    // The operator's log says who was refused and why, never the token they tried.
    const refused = await t.waitForLog(
      'session refused: not allowed',
      (l) => l.reason === 'auth' && l.forwarded_for === null,
    );
    expect(refused).toMatchObject({ address: '127.0.0.1', origin: null });
    expect(JSON.stringify(t.logs())).not.toContain('nope');
  });

  it('survives a refused client that sends an oversized frame before reading its close', async () => {
    // A bare socket, so the frame goes out from the `open` handler itself, before
    // the client has read the server's 1008: the server's reader then meets a
    // frame over MAX_FRAME_BYTES on a socket it is already closing.
    const ws = new WebSocket(t.wsUrl);
    ws.on('open', () => ws.send('x'.repeat(4096)));
    ws.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    expect([1008, 1009]).toContain(await within(closed, 'the close of the refused client'));

    const ok = await connect(`${t.wsUrl}?token=${TOKEN}`);
    await ok.next('session.created');
    await ok.close();
  });

  it("lets a client in when any token it carries is the server's", async () => {
    // The SDKs send the subprotocol with whatever key they were given, beside the URL's token.
    const c = await connect(`${t.wsUrl}?token=${TOKEN}`, {
      protocols: ['realtime', 'openai-insecure-api-key.some-other-key'],
    });
    await c.next('session.created');
    await c.close();
  });

  it('keeps the token out of the logs', () => {
    expect(JSON.stringify(t.logs())).not.toContain(TOKEN);
  });
});

describe('realtime auth without AUTH_TOKEN', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t?.close());

  it('lets anyone in, with or without a token', async () => {
    const bare = await connect(t.wsUrl);
    await bare.next('session.created');
    const withToken = await connect(`${t.wsUrl}?token=whatever`);
    await withToken.next('session.created');
    await Promise.all([bare.close(), withToken.close()]);
  });
});
