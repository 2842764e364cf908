import http from 'node:http';
import type { Gauge } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createOverloadMonitor, type OverloadMonitor } from '../../src/server/overload.js';
import { overloadRefusal } from '../../src/server/session-open.js';
import { metricValue, request, scrape } from '../helpers/http.js';
import { connect } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

/** Blocks the event loop for `ms` at each of the next timer turns until stopped. */
function saturate(ms: number): { stop(): void; until(done: () => boolean): Promise<void> } {
  let running = true;
  const spin = (): void => {
    if (!running) return;
    const end = performance.now() + ms;
    while (performance.now() < end) {
      // Busy: a saturated server.
    }
    setTimeout(spin, 0);
  };
  setTimeout(spin, 0);
  return {
    stop() {
      running = false;
    },
    async until(done) {
      while (!done()) await new Promise((r) => setTimeout(r, 0));
    },
  };
}

describe('overload refusal', () => {
  let monitor: OverloadMonitor | undefined;
  let t: TestServer | undefined;

  afterEach(async () => {
    monitor?.stop();
    monitor = undefined;
    await t?.close();
    t = undefined;
  });

  it('says overloaded while the event loop lags, and recovers once it does not', async () => {
    monitor = createOverloadMonitor({ lagMs: 100, retryMs: 2_000 });
    expect(monitor.check()).toBeUndefined();
    const busy = saturate(250);
    await within(
      busy.until(() => monitor!.check() !== undefined),
      'an overload verdict',
      20_000,
    );
    busy.stop();
    expect(monitor.check()).toMatchObject({ reason: 'event_loop_lag', retryAfterMs: 2_000 });
    await within(
      saturate(0).until(() => monitor!.check() === undefined),
      'the recovery',
      20_000,
    );
  });

  it('does not say overloaded after one long pause (the process stopped), however long', async () => {
    const lags: number[] = [];
    const gauge = { set: (v: number) => void lags.push(v) } as unknown as Gauge;
    monitor = createOverloadMonitor({ lagMs: 300, retryMs: 2_000, lagGauge: gauge });
    // A full window of samples first.
    await within(
      saturate(0).until(() => lags.length >= 10),
      'a full window of samples',
      20_000,
    );
    const end = performance.now() + 4_000;
    while (performance.now() < end) {
      // One pause of 4 s: the window's mean with it would be 400 ms.
    }
    const seen = lags.length;
    await within(
      saturate(0).until(() => lags.length > seen),
      'the sample after the pause',
      20_000,
    );
    expect(monitor.check()).toBeUndefined();
    expect(monitor.state.lagMs).toBeLessThan(300);
  });

  it('says overloaded while the event loop has no idle time, and recovers once it has', async () => {
    monitor = createOverloadMonitor({ lagMs: 0, busy: 0.9, retryMs: 2_000 });
    expect(monitor.check()).toBeUndefined();
    // Busy 50 ms at every turn: little lag per timer, no idle time.
    const busy = saturate(50);
    await within(
      busy.until(() => monitor!.check() !== undefined),
      'an overload verdict',
      20_000,
    );
    busy.stop();
    const verdict = monitor.check()!;
    expect(verdict).toMatchObject({ reason: 'event_loop_busy', retryAfterMs: 2_000 });
    expect(verdict.value).toBeGreaterThan(0.9);
    expect(monitor.state.busy).toBeGreaterThan(0.9);
    await within(
      (async () => {
        while (monitor!.check() !== undefined) await new Promise((r) => setTimeout(r, 50));
      })(),
      'the recovery',
      20_000,
    );
  });

  it('says overloaded while the heap is past its share of the limit', async () => {
    const { getHeapStatistics } = await import('node:v8');
    const h = getHeapStatistics();
    // A share below what this process uses now: the check must fire.
    const share = (h.used_heap_size / h.heap_size_limit) * 0.5;
    monitor = createOverloadMonitor({ lagMs: 0, heap: share, retryMs: 2_000 });
    const verdict = await within(
      (async () => {
        for (;;) {
          const v = monitor!.check();
          if (v) return v;
          await new Promise((r) => setTimeout(r, 20));
        }
      })(),
      'a memory verdict',
    );
    expect(verdict).toMatchObject({ reason: 'memory', retryAfterMs: 2_000 });
    expect(verdict.value).toBeGreaterThan(share);
  });

  it("says overloaded while the container's memory is past its share of the limit, and says so", async () => {
    const used = { share: 0.5 };
    monitor = createOverloadMonitor({
      lagMs: 0,
      container: 0.85,
      containerShare: () => used.share,
      retryMs: 2_000,
    });
    const sampled = (): Promise<void> =>
      within(
        (async () => {
          while (monitor!.state.container !== used.share)
            await new Promise((r) => setTimeout(r, 20));
        })(),
        'a sample',
      );
    await sampled();
    expect(monitor.check()).toBeUndefined();
    used.share = 0.91;
    await sampled();
    const verdict = monitor.check();
    expect(verdict).toEqual({ reason: 'container_memory', value: 0.91, retryAfterMs: 2_000 });
    expect(overloadRefusal(verdict!).error.message).toBe(
      'The server is overloaded (container memory at 91% of its limit); retry in 2 s, or on another instance.',
    );
    used.share = 0.6;
    await sampled();
    expect(monitor.check()).toBeUndefined();
  });

  it('answers 503 with Retry-After before the handshake behind a load balancer while saturated', async () => {
    t = await startTestServer({ env: { OVERLOAD_BUSY: '0.9' } });
    const { port } = new URL(t.url);
    const handshake = (): Promise<{ status: number; retryAfter?: string; body: string }> =>
      new Promise((resolve, reject) => {
        const req = http.request({
          host: '127.0.0.1',
          port,
          path: '/v1/realtime?character=plain',
          headers: {
            connection: 'Upgrade',
            upgrade: 'websocket',
            'sec-websocket-version': '13',
            'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
            'x-forwarded-for': '203.0.113.7',
          },
        });
        req.on('upgrade', (res, socket) => {
          socket.destroy();
          resolve({ status: res.statusCode ?? 0, body: '' });
        });
        req.on('response', (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => (body += d));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              ...(res.headers['retry-after'] ? { retryAfter: res.headers['retry-after'] } : {}),
              body,
            }),
          );
        });
        req.on('error', reject);
        req.end();
      });
    // Idle: the handshake goes through.
    expect((await handshake()).status).toBe(101);
    const busy = saturate(50);
    const refused = await within(
      (async () => {
        for (;;) {
          const answer = await handshake();
          if (answer.status !== 101) return answer;
        }
      })(),
      'a refusal',
      30_000,
    );
    busy.stop();
    expect(refused).toEqual({
      status: 503,
      retryAfter: '2',
      body: 'server overloaded; retry in 2 s\n',
    });
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', {
        reason: 'overloaded',
      }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('refuses a new session with 1013 and a retry hint at once while saturated, and lets a resume in', async () => {
    t = await startTestServer({ env: { OVERLOAD_LAG_MS: '100' } });
    const first = await connect(`${t.wsUrl}?character=plain`);
    await first.next('session.created');
    const dropped = await connect(`${t.wsUrl}?character=plain`);
    const token = (
      (await dropped.next('session.created')).session as { troupe: { resume_token: string } }
    ).troupe.resume_token;
    await dropped.close();

    const busy = saturate(250);
    const c = await within(
      (async () => {
        // Connect until the server says it is overloaded (the lag builds up over a second).
        for (;;) {
          const attempt = await connect(`${t!.wsUrl}?character=plain`);
          const outcome = await Promise.race([
            attempt.next('session.created', undefined, 60_000).then(() => 'created' as const),
            attempt.closed.then(() => 'closed' as const),
          ]);
          if (outcome === 'closed') return attempt;
          await attempt.close();
        }
      })(),
      'a refusal',
      30_000,
    );
    // A conversation that was already served is not turned away: it comes back.
    const back = await connect(`${t.wsUrl}?resume=${token}`);
    await back.next('session.created', undefined, 60_000);
    await back.next('conversation.item.added', undefined, 60_000);
    expect(back.events.filter((e) => e.type === 'error')).toEqual([]);
    await back.close();
    // Nor by a readiness probe: busy is not "not ready", or a load balancer
    // that checks it would turn the resumes away that the server lets in.
    const ready = await within(
      (async () => {
        for (;;) {
          const answer = await request(`${t!.url}/health/ready`);
          if (t!.server.refusing === 'busy') return answer;
        }
      })(),
      'a readiness answer while busy',
      30_000,
    );
    expect({ status: ready.status, body: ready.json() }).toEqual({
      status: 200,
      body: { ready: true },
    });
    busy.stop();
    const { code, reason } = await c.closed;
    expect(code).toBe(1013);
    expect(reason).toMatch(/^server overloaded; retry in 2 s$/);
    const error = c.events.find((e) => e.type === 'error') as unknown as { error: object };
    expect(error.error).toMatchObject({
      type: 'server_error',
      code: 'server_overloaded',
      retry_after_ms: 2_000,
    });
    // The session already open is not touched.
    expect(first.ws.readyState).toBe(first.ws.OPEN);
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', {
        reason: 'overloaded',
      }),
    ).toBeGreaterThanOrEqual(1);
    await first.close();
  });
});
