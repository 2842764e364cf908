import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { rawRequest, statusLine } from '../helpers/http.js';
import { connect, say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

describe('draining behind a load balancer', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('answers an upgrade that came through a proxy with 503 before the handshake, so the proxy tries another instance', async () => {
    t = await startTestServer({ simulator: { latency: { ttftMs: 1_500 } } });
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    say(c, 'Hello there!');
    await c.next('response.created');
    const stopped = t.server.shutdown(5_000);

    const socket = await rawRequest(
      t.server.port,
      'GET /v1/realtime?character=plain HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n' +
        'Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
        'Sec-WebSocket-Version: 13\r\nX-Forwarded-For: 10.0.0.7\r\n\r\n',
    );
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    expect(await within(statusLine(socket), 'the answer to the proxied upgrade')).toBe(
      'HTTP/1.1 503 Service Unavailable',
    );
    await within(once(socket, 'end'), 'the end of the answer');
    expect(answer).toMatch(/\r\nRetry-After: 2\r\n/);
    expect(answer).toMatch(/server shutting down/);
    socket.destroy();
    // The running turn is not touched.
    expect((await c.next('response.done')).response).toMatchObject({ status: 'completed' });
    expect(await within(stopped, 'shutdown')).toBe(true);
  });
});
