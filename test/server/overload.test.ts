import { afterEach, describe, expect, it } from 'vitest';
import { createOverloadMonitor, type OverloadMonitor } from '../../src/server/overload.js';
import { metricValue, scrape } from '../helpers/http.js';
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
  }, 30_000);

  it('refuses a new session with 1013 and a retry hint at once while saturated', async () => {
    t = await startTestServer({ env: { OVERLOAD_LAG_MS: '100' } });
    const first = await connect(`${t.wsUrl}?character=plain`);
    await first.next('session.created');

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
  }, 40_000);
});
