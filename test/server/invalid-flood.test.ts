/**
 * Floods of invalid events: a socket whose events are refused faster than a
 * real client could get wrong is closed (1008) before it slows the other
 * sessions; a client that gets a few events wrong keeps its session.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MAX_INVALID_EVENTS_PER_S,
  MAX_PINGS_PER_S,
  RateMeter,
} from '../../src/server/socket-guards.js';
import { metricValue, scrape } from '../helpers/http.js';
import { connect, type Received, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, openSession, turn } from '../helpers/session.js';
import { within } from '../helpers/wait.js';

/** The wire code of an `error` event. */
const codeOf = (e: Received) => (e.error as { code: string }).code;

/** Sends `{"type":"nope"}` as fast as the socket takes it, until it closes or `max` are sent. */
function flood(c: TestClient, max = 50_000): void {
  let sent = 0;
  const pump = () => {
    if (c.ws.readyState !== c.ws.OPEN || sent >= max) return;
    // Without building an unbounded buffer on the client's side.
    if (c.ws.bufferedAmount < 1 << 20) {
      for (let i = 0; i < 200; i++) c.ws.send('{"type":"nope"}');
      sent += 200;
    }
    setImmediate(pump);
  };
  pump();
}

describe('rate meter', () => {
  it('trips on the event past the limit at once, and not before', () => {
    const meter = new RateMeter(MAX_INVALID_EVENTS_PER_S, () => 0);
    for (let i = 0; i < MAX_INVALID_EVENTS_PER_S; i++) expect(meter.over()).toBe(false);
    expect(meter.over()).toBe(true);
  });

  it('trips when the events keep coming faster than the limit a second', () => {
    let now = 0;
    const meter = new RateMeter(10, () => now);
    // 20 a second: the bucket of 10 empties by 1 a second of them.
    let tripped = -1;
    for (let i = 0; i < 100 && tripped < 0; i++) {
      if (meter.over()) tripped = i;
      now += 50;
    }
    expect(tripped).toBeGreaterThan(10);
    expect(tripped).toBeLessThan(25);
  });

  it('never trips for events spread more thinly than the limit a second', () => {
    let now = 0;
    const meter = new RateMeter(10, () => now);
    for (let i = 0; i < 1_000; i++) {
      expect(meter.over()).toBe(false);
      now += 101;
    }
  });

  it('does not trip for 90 a second read in bursts after the server stalled', () => {
    // A client pings every 11 ms; the server stalls 300 ms every second and
    // then reads the 27 pings that waited at once. A count over the last
    // second of reads saw 117 and tripped.
    let now = 0;
    const meter = new RateMeter(MAX_PINGS_PER_S, () => now);
    for (let second = 0; second < 20; second++) {
      for (let i = 0; i < 63; i++) {
        expect(meter.over()).toBe(false);
        now += 11.1;
      }
      now += 300;
      for (let i = 0; i < 27; i++) expect(meter.over()).toBe(false);
    }
  });
});

