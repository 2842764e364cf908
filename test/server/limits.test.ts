import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimScript } from '../../src/testing/index.js';
import { httpAnswer, metricValue, rawUpgrade, request, scrape } from '../helpers/http.js';
import { connect, say, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

/** The session id a client was given. */
async function sessionId(c: TestClient): Promise<string> {
  const created = await c.next('session.created');
  return (created.session as { id: string }).id;
}

describe('session limit (MAX_SESSIONS=2)', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ env: { MAX_SESSIONS: '2' } });
  });
  afterAll(() => t?.close());

  it('closes the third connection with 1013 at once, and lets a new one in after one leaves', async () => {
    const first = await connect(t.wsUrl);
    const firstId = await sessionId(first);
    const second = await connect(t.wsUrl);
    await sessionId(second);

    const third = await connect(t.wsUrl);
    const { code, reason } = await within(third.closed, 'the close of the third connection');
    expect(code).toBe(1013);
    expect(reason).toMatch(/full/);
    expect(third.events).toEqual([]);
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', { reason: 'full' }),
    ).toBe(1);

    await first.close();
    // The client's close event can come before the server's: wait for the server to let go.
    await t.waitForLog('session closed', (l) => l.session === firstId);
    const fourth = await connect(t.wsUrl);
    await sessionId(fourth);
    await Promise.all([second.close(), fourth.close()]);
  });

  it('is not ready (/health/ready 503, full) while full, and ready again once a session leaves', async () => {
    const ready = async () => {
      const r = await request(`${t.url}/health/ready`);
      return { status: r.status, body: r.json<object>() };
    };
    expect(await ready()).toEqual({ status: 200, body: { ready: true } });
    const open = [await connect(t.wsUrl), await connect(t.wsUrl)];
    const ids = await Promise.all(open.map(sessionId));
    expect(await ready()).toEqual({ status: 503, body: { ready: false, reason: 'full' } });
    // /health says it too, beside the sessions that fill it.
    const health = (await request(`${t.url}/health`)).json<Record<string, unknown>>();
    expect(health).toMatchObject({ refusing: 'full', sessions: { active: 2, max: 2 } });
    await open[0]!.close();
    await t.waitForLog('session closed', (l) => l.session === ids[0]);
    expect(await ready()).toEqual({ status: 200, body: { ready: true } });
    expect((await request(`${t.url}/health`)).json<object>()).not.toHaveProperty('refusing');
    await open[1]!.close();
    await t.waitForLog('session closed', (l) => l.session === ids[1]);
  });

  it('answers an upgrade through a load balancer with 503 before the handshake while full, so it tries another instance', async () => {
    const open = [await connect(t.wsUrl), await connect(t.wsUrl)];
    const ids = await Promise.all(open.map(sessionId));
    const before = metricValue(await scrape(t.url), 'troupe_connections_rejected_total', {
      reason: 'full',
    });
    const socket = await rawUpgrade(t.server.port, '/v1/realtime', {
      'X-Forwarded-For': '10.0.0.7',
    });
    const answer = await within(httpAnswer(socket), 'the answer to the proxied upgrade');
    socket.destroy();
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(answer).toMatch(/server full \(2 sessions\); try again later/);
    expect(answer).toMatch(/\r\nRetry-After: 2\r\n/);
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', { reason: 'full' }),
    ).toBe((before ?? 0) + 1);
    await Promise.all(open.map((c) => c.close()));
    for (const id of ids) await t.waitForLog('session closed', (l) => l.session === id);
  });
});

