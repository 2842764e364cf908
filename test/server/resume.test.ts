import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/server/logger.js';
import { createResumer, newResumeToken, tokenKey, type Resumer } from '../../src/server/resume.js';
import {
  createMemoryResumeStore,
  type RecordUpdate,
  type ResumeStore,
} from '../../src/server/resume-store.js';
import { freePort } from '../deploy/processes.js';
import { metricValue, request, scrape } from '../helpers/http.js';
import { connect, say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const log = createLogger({ level: 'silent', content: false });

/** A memory store written as text at every save (as Redis is) that records every call. */
function spyStore(): ResumeStore & { saves: string[]; claims: string[] } {
  const inner = createMemoryResumeStore({ readsLive: false });
  const saves: string[] = [];
  const claims: string[] = [];
  return {
    ...inner,
    kind: 'memory',
    saves,
    claims,
    save(key, update, ttlS) {
      saves.push(update.head);
      return inner.save(key, update, ttlS);
    },
    claim(key, ttlS) {
      claims.push(key);
      return inner.claim(key, ttlS);
    },
  };
}

function resumer(store: ResumeStore, loadTimeoutMs = 2_000): Resumer {
  return createResumer({ store, ttlS: 60, saveDelayMs: 5, loadTimeoutMs, log });
}

describe('resume tokens', () => {
  it('are 256 random bits in base64url, never the same twice, stored only as a hash', () => {
    const tokens = new Set(Array.from({ length: 1000 }, () => newResumeToken()));
    expect(tokens.size).toBe(1000);
    for (const t of tokens) expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const t = [...tokens][0]!;
    expect(tokenKey(t)).not.toContain(t);
    expect(tokenKey(t)).toBe(tokenKey(t));
  });

  it('open the conversation they were issued for, once', async () => {
    const store = spyStore();
    const r = resumer(store);
    let state = { items: ['a'] };
    const tracker = r.track('sess_1', { snapshot: () => state }, undefined, log);
    await tracker.flush();
    state = { items: ['a', 'b'] };
    tracker.changed();
    await tracker.flush();
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: true,
      sessionId: 'sess_1',
      state: { items: ['a', 'b'] },
      parts: [],
    });
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: false,
      reason: 'not_found',
    });
    // The session that is still closing cannot bring the record back.
    await tracker.flush();
    expect(await r.claim(tracker.token, undefined)).toMatchObject({ ok: false });
  });

  /** A session's state source that counts its reads; `state` is what it reads. */
  const countedSource = () => {
    const source = {
      reads: 0,
      state: { items: ['a'] } as unknown,
      snapshot: () => {
        source.reads++;
        return source.state;
      },
    };
    return source;
  };

  it('with the memory store, read a live session only when its record is claimed', async () => {
    const r = resumer(createMemoryResumeStore());
    const source = countedSource();
    const tracker = r.track('sess_live', source, undefined, log);
    await tracker.flush();
    for (let i = 0; i < 50; i++) tracker.changed();
    await tracker.flush();
    expect(source.reads).toBe(0);
    source.state = { items: ['a', 'b'] };
    // The claim gets the state as it is now, read once.
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: true,
      sessionId: 'sess_live',
      state: { items: ['a', 'b'] },
    });
    expect(source.reads).toBe(1);
    // The session's next change learns that it was taken over: no more reads or writes.
    tracker.changed();
    tracker.stop();
    expect(source.reads).toBe(1);
  });

  it('tell a session still open in this process at the claim, and hand over its state once it has closed', async () => {
    const store = spyStore();
    const r = resumer(store);
    const source = countedSource();
    let told = 0;
    const tracker = r.track('sess_open', source, undefined, log, () => {
      told++;
      // Closing the session records its cut reply.
      source.state = { items: ['a', 'cut reply'] };
    });
    await tracker.flush();
    const saved = store.saves.length;
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: true,
      sessionId: 'sess_open',
      state: { items: ['a', 'cut reply'] },
    });
    expect(told).toBe(1);
    // The old session writes nothing over the conversation that is not its own any more.
    tracker.changed();
    await tracker.flush();
    tracker.stop();
    expect(store.saves.length).toBe(saved);
    expect(told).toBe(1);
  });

  it('tell a session still open in another process at its next write', async () => {
    const store = spyStore();
    // Two processes sharing one store (Redis): neither sees the other's sessions.
    const here = resumer(store);
    const there = resumer(store);
    const source = countedSource();
    let told = 0;
    const tracker = here.track('sess_far', source, undefined, log, () => void told++);
    await tracker.flush();
    expect(await there.claim(tracker.token, undefined)).toMatchObject({ ok: true });
    expect(told).toBe(0);
    source.state = { items: ['a', 'said on the old connection'] };
    tracker.changed();
    await tracker.flush();
    expect(told).toBe(1);
    const saved = store.saves.length;
    tracker.changed();
    await tracker.flush();
    expect(store.saves.length).toBe(saved);
    expect(told).toBe(1);
  });

  it("write a quiet running session's record again before its TTL runs out", async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    try {
      const store = spyStore();
      const r = createResumer({ store, ttlS: 10, saveDelayMs: 5, loadTimeoutMs: 2_000, log });
      const tracker = r.track('sess_quiet', { snapshot: () => ({ items: ['a'] }) }, undefined, log);
      await tracker.flush();
      const saved = store.saves.length;
      // Nothing changes for longer than the TTL; the record is kept written.
      for (let s = 0; s < 14; s++) await vi.advanceTimersByTimeAsync(1_000);
      expect(store.saves.length).toBeGreaterThan(saved);
      expect(await r.claim(tracker.token, undefined)).toMatchObject({
        ok: true,
        state: { items: ['a'] },
      });
      tracker.stop();
      await r.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('with the memory store, write the record as text when the session ends, and let the session go', async () => {
    const r = resumer(createMemoryResumeStore());
    const source = countedSource();
    const tracker = r.track('sess_end', source, undefined, log);
    tracker.changed();
    tracker.stop();
    expect(source.reads).toBe(1);
    // Later changes to the old session's objects are not the record's.
    source.state = { items: ['changed after the end'] };
    tracker.changed();
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: true,
      state: { items: ['a'] },
    });
    expect(source.reads).toBe(1);
  });

  it('with the memory store, answer a claim whose session cannot be read as a store failure, and keep the record', async () => {
    const r = resumer(createMemoryResumeStore());
    let broken = true;
    const source = {
      snapshot: () => {
        if (broken) throw new Error('not serialisable');
        return { items: ['a'] };
      },
    };
    const tracker = r.track('sess_bad', source, undefined, log);
    await tracker.flush();
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: false,
      reason: 'store_unavailable',
    });
    broken = false;
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: true,
      state: { items: ['a'] },
    });
  });

  it('write a burst of changes once, after the delay, off the caller', async () => {
    const store = spyStore();
    const r = resumer(store);
    let reads = 0;
    const tracker = r.track('sess_2', { snapshot: () => ++reads }, undefined, log);
    for (let i = 0; i < 50; i++) tracker.changed();
    // Nothing is read or written synchronously.
    expect(reads).toBe(0);
    expect(store.saves).toHaveLength(0);
    await tracker.flush();
    expect(store.saves).toHaveLength(1);
    tracker.stop();
  });

  it('flush at once, beside a write under way, reading the state at the call', async () => {
    const store = spyStore();
    // A store that holds the first write until told: a slow round trip.
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const slow: ResumeStore = {
      ...store,
      async save(key, update, ttlS) {
        const first = store.saves.length === 0;
        const result = store.save(key, update, ttlS);
        if (first) await held;
        return result;
      },
    };
    const r = resumer(slow);
    let state = { items: ['a'] };
    const tracker = r.track('sess_5', { snapshot: () => state }, undefined, log);
    const first = tracker.flush();
    state = { items: ['a', 'b'] };
    tracker.changed();
    const second = tracker.flush();
    // The second write went out while the first was still held.
    expect(store.saves.map((v) => JSON.parse(v).state)).toEqual([
      { items: ['a'] },
      { items: ['a', 'b'] },
    ]);
    release();
    await Promise.all([first, second]);
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      state: { items: ['a', 'b'] },
    });
  });

  it("send the writes waiting for their delay with another session's flush, to a store that sends saves together", async () => {
    const inner = createMemoryResumeStore({ readsLive: false });
    const sent: string[][] = [];
    let held: string[] = [];
    const gathering: ResumeStore = {
      ...inner,
      kind: 'cluster',
      save(key, update, ttlS) {
        held.push((JSON.parse(update.head) as { session: string }).session);
        return inner.save(key, update, ttlS);
      },
      sendNow() {
        sent.push(held);
        held = [];
      },
    };
    // A delay no test waits for: only the flush can send a's and c's writes.
    const r = createResumer({
      store: gathering,
      ttlS: 60,
      saveDelayMs: 600_000,
      loadTimeoutMs: 2_000,
      log,
    });
    const [a, b, c] = ['sess_a', 'sess_b', 'sess_c'].map((id) =>
      r.track(id, { snapshot: () => ({ id }) }, undefined, log),
    );
    a!.changed();
    c!.changed();
    expect(held).toEqual([]);
    await b!.flush();
    expect(sent).toEqual([['sess_b', 'sess_a', 'sess_c']]);
    // Written early, they have nothing left to write.
    await a!.flush();
    await c!.flush();
    expect(sent).toHaveLength(1);
    expect(held).toEqual([]);
    for (const t of [a, b, c]) t!.stop();
  });

  it("leave another session's writes to their delay with a store that saves each at once", async () => {
    const store = spyStore();
    const r = createResumer({ store, ttlS: 60, saveDelayMs: 600_000, loadTimeoutMs: 2_000, log });
    const a = r.track('sess_a', { snapshot: () => 'a' }, undefined, log);
    const b = r.track('sess_b', { snapshot: () => 'b' }, undefined, log);
    a.changed();
    await b.flush();
    expect(store.saves.map((h) => (JSON.parse(h) as { session: string }).session)).toEqual([
      'sess_b',
    ]);
    a.stop();
    b.stop();
  });

  it('send only the parts that changed, and give them all back on a claim', async () => {
    const inner = createMemoryResumeStore({ readsLive: false });
    const updates: RecordUpdate[] = [];
    let lose = false;
    const store: ResumeStore = {
      ...inner,
      kind: 'memory',
      save(key, update, ttlS) {
        updates.push(update);
        // A store that lost the record (expired, flushed): what builds on it is stale.
        if (lose && update.keep > 0) return Promise.resolve('stale');
        return inner.save(key, update, ttlS);
      },
    };
    const r = resumer(store);
    let parts = ['{"turn":0}', '{"turn":1}'];
    const source = {
      snapshot: () => ({}),
      snapshotParts: () => ({ head: '{"settings":1}', parts }),
    };
    const tracker = r.track('sess_p', source, undefined, log);
    await tracker.flush();
    parts = [...parts, '{"turn":2}'];
    tracker.changed();
    await tracker.flush();
    // A cut turn: the last part changes, the others are kept.
    parts = [...parts.slice(0, 2), '{"turn":2,"cut":true}'];
    tracker.changed();
    await tracker.flush();
    expect(updates.map((u) => [u.keep, u.parts.length, u.after])).toEqual([
      [0, 2, null],
      [2, 1, 1],
      [2, 1, 2],
    ]);
    lose = true;
    parts = [...parts, '{"turn":3}'];
    tracker.changed();
    await tracker.flush();
    // Stale: sent again whole, at once.
    expect(updates.slice(3).map((u) => [u.keep, u.parts.length])).toEqual([
      [3, 1],
      [0, 4],
    ]);
    expect(await r.claim(tracker.token, undefined)).toMatchObject({
      ok: true,
      sessionId: 'sess_p',
      state: { settings: 1 },
      // As written: the caller parses them as it restores.
      parts: ['{"turn":0}', '{"turn":1}', '{"turn":2,"cut":true}', '{"turn":3}'],
    });
  });

  it('refuse a malformed token without asking the store', async () => {
    const store = spyStore();
    const r = resumer(store);
    expect(await r.claim('../../etc/passwd', undefined)).toMatchObject({
      ok: false,
      reason: 'invalid_token',
    });
    expect(store.claims).toHaveLength(0);
  });

  it('only open for the auth token the session was opened with, and leave it for that one', async () => {
    const r = resumer(createMemoryResumeStore());
    let takenOver = 0;
    const tracker = r.track('sess_3', { snapshot: () => ({}) }, 'secret-a', log, () => {
      takenOver++;
    });
    await tracker.flush();
    for (const other of ['secret-b', undefined]) {
      expect(await r.claim(tracker.token, other)).toMatchObject({ ok: false, reason: 'not_found' });
    }
    expect((await r.claim(tracker.token, 'secret-b')) as { message: string }).toMatchObject({
      message: expect.stringContaining('or issued under another auth token'),
    });
    // Untouched: its own connection was not told, and its own auth token still opens it.
    expect(takenOver).toBe(0);
    expect(await r.claim(tracker.token, 'secret-a')).toMatchObject({
      ok: true,
      sessionId: 'sess_3',
    });
  });

  it('refuse a record the store gives back incomplete, and say so', async () => {
    const evicted: ResumeStore = {
      ...createMemoryResumeStore(),
      claim: () => Promise.resolve({ head: '{}', parts: [], incomplete: true }),
    };
    const r = resumer(evicted);
    const claimed = await r.claim(newResumeToken(), undefined);
    expect(claimed).toMatchObject({ ok: false, reason: 'incomplete' });
    expect(claimed.ok ? '' : claimed.message).toContain('no longer held all of it');
  });

  it('give up on a store that does not answer, and say the store is unavailable', async () => {
    const hanging: ResumeStore = {
      ...createMemoryResumeStore(),
      claim: () => new Promise(() => {}),
    };
    const r = resumer(hanging, 50);
    expect(await r.claim(newResumeToken(), undefined)).toMatchObject({
      ok: false,
      reason: 'store_unavailable',
    });
  });
});