describe('invalid event floods', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t.close());
  /** `troupe_connections_rejected_total` for one reason, 0 before its first count. */
  const rejected = async (reason: string): Promise<number> =>
    metricValue(await scrape(t.url), 'troupe_connections_rejected_total', { reason }) ?? 0;

  it('closes each flooding socket with too_many_invalid_events and 1008, while another session completes a turn', async () => {
    const healthy = await openSession(t, 'character=plain');
    const flooders = await Promise.all(
      Array.from({ length: 4 }, () => openSession(t, 'character=plain')),
    );
    for (const f of flooders) flood(f);
    const [done] = await Promise.all([
      turn(healthy, 'Hello'),
      ...flooders.map(async (f) => {
        const { code, reason } = await within(f.closed, 'the close of a flooding socket');
        expect(code).toBe(1008);
        expect(reason).toBe('too_many_invalid_events');
        // The last word is why: nothing more after it.
        const last = f.events.at(-1)!;
        expect(last.type).toBe('error');
        expect(codeOf(last)).toBe('too_many_invalid_events');
        expect((last.error as { message: string }).message).toContain(
          `More than ${MAX_INVALID_EVENTS_PER_S} events were refused as invalid at once`,
        );
      }),
    ]);
    expect(doneOf(done).status).toBe('completed');
    expect(healthy.ws.readyState).toBe(healthy.ws.OPEN);
    expect(await rejected('invalid_events')).toBe(4);
    // The healthy session is still served after the floods.
    expect(doneOf(await turn(healthy, 'Hello again')).status).toBe('completed');
    await healthy.close();
  });

  it('keeps the session of a client that gets up to the limit of events wrong at once', async () => {
    const c = await openSession(t, 'character=plain');
    const wrong = ['{"type":"nope"}', '{"type":', '{"type":"session.update","session":{"x":1}}'];
    for (let i = 0; i < MAX_INVALID_EVENTS_PER_S; i++) c.send(wrong[i % wrong.length]!);
    for (let i = 0; i < MAX_INVALID_EVENTS_PER_S; i++) await c.next('error');
    expect(doneOf(await turn(c, 'Hello')).status).toBe('completed');
    const errors = c.events.filter((e) => e.type === 'error');
    expect(errors).toHaveLength(MAX_INVALID_EVENTS_PER_S);
    expect(errors.map(codeOf)).not.toContain('too_many_invalid_events');
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    await c.close();
  });

  it("does not count Unmute's bridge.* events, which are ignored, not invalid", async () => {
    const c = await connect(`${t.wsUrl}?dialect=unmute&character=plain`, {
      protocols: ['realtime'],
    });
    const count = 2 * MAX_INVALID_EVENTS_PER_S;
    for (let i = 0; i < count; i++) c.send({ type: 'bridge.resume_session' });
    c.send({ type: 'session.update', session: { voice: 'plain', allow_recording: false } });
    await c.next('session.updated');
    const errors = c.events.filter((e) => e.type === 'error');
    expect(errors.map(codeOf)).toEqual(Array.from({ length: count }, () => 'ignored_event'));
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    await c.close();
  });

  it('answers up to the limit of pings at once, and closes a ping flood with too_many_pings and 1008', async () => {
    const polite = await openSession(t, 'character=plain');
    let pongs = 0;
    polite.ws.on('pong', () => pongs++);
    for (let i = 0; i < MAX_PINGS_PER_S; i++) polite.ws.ping(String(i));
    await within(
      new Promise<void>((resolve) =>
        polite.ws.on('pong', () => pongs === MAX_PINGS_PER_S && resolve()),
      ),
      'a pong for each ping',
    );

    const flooder = await openSession(t, 'character=plain');
    // Before this server answered pings itself, ws cut such a socket at 60
    // pongs not yet written: close 1006, no frame, no reason.
    for (let i = 0; i < 10 * MAX_PINGS_PER_S; i++) flooder.ws.ping();
    const { code, reason } = await within(flooder.closed, 'the close of a ping flood');
    expect(code).toBe(1008);
    expect(reason).toBe('too_many_pings');
    const last = flooder.events.at(-1)!;
    expect(codeOf(last)).toBe('too_many_pings');
    expect((last.error as { message: string }).message).toContain(
      `More than ${MAX_PINGS_PER_S} WebSocket pings or pongs at once`,
    );
    expect(await rejected('ping_flood')).toBe(1);
    expect(doneOf(await turn(polite, 'Hello')).status).toBe('completed');
    await polite.close();
  });

  it('counts the pongs a client sends unasked with its pings', async () => {
    const before = await rejected('ping_flood');
    const flooder = await openSession(t, 'character=plain');
    for (let i = 0; i < 10 * MAX_PINGS_PER_S; i++) flooder.ws.pong();
    const { code, reason } = await within(flooder.closed, 'the close of a pong flood');
    expect(code).toBe(1008);
    expect(reason).toBe('too_many_pings');
    expect(await rejected('ping_flood')).toBe(before + 1);
  });
});
