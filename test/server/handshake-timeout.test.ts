/**
 * `HANDSHAKE_TIMEOUT_S`: a connection that sends nothing, or half a request,
 * gets 408 and is closed once its time is up (with Node's defaults it held
 * its socket 60–90 s), while a client that completes its handshake keeps its
 * session past that time.
 */
import { connect, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { metricValue, scrape } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTlsTestServer, type TlsTestServer } from '../helpers/tls-server.js';

/** Sends `text` on `socket` and resolves with all it was sent once the server closes it. */
function untilClosed(socket: Socket, text = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    // Written once connected (a TLS socket: once its handshake is done).
    if (text) socket.write(text);
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (got += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(got));
  });
}

/** A raw connection to `port` on loopback that sends `text`, until the server closes it. */
const rawUntilClosed = (port: number, text: string): Promise<string> =>
  untilClosed(connect(port, '127.0.0.1'), text);

describe('HANDSHAKE_TIMEOUT_S=1', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ env: { HANDSHAKE_TIMEOUT_S: '1' } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers 408 to a connection that sent nothing, or half an upgrade, and closes it', async () => {
    const port = Number(new URL(t.url).port);
    const [nothing, half] = await Promise.all([
      rawUntilClosed(port, ''),
      rawUntilClosed(
        port,
        'GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n',
      ),
    ]);
    expect(nothing).toMatch(/^HTTP\/1\.1 408 /);
    expect(half).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('counts each connection closed before a whole request by why, and not one the client reset', async () => {
    const port = Number(new URL(t.url).port);
    const reasons = ['handshake_timeout', 'bad_request', 'headers_too_large'] as const;
    const count = async () => {
      const text = await scrape(t.url);
      return reasons.map((reason) =>
        metricValue(text, 'troupe_connections_rejected_total', { reason }),
      );
    };
    const before = await count();
    const reset = connect(port, '127.0.0.1', () => reset.resetAndDestroy());
    const answers = await Promise.all([
      rawUntilClosed(port, ''),
      rawUntilClosed(port, 'NOT HTTP AT ALL\r\n\r\n'),
      rawUntilClosed(port, `GET / HTTP/1.1\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`),
      new Promise((resolve) => reset.on('close', resolve)),
    ]);
    expect(answers.slice(0, 3).map((a) => String(a).slice(0, 12))).toEqual([
      'HTTP/1.1 408',
      'HTTP/1.1 400',
      'HTTP/1.1 431',
    ]);
    expect(await count()).toEqual(before.map((n) => (n ?? 0) + 1));
  });

  it('leaves a session alone once its handshake is done', async () => {
    const ws = new WebSocket(`${t.wsUrl}?character=plain&greeting=0`);
    await new Promise((resolve, reject) => {
      ws.once('message', resolve);
      ws.once('error', reject);
    });
    // A connection that opens after the session and sends nothing is closed
    // at its deadline; the session, older than that, is still open.
    const port = Number(new URL(t.url).port);
    await rawUntilClosed(port, '');
    expect(ws.readyState).toBe(WebSocket.OPEN);
    const pong = new Promise((resolve) => ws.once('pong', resolve));
    ws.ping();
    await pong;
    ws.close();
  });
});

describe('HANDSHAKE_TIMEOUT_S=1 over TLS', () => {
  let t: TlsTestServer;
  beforeAll(async () => {
    t = await startTlsTestServer({ env: { HANDSHAKE_TIMEOUT_S: '1' } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('closes a connection that never starts its TLS handshake (Node alone waits 120 s)', async () => {
    expect(await rawUntilClosed(Number(new URL(t.url).port), '')).toBe('');
  });

  it('answers 408 to a TLS connection that sends no request', async () => {
    const got = await untilClosed(
      connectTls({ host: '127.0.0.1', port: Number(new URL(t.url).port), ca: t.ca }),
    );
    expect(got).toMatch(/^HTTP\/1\.1 408 /);
  });
});
