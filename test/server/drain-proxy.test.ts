import { afterEach, describe, expect, it } from 'vitest';
import { httpAnswer, rawUpgrade } from '../helpers/http.js';
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

    const socket = await rawUpgrade(t.server.port, '/v1/realtime?character=plain', {
      'X-Forwarded-For': '10.0.0.7',
    });
    const answer = await within(httpAnswer(socket), 'the answer to the proxied upgrade');
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(answer).toMatch(/\r\nRetry-After: 2\r\n/);
    expect(answer).toMatch(/server shutting down/);
    socket.destroy();
    // The running turn is not touched.
    expect((await c.next('response.done')).response).toMatchObject({ status: 'completed' });
    expect(await within(stopped, 'shutdown')).toBe(true);
  });
});