describe('the resume handshake', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('answers a bad token with a fresh session, then a resume_failed error', async () => {
    t = await startTestServer();
    for (const token of ['nonsense', newResumeToken()]) {
      const c = await connect(`${t.wsUrl}?character=plain&resume=${token}`);
      await c.next('session.created');
      const error = await c.next('error');
      expect(error.error).toMatchObject({
        type: 'invalid_request_error',
        code: 'resume_failed',
        param: 'resume',
      });
      expect((error.error as { message: string }).message).toMatch(/new session was started/);
      // The fresh session works.
      say(c, 'Hello there!');
      expect((await c.next('response.done')).response).toMatchObject({ status: 'completed' });
      await c.close();
    }
    const metrics = await scrape(t.url);
    expect(metricValue(metrics, 'troupe_resume_attempts_total', { outcome: 'invalid_token' })).toBe(
      1,
    );
    expect(metricValue(metrics, 'troupe_resume_attempts_total', { outcome: 'not_found' })).toBe(1);
  });

  it('answers a record whose turn is not JSON with a fresh session and says it could not be restored', async () => {
    // A store that gives back one turn damaged (a store written by hand, a bad copy).
    const inner = createMemoryResumeStore({ readsLive: false });
    const store: ResumeStore = {
      ...inner,
      kind: 'memory',
      async claim(key, ttlS) {
        const record = await inner.claim(key, ttlS);
        return record && { ...record, parts: record.parts.map((p, i) => (i === 0 ? '{"ite' : p)) };
      },
    };
    t = await startTestServer({ resumeStore: store });
    const first = await connect(`${t.wsUrl}?character=plain`);
    const created = await first.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    say(first, 'Hello there!');
    expect((await first.next('response.done')).response).toMatchObject({ status: 'completed' });
    await first.close();
    // Closed on the server too: the claim reads the store, not the live session.
    await t.waitForLog('session closed');
    const again = await connect(`${t.wsUrl}?resume=${token}`);
    await again.next('session.created');
    const error = await again.next('error');
    expect(error.error).toMatchObject({ code: 'resume_failed', param: 'resume' });
    expect((error.error as { message: string }).message).toMatch(
      /could not be restored: .*JSON.* A new session was started/,
    );
    // The fresh session works.
    say(again, 'Hello again!');
    expect((await again.next('response.done')).response).toMatchObject({ status: 'completed' });
    await again.close();
    // One attempt, one outcome: not also counted as resumed.
    const metrics = await scrape(t.url);
    expect(
      metricValue(metrics, 'troupe_resume_attempts_total', { outcome: 'restore_failed' }),
    ).toBe(1);
    expect(metricValue(metrics, 'troupe_resume_attempts_total', { outcome: 'resumed' })).toBe(0);
  });

  it('keeps sessions working with Redis down, says degraded on /health and counts the errors', async () => {
    const port = await freePort();
    t = await startTestServer({ env: { REDIS_URL: `redis://127.0.0.1:${port}` } });
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    say(c, 'Hello there!');
    expect((await c.next('response.done')).response).toMatchObject({ status: 'completed' });
    const health = (await request(`${t.url}/health`)).json<Record<string, unknown>>();
    expect(health).toMatchObject({
      status: 'degraded',
      resume: { store: 'redis', ok: false },
    });
    expect(
      metricValue(await scrape(t.url), 'troupe_resume_store_errors_total', { op: 'connection' }),
    ).toBeGreaterThanOrEqual(1);
    await c.close();
  });
});