describe('frame limits', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ env: { MAX_FRAME_BYTES: '2048' } });
  });
  afterAll(() => t?.close());

  it('closes the socket with 1009 when a frame is over MAX_FRAME_BYTES', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    const id = await sessionId(c);
    c.send(JSON.stringify({ type: 'session.update', session: { instructions: 'x'.repeat(4096) } }));
    expect(await within(c.closed, 'the close after an oversized frame')).toEqual({
      code: 1009,
      reason: 'frame over MAX_FRAME_BYTES (2048 bytes)',
    });
    await t.waitForLog('session closed', (l) => l.session === id);
    const text = await scrape(t.url);
    expect(
      metricValue(text, 'troupe_connections_rejected_total', { reason: 'frame_too_large' }),
    ).toBe(1);
    expect(metricValue(text, 'troupe_sessions_active')).toBe(0);
  });

  it('closes the socket with 1007, saying why, for a text frame that is not UTF-8', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    // 0xff never appears in UTF-8: a text frame with it breaks the protocol.
    c.ws.send(Buffer.from([0x7b, 0xff, 0x7d]), { binary: false });
    expect(await within(c.closed, 'the close after a frame that is not UTF-8')).toEqual({
      code: 1007,
      reason: 'a text frame that is not UTF-8',
    });
  });

  it('answers a binary frame with an invalid_frame error and keeps the session open', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    c.ws.send(Buffer.from(JSON.stringify({ type: 'response.create' })), { binary: true });
    const error = await c.next('error');
    expect(error.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_frame' });

    say(c, 'Hello there!');
    const done = await c.next('response.done');
    expect(done.response).toMatchObject({ status: 'completed' });
    await c.close();
  });

  it('answers events named like Object methods with an error and keeps the session', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    for (const type of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) {
      c.send({ type });
      const error = await c.next('error');
      // unknown_event_type, or at worst internal_error: never silence, never a dead server.
      expect(['unknown_event_type', 'internal_error'], type).toContain(
        (error.error as { code: string }).code,
      );
    }
    say(c, 'Hello there!');
    expect((await c.next('response.done')).response).toMatchObject({ status: 'completed' });
    await c.close();
  });
});

/**
 * A reply whose events outgrow any socket buffer. Words of seven letters and
 * a space are one token each in the simulator, and each token becomes a
 * `response.output_text.delta` event of about 180 bytes: 128k tokens make
 * over 20 MB of events. A paused reader on loopback soaks up about 4 MB in
 * kernel buffers (the send buffer grows to tcp_wmem's 4 MiB; the receive
 * buffer only grows when the reader reads), so the server's own buffer must
 * pass MAX_BUFFERED_BYTES long before the reply ends, however the kernel is
 * tuned within reason. The server stops the turn at that point, so only the
 * first few megabytes are ever produced.
 */
const LONG_REPLY: SimScript = {
  rules: [{ reply: { parts: [{ text: 'abcdefg '.repeat(128 * 1024) }] } }],
};

describe('slow consumer (MAX_BUFFERED_BYTES=1024)', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({
      script: LONG_REPLY,
      // The openai profile sends no usage on every chunk: fewer bytes to parse per token.
      simulator: { profile: 'openai' },
      env: { MAX_BUFFERED_BYTES: '1024' },
    });
  });
  afterAll(() => t?.close());

  it('cuts off a client that stops reading while a long reply streams, and frees its session', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    const id = await sessionId(c);
    // Stop reading from the socket; writing still works.
    c.ws.pause();
    say(c, 'Tell me everything.');

    const cut = await t.waitForLog('slow consumer closed', (l) => l.session === id, 20_000);
    expect(cut.buffered).toBeGreaterThan(1024);
    // Reading again, the client gets what was sent, then the close frame: 1013 and why.
    c.ws.resume();
    const closed = await within(c.closed, 'the close seen by the slow client', 10_000);
    expect(closed.code).toBe(1013);
    expect(closed.reason).toContain('slow consumer');
    await t.waitForLog('session closed', (l) => l.session === id);
    // The LLM stream was aborted, not left to run into the void.
    await within(t.simulator.whenIdle(), 'the simulator going idle');
    const chat = t.simulator.requests.filter((r) => r.path === '/v1/chat/completions');
    expect(chat.map((r) => r.outcome)).toEqual(['client-closed']);

    const text = await scrape(t.url);
    expect(
      metricValue(text, 'troupe_connections_rejected_total', { reason: 'slow_consumer' }),
    ).toBe(1);
    expect(metricValue(text, 'troupe_sessions_active')).toBe(0);
    expect(t.server.sessions).toBe(0);

    const deltas = c.events.filter((e) => e.type === 'response.output_text.delta').length;
    expect(c.events.map((e) => e.type)).not.toContain('response.done');
    expect(deltas).toBeLessThan(128 * 1024);
  });
});
