import { get as httpGet, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { doneOf, nextError, openSession } from '../helpers/session.js';
import { connect, say } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DEMO_SCRIPT, startSimulator, type Simulator } from '../../src/testing/index.js';

describe('secrets in LLM failures', () => {
  let t: TestServer;
  let llm: Simulator;
  beforeAll(async () => {
    llm = await startSimulator({ script: DEMO_SCRIPT });
    // The simulator ignores credentials: the URL carries them as a real proxy's would.
    const url = new URL(llm.url);
    t = await startTestServer({
      env: { LLM_BASE_URL: `http://troupe:s3cret-pw@${url.host}${url.pathname}` },
    });
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('tells the client a short message and code, and the log the redacted detail', async () => {
    // Two: the server retries a 500 once.
    for (let i = 0; i < 2; i++) {
      llm.injectFault({
        type: 'http',
        status: 500,
        message: 'open /srv/models/config.json failed; api_key=sk-live-0123456789 rejected',
      });
    }
    const c = await openSession(t, 'character=plain');
    say(c, 'Hello');
    const error = await nextError(c, 'llm_stream_error');
    expect(error.message).toBe('The LLM answered HTTP 500. (retrying may help)');
    const done = doneOf(await c.untilDone());
    expect(JSON.stringify(done)).not.toContain('s3cret');
    expect(JSON.stringify(done)).not.toContain('/srv/models');
    const line = await t.waitForLog('llm request failed');
    expect(line.detail).toContain('HTTP 500');
    expect(line.detail).toContain('/srv/models/config.json');
    const logs = JSON.stringify(t.logs());
    expect(logs).not.toContain('s3cret-pw');
    expect(logs).not.toContain('sk-live-0123456789');
    await c.close();
  });

  it('shows /health without the credentials, and its probe still reaches the LLM', async () => {
    const res = await fetch(`${t.url}/health`);
    const body = (await res.json()) as { llm: { ok: boolean; base_url: string } };
    expect(body.llm.ok).toBe(true);
    expect(body.llm.base_url).not.toContain('s3cret');
    expect(body.llm.base_url).toContain('/v1');
  });
});

describe('DNS rebinding', () => {
  let t: TestServer;
  let open: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
    open = await startTestServer({ env: { ALLOWED_HOSTS: 'evil.example' } });
  });
  afterAll(async () => {
    await t.close();
    await open.close();
  });

  /** A page of `name` whose DNS now points at 127.0.0.1: Host and Origin both say `name`. */
  function rebound(server: TestServer, name: string) {
    const port = new URL(server.url).port;
    return { origin: `http://${name}:${port}`, headers: { host: `${name}:${port}` } };
  }

  it('refuses a session from a page whose name was rebound to the server', async () => {
    const c = await connect(t.wsUrl, rebound(t, 'evil.example'));
    const { code, reason } = await within(c.closed, 'the close of a rebound page');
    expect(code).toBe(1008);
    expect(reason).toContain('not allowed');
    expect(c.events.map((e) => e.type)).not.toContain('session.created');
  });

  it('admits same-origin pages reached by IP or localhost, and names in ALLOWED_HOSTS', async () => {
    for (const name of ['127.0.0.1', 'localhost']) {
      const c = await connect(t.wsUrl, rebound(t, name));
      await c.next('session.created');
      await c.close();
    }
    const c = await connect(open.wsUrl, rebound(open, 'evil.example'));
    await c.next('session.created');
    await c.close();
  });

  it('grants no CORS read to a rebound page', async () => {
    const { origin, headers } = rebound(t, 'evil.example');
    // node:http, as fetch sets Host itself.
    const res = await new Promise<IncomingMessage>((resolve, reject) =>
      httpGet(`${t.url}/v1/characters`, { headers: { ...headers, origin } }, resolve).on(
        'error',
        reject,
      ),
    );
    res.resume();
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const local = rebound(t, 'localhost');
    const ok = await new Promise<IncomingMessage>((resolve, reject) =>
      httpGet(
        `${t.url}/v1/characters`,
        { headers: { ...local.headers, origin: local.origin } },
        resolve,
      ).on('error', reject),
    );
    ok.resume();
    expect(ok.headers['access-control-allow-origin']).toBe(local.origin);
  });
});

describe('input_image URLs', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t.close());

  it('refuses a link to a metadata address with a clear error and adds nothing', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is in this picture?' },
          { type: 'input_image', image_url: 'http://169.254.169.254/latest/meta-data/' },
        ],
      },
    });
    const error = await nextError(c, 'image_url_not_allowed');
    expect(error.param).toBe('item.content[1].image_url');
    c.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [{ type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=' }],
      },
    });
    await c.next('conversation.item.done');
    expect(JSON.stringify(c.events.filter((e) => e.type !== 'error'))).not.toContain('169.254');
    await c.close();
  });
});

describe('client tool schemas nested thousands deep', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t.close());

  it('are refused before they are applied, and later turns still work', async () => {
    const c = await openSession(t, 'character=plain');
    c.send(
      '{"type":"session.update","session":{"tools":[{"type":"function","name":"deep","parameters":' +
        '{"a":'.repeat(5000) +
        '1' +
        '}'.repeat(5000) +
        '}]}}',
    );
    // Past the event's 64 levels: the whole event is refused before its tools are read.
    const error = await nextError(c, 'invalid_event');
    expect(error.message).toContain('64 levels');
    say(c, 'Hello');
    expect(doneOf(await c.untilDone()).status).toBe('completed');
    const body = t.simulator.requests.at(-1)!.body as { tools?: unknown[] };
    expect(body.tools ?? []).toHaveLength(0);
    await c.close();
  });
});

describe('session.update values nested 20,000 deep', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t.close());

  it('are refused with invalid_event, and the session still takes a normal session.update', async () => {
    const c = await openSession(t, 'character=plain');
    const deep = '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000);
    c.send(
      `{"type":"session.update","event_id":"evt_deep","session":{"tracing":{"metadata":${deep}}}}`,
    );
    const error = await nextError(c, 'invalid_event');
    expect(error.event_id).toBe('evt_deep');
    expect(error.message).toContain('nothing of it was applied');
    c.send({ type: 'session.update', session: { instructions: 'Be brief.' } });
    const updated = await c.next('session.updated');
    expect((updated.session as { instructions: string }).instructions).toBe('Be brief.');
    expect(c.events.filter((e) => e.type === 'error')).toHaveLength(1);
    await c.close();
  });
});