describe('resuming a conversation', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  function tokenOf(created: Record<string, unknown>): string {
    return (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
  }

  it('gives the conversation back under the same id, announces its items, and spends the token', async () => {
    t = await startTestServer();
    const first = await connect(`${t.wsUrl}?character=plain`);
    const created = await first.next('session.created');
    const token = tokenOf(created);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    first.send({
      type: 'session.update',
      session: { type: 'realtime', instructions: 'Answer in one short line.' },
    });
    await first.next('session.updated');
    say(first, 'My name is Ada.');
    expect((await first.next('response.done')).response).toMatchObject({ status: 'completed' });
    await first.close();

    const again = await connect(`${t.wsUrl}?resume=${token}`);
    const resumed = await again.next('session.created');
    expect((resumed.session as { id: string }).id).toBe((created.session as { id: string }).id);
    expect((resumed.session as { instructions: string }).instructions).toBe(
      'Answer in one short line.',
    );
    const next = tokenOf(resumed);
    expect(next).not.toBe(token);
    // Every item again (the greeting's too), the user's line among them.
    await again.next('conversation.item.added', (e) =>
      JSON.stringify(e.item).includes('My name is Ada.'),
    );
    say(again, 'What is my name?');
    expect((await again.next('response.done')).response).toMatchObject({ status: 'completed' });
    const history = JSON.stringify(t.simulator.requests.at(-1)?.body);
    expect(history).toContain('My name is Ada.');
    expect(history).toContain('What is my name?');
    expect(again.events.map((e) => e.type)).not.toContain('error');

    const replay = await connect(`${t.wsUrl}?resume=${token}`);
    await replay.next('session.created');
    expect((await replay.next('error')).error).toMatchObject({ code: 'resume_failed' });
    await replay.close();
    await again.close();
  });

  it("announces the items before it answers the client's first event, or after a short wait", async () => {
    t = await startTestServer();
    const first = await connect(`${t.wsUrl}?character=plain`);
    const token = tokenOf(await first.next('session.created'));
    say(first, 'My name is Ada.');
    await first.next('response.done');
    await first.close();

    // A client that sends at once (as the Agents SDK does on connect).
    const eager = await connect(`${t.wsUrl}?resume=${token}`);
    const created = await eager.next('session.created');
    eager.send({ type: 'session.update', session: {} });
    await eager.next('session.updated');
    const types = eager.events.map((e) => e.type);
    const added = types.filter((type) => type === 'conversation.item.added').length;
    // The greeting, the line and the reply, all before the answer.
    expect(added).toBe(3);
    expect(types.lastIndexOf('conversation.item.added')).toBeLessThan(
      types.indexOf('session.updated'),
    );
    await eager.close();

    // A client that sends nothing gets them too.
    const quiet = await connect(`${t.wsUrl}?resume=${tokenOf(created)}`);
    await quiet.next('session.created');
    await quiet.next('conversation.item.added', (e) =>
      JSON.stringify(e.item).includes('My name is Ada.'),
    );
    await quiet.close();
  });

  it('keeps what was said of a reply cut by the dropped connection', async () => {
    t = await startTestServer({ simulator: { latency: { tokensPerSec: 5 } } });
    const first = await connect(`${t.wsUrl}?character=plain`);
    const token = tokenOf(await first.next('session.created'));
    say(first, 'Hello there!');
    const delta = await first.next('response.output_text.delta');
    await first.close();
    await t.waitForLog('session closed');

    const again = await connect(`${t.wsUrl}?resume=${token}`);
    await again.next('session.created');
    const { item_id: itemId, delta: said } = delta as unknown as { item_id: string; delta: string };
    // The cut reply is there, under its id, with what had been sent of it.
    const reply = await again.next(
      'conversation.item.added',
      (e) => (e.item as { id?: string }).id === itemId,
    );
    expect(reply.item).toMatchObject({ role: 'assistant' });
    expect(JSON.stringify(reply.item)).toContain(said.trim());
    await again.close();
  });

  it('closes the connection still open when another resumes its conversation, and hands over its cut reply', async () => {
    t = await startTestServer({ simulator: { latency: { tokensPerSec: 5 } } });
    const first = await connect(`${t.wsUrl}?character=plain`);
    const created = await first.next('session.created');
    say(first, 'Hello there!');
    const delta = await first.next('response.output_text.delta');

    // The old connection is still open and its reply still streaming.
    const again = await connect(`${t.wsUrl}?resume=${tokenOf(created)}`);
    const resumed = await again.next('session.created');
    expect((resumed.session as { id: string }).id).toBe((created.session as { id: string }).id);
    expect((await first.next('error')).error).toMatchObject({ code: 'session_resumed_elsewhere' });
    expect(await first.closed).toEqual({ code: 4002, reason: 'session_resumed_elsewhere' });
    const { item_id: itemId, delta: said } = delta as unknown as { item_id: string; delta: string };
    const reply = await again.next(
      'conversation.item.added',
      (e) => (e.item as { id?: string }).id === itemId,
    );
    expect(JSON.stringify(reply.item)).toContain(said.trim());
    // One conversation, one connection: the new one goes on with it.
    say(again, 'Are you still there?');
    await again.next('response.output_text.delta');
    expect(again.events.map((e) => e.type)).not.toContain('error');
    const metrics = await scrape(t.url);
    expect(
      metricValue(metrics, 'troupe_connections_rejected_total', { reason: 'resumed_elsewhere' }),
    ).toBe(1);
    await again.close();
  });

  it('only resumes for the auth token the session was opened with', async () => {
    t = await startTestServer({ env: { AUTH_TOKEN: 'first-secret' } });
    const c = await connect(`${t.wsUrl}?character=plain&token=first-secret`);
    const token = tokenOf(await c.next('session.created'));
    await c.close();
    await t.waitForLog('session closed');
    // Same server, same secret: a forged binding would need the hash of another one.
    const again = await connect(`${t.wsUrl}?resume=${token}&token=first-secret`);
    await again.next('session.created');
    expect(again.events.map((e) => e.type)).not.toContain('error');
    await again.close();
  });
});
