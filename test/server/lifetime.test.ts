import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, scrape } from '../helpers/http.js';
import { connect, say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { fakeVoice, startVoiceServer } from '../helpers/voice.js';
import { within } from '../helpers/wait.js';

describe('idle sessions (SESSION_IDLE_TIMEOUT_S=1)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ env: { SESSION_IDLE_TIMEOUT_S: '1' } });
  });
  afterAll(() => t.close());

  it('closes a session that sends nothing with 4000, after saying why', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    const { code, reason } = await within(c.closed, 'the idle close', 20_000);
    expect(code).toBe(4000);
    expect(reason).toBe('session_idle_timeout');
    const error = c.events.find((e) => e.type === 'error') as unknown as {
      error: { code: string };
    };
    expect(error.error.code).toBe('session_idle_timeout');
    await t.waitForLog('session closed');
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', { reason: 'idle' }),
    ).toBe(1);
  });
});

describe('session lifetime (SESSION_MAX_DURATION_S=1)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      env: { SESSION_MAX_DURATION_S: '1', SESSION_IDLE_TIMEOUT_S: '0' },
    });
  });
  afterAll(() => t.close());

  it('closes a session at its maximum duration with 4001, after saying why', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    const { code, reason } = await within(c.closed, 'the lifetime close', 20_000);
    expect(code).toBe(4001);
    expect(reason).toBe('session_expired');
    expect(c.events.some((e) => e.type === 'error')).toBe(true);
  });
});

describe('expires_at', () => {
  const servers: TestServer[] = [];
  afterAll(() => Promise.all(servers.map((t) => t.close())));

  /** `expires_at` of a new session's `session.created` and of its `session.updated`. */
  async function expiry(env: Record<string, string>): Promise<number[]> {
    const t = await startTestServer({ env });
    servers.push(t);
    const c = await connect(`${t.wsUrl}?character=plain`);
    const created = (await c.next('session.created')).session as { expires_at: number };
    c.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.' } });
    const updated = (await c.next('session.updated')).session as { expires_at: number };
    await c.close();
    return [created.expires_at, updated.expires_at];
  }

  it('says when the session reaches SESSION_MAX_DURATION_S, in Unix seconds, and 0 without a limit', async () => {
    const before = Math.floor(Date.now() / 1000);
    const [created, updated] = await expiry({ SESSION_MAX_DURATION_S: '600' });
    const after = Math.floor(Date.now() / 1000);
    expect(created).toBeGreaterThanOrEqual(before + 600);
    expect(created).toBeLessThanOrEqual(after + 600);
    expect(updated).toBe(created);
    expect(await expiry({ SESSION_MAX_DURATION_S: '0' })).toEqual([0, 0]);
  });
});

describe('keepalive pings (WS_PING_INTERVAL_S=1)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ env: { WS_PING_INTERVAL_S: '1' } });
  });
  afterAll(() => t.close());

  it('cuts off a peer that stops answering pings and keeps one that answers', async () => {
    const healthy = await connect(`${t.wsUrl}?character=plain`);
    // A peer that vanished answers nothing: ws answers pings unless told not to.
    const dead = await connect(`${t.wsUrl}?character=plain`, { autoPong: false });
    await healthy.next('session.created');
    await dead.next('session.created');
    await within(dead.closed, 'the dead peer being cut off', 20_000);
    await t.waitForLog('dead peer cut off');
    expect(healthy.ws.readyState).toBe(healthy.ws.OPEN);
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', {
        reason: 'dead_peer',
      }),
    ).toBe(1);
    await healthy.close();
  });
});

describe('keepalive pings on a link busy with audio (WS_PING_INTERVAL_S=1)', () => {
  let t: TestServer;
  const LONG = 'This reply is spoken for a good few seconds. '.repeat(7);
  beforeAll(async () => {
    t = await startVoiceServer({
      voice: await fakeVoice(),
      env: { WS_PING_INTERVAL_S: '1' },
      script: { rules: [], fallback: { parts: [{ text: LONG }] } },
    });
  });
  afterAll(() => t.close());

  it('does not cut off a peer whose answer waits behind the audio sent to it, and does once it stops', async () => {
    // On a link slower than the audio, a pong waits behind it for longer
    // than a ping interval: a peer that answers nothing while audio flows
    // stands for it here.
    const c = await connect(`${t.wsUrl}?character=quiet`, { autoPong: false });
    let answering = true;
    c.ws.on('ping', (data) => {
      if (answering) c.ws.pong(data);
    });
    await c.next('session.created');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    say(c, 'Talk to me.');
    await c.next('response.output_audio.delta');
    answering = false;
    const done = await Promise.race([
      c.next('response.done'),
      c.closed.then(({ code }) => {
        throw new Error(`cut off while its reply was being spoken (close ${code})`);
      }),
    ]);
    expect(done.response).toMatchObject({ status: 'completed' });
    // The audio over, a peer that still answers nothing is taken for gone.
    await within(c.closed, 'the silent peer being cut off', 20_000);
    const line = await t.waitForLog('dead peer cut off');
    expect(line.session).toEqual(expect.stringMatching(/^sess_/));
  });
});

describe('frame floods (MAX_PENDING_FRAMES=4)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ env: { MAX_PENDING_FRAMES: '4' } });
  });
  afterAll(() => t.close());

  it('refuses frames past the pending cap with an error each, never silently', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    const count = 200;
    for (let i = 0; i < count; i++) {
      c.send({
        type: 'conversation.item.create',
        event_id: `flood-${i}`,
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: `#${i}` }] },
      });
    }
    const answered = () =>
      c.events.filter(
        (e) =>
          e.type === 'conversation.item.done' ||
          (e.type === 'error' &&
            (e as unknown as { error: { code: string } }).error.code === 'too_many_pending_events'),
      ).length;
    await within(
      new Promise<void>((resolve) => {
        const check = () => {
          if (answered() < count) return;
          c.ws.off('message', later);
          resolve();
        };
        // The client's own listener records each event first.
        const later = () => setImmediate(check);
        c.ws.on('message', later);
        check();
      }),
      'an answer to every frame',
      30_000,
    );
    const refused = c.events.filter((e) => e.type === 'error');
    expect(refused.length).toBeGreaterThan(0);
    // Each says which event it refused, as every error does.
    const ids = refused.map(
      (e) => (e as unknown as { error: { event_id: string } }).error.event_id,
    );
    expect(ids.every((id) => /^flood-\d+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    await c.close();
  });
});

describe('session.updated echo', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t.close());

  it('does not echo a megabyte of instructions back in full', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    c.send({ type: 'session.update', session: { instructions: 'Be brief. '.repeat(90_000) } });
    const updated = await c.next('session.updated');
    const echoed = (updated.session as { instructions: string }).instructions;
    expect(echoed.length).toBeLessThan(40_000);
    expect(echoed).toContain('more characters not echoed');
    await c.close();
  });
});
