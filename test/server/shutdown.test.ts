import { afterEach, describe, expect, it } from 'vitest';
import { metricValue, request, scrape } from '../helpers/http.js';
import { connect, say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

/** A grace no turn here outlasts on any machine: it bounds a hang, it is not a race. */
const GRACE_MS = 600_000;

/** The plain character's scripted line (one LLM request, no tools). */
const PLAIN_LINE = 'Hello there!';

describe('graceful shutdown', () => {
  let t: TestServer | undefined;

  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('lets a response in flight finish, then closes its socket with 1001 and resolves true', async () => {
    t = await startTestServer({ simulator: { latency: { ttftMs: 500 } } });
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    say(c, PLAIN_LINE);
    await c.next('response.created');

    const stopped = t.server.shutdown(GRACE_MS);
    const done = await c.next('response.done');
    expect(done.response).toMatchObject({ status: 'completed' });
    const { code, reason } = await within(c.closed, 'the close after the drain');
    expect(code).toBe(1001);
    expect(reason).toMatch(/shutting down/);
    expect(await within(stopped, 'shutdown')).toBe(true);
  });

  it('refuses new connections with 1001 and reports shutting_down on /health and /health/ready while draining', async () => {
    // Long enough for the checks below to run well inside the turn, even on a machine ten
    // times busier than idle (1.5 s was not).
    t = await startTestServer({ simulator: { latency: { ttftMs: 15_000 } } });
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    say(c, PLAIN_LINE);
    await c.next('response.created');

    const stopped = t.server.shutdown(GRACE_MS);
    const late = await connect(`${t.wsUrl}?character=plain`);
    const closed = await within(late.closed, 'the close of a connection made while draining');
    expect(closed.code).toBe(1001);
    expect(late.events.map((e) => e.type)).not.toContain('session.created');

    const health = await request(`${t.url}/health`);
    expect(health.status).toBe(200);
    expect(health.json()).toMatchObject({ status: 'shutting_down' });
    const ready = await request(`${t.url}/health/ready`);
    expect([ready.status, ready.json()]).toEqual([503, { ready: false, reason: 'shutting_down' }]);
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', {
        reason: 'shutting_down',
      }),
    ).toBe(1);
    // Both happened while the turn was still running.
    expect(c.events.map((e) => e.type)).not.toContain('response.done');

    expect((await c.next('response.done')).response).toMatchObject({ status: 'completed' });
    expect((await within(c.closed, 'the close after the drain')).code).toBe(1001);
    expect(await within(stopped, 'shutdown')).toBe(true);
  });

  it('closes an idle session at once when the drain begins, and refuses a new response.create from a busy one', async () => {
    // The busy turn runs past every step below, however busy the machine.
    t = await startTestServer({ simulator: { latency: { ttftMs: 15_000 } } });
    const busy = await connect(`${t.wsUrl}?character=plain`);
    const idle = await connect(`${t.wsUrl}?character=plain`);
    await busy.next('session.created');
    await idle.next('session.created');
    say(busy, PLAIN_LINE);
    await busy.next('response.created');

    const stopped = t.server.shutdown(GRACE_MS);
    // Before, an idle session waited for the longest reply to end.
    const { code, reason } = await within(idle.closed, 'the close of the idle session');
    expect([code, reason]).toEqual([1001, 'server shutting down']);
    busy.send({ type: 'response.create', event_id: 'late_1' });
    const error = await busy.next('error');
    expect(error.error).toMatchObject({
      type: 'server_error',
      code: 'server_shutting_down',
      event_id: 'late_1',
    });
    // All of it while the busy turn still ran.
    expect(busy.events.map((e) => e.type)).not.toContain('response.done');
    expect((await busy.next('response.done')).response).toMatchObject({ status: 'completed' });
    expect((await within(busy.closed, 'the close after its reply')).code).toBe(1001);
    expect(await within(stopped, 'shutdown')).toBe(true);
  });

  it('cancels a turn that outlasts the grace period, closes with 1001 and resolves false', async () => {
    // A first token that never comes in time: the turn outlasts the grace whatever the load.
    t = await startTestServer({ simulator: { latency: { ttftMs: 3_600_000 } } });
    const c = await connect(`${t.wsUrl}?character=plain`);
    const created = await c.next('session.created');
    const sessionId = (created.session as { id: string }).id;
    say(c, PLAIN_LINE);
    await c.next('response.created');

    const stopped = t.server.shutdown(100);
    expect(await within(stopped, 'shutdown')).toBe(false);
    expect((await within(c.closed, 'the close at the deadline')).code).toBe(1001);
    const done = c.events.find((e) => e.type === 'response.done');
    expect(done?.response).toMatchObject({ status: 'cancelled' });
    const line = await t.waitForLog('response done', (l) => l.session === sessionId);
    expect(line.status).toBe('cancelled');
  });

  it('resolves true at once when no response is running, closing idle sessions with 1001', async () => {
    t = await startTestServer();
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    // A grace far past the wait's bound: resolving at all proves it did not wait for the grace.
    expect(await within(t.server.shutdown(3_600_000), 'shutdown')).toBe(true);
    expect((await within(c.closed, 'the close of an idle session')).code).toBe(1001);
  });
});
