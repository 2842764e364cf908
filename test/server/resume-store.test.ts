import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ResumeStoreError,
  createMemoryResumeStore,
  createRedisResumeStore,
  wholeRecord,
  type ResumeStore,
} from '../../src/server/resume-store.js';
import { createLogger } from '../../src/server/logger.js';
import { createResumer } from '../../src/server/resume.js';
import { freePort, needs, startRedis, type RedisProc } from '../deploy/processes.js';
import { within } from '../helpers/wait.js';

/** The behaviour every store shares. */
function storeContract(make: () => ResumeStore) {
  it('gives a saved record back once, then never again', async () => {
    const store = make();
    expect(await store.save('k1', wholeRecord('{"a":1}'), 60)).toBe('saved');
    expect(await store.save('k1', wholeRecord('{"a":2}'), 60)).toBe('saved');
    expect(await store.claim('k1', 60)).toEqual({ head: '{"a":2}', parts: [] });
    expect(await store.claim('k1', 60)).toBeUndefined();
    await store.close();
  });

  it('refuses a save under a claimed key, so a closing session cannot bring it back', async () => {
    const store = make();
    await store.save('k2', wholeRecord('{"a":1}'), 60);
    await store.claim('k2', 60);
    expect(await store.save('k2', wholeRecord('{"a":3}'), 60)).toBe('claimed');
    expect(await store.claim('k2', 60)).toBeUndefined();
    await store.close();
  });

  it('appends parts after those kept, rewrites the head, and gives back the whole record', async () => {
    const store = make();
    expect(await store.save('k3', wholeRecord('h1', ['p0', 'p1'], 1), 60)).toBe('saved');
    const append = { head: 'h2', keep: 2, parts: ['p2'], seq: 2, after: 1 };
    expect(await store.save('k3', append, 60)).toBe('saved');
    // The last part changed (a cut turn): only it is sent again.
    const replace = { head: 'h3', keep: 2, parts: ['p2b', 'p3'], seq: 3, after: 2 };
    expect(await store.save('k3', replace, 60)).toBe('saved');
    expect(await store.claim('k3', 60)).toEqual({ head: 'h3', parts: ['p0', 'p1', 'p2b', 'p3'] });
    expect(await store.claim('k3', 60)).toBeUndefined();
    await store.close();
  });

  it('answers stale to a save that builds on one it never applied, and takes the whole record after', async () => {
    const store = make();
    await store.save('k4', wholeRecord('h1', ['p0'], 1), 60);
    // Save 2 was lost on the way: save 3 builds on it.
    const lost = { head: 'h3', keep: 2, parts: ['p2'], seq: 3, after: 2 };
    expect(await store.save('k4', lost, 60)).toBe('stale');
    // Never stored at all (expired, another store): stale too.
    expect(await store.save('k5', { ...lost, after: 1 }, 60)).toBe('stale');
    expect(await store.save('k4', wholeRecord('h4', ['p0', 'p1', 'p2'], 4), 60)).toBe('saved');
    expect(await store.claim('k4', 60)).toEqual({ head: 'h4', parts: ['p0', 'p1', 'p2'] });
    expect(await store.claim('k5', 60)).toBeUndefined();
    await store.close();
  });

  it('refuses appends under a claimed key too', async () => {
    const store = make();
    await store.save('k6', wholeRecord('h1', ['p0'], 1), 60);
    await store.claim('k6', 60);
    const append = { head: 'h2', keep: 1, parts: ['p1'], seq: 2, after: 1 };
    expect(await store.save('k6', append, 60)).toBe('claimed');
    expect(await store.claim('k6', 60)).toBeUndefined();
    await store.close();
  });

  it('knows nothing of a key never saved', async () => {
    const store = make();
    expect(await store.claim('never', 60)).toBeUndefined();
    expect(await store.health()).toMatchObject({ ok: true });
    await store.close();
  });
}

describe('the memory resume store', () => {
  afterEach(() => vi.useRealTimers());

  storeContract(() => createMemoryResumeStore());

  it('forgets a record after its TTL', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const store = createMemoryResumeStore();
    await store.save('k', wholeRecord('v'), 10);
    vi.setSystemTime(Date.now() + 9_000);
    await store.save('k2', wholeRecord('v2'), 10);
    vi.setSystemTime(Date.now() + 2_000);
    expect(await store.claim('k', 10)).toBeUndefined();
    expect(await store.claim('k2', 10)).toEqual({ head: 'v2', parts: [] });
    await store.close();
  });

  it('lets the records written longest ago go to stay within its room', async () => {
    const evicted: number[] = [];
    const store = createMemoryResumeStore({ maxChars: 25, onEvicted: (n) => evicted.push(n) });
    await store.save('a', wholeRecord('aaaaaaaaaa'), 60);
    await store.save('b', wholeRecord('bbbbbbbbbb'), 60);
    // Written again: now the last written, so not the first to go.
    await store.save('a', wholeRecord('AAAAAAAAAA'), 60);
    await store.save('c', wholeRecord('cccccccccc'), 60);
    expect(evicted).toEqual([10]);
    expect(await store.claim('b', 60)).toBeUndefined();
    expect(await store.claim('a', 60)).toEqual({ head: 'AAAAAAAAAA', parts: [] });
    expect(await store.claim('c', 60)).toEqual({ head: 'cccccccccc', parts: [] });
    // One record over the whole room is refused, and what was held under its
    // key goes too: a resume then fails rather than give an older state.
    await store.save('d', wholeRecord('dddd'), 60);
    await expect(store.save('d', wholeRecord('x'.repeat(26)), 60)).rejects.toThrow(
      /over the in-memory store's 25/,
    );
    expect(await store.claim('d', 60)).toBeUndefined();
    await store.close();
  });

  it("lets an ended session's reader go when its last record is over the room, and counts the refusal", async () => {
    const errors: string[] = [];
    const store = createMemoryResumeStore({ maxChars: 25, onError: (op) => errors.push(op) });
    // The session runs: the store reads it live. It ends with a record too big to keep.
    expect(store.hold?.('k', () => ({ head: 'x'.repeat(30), parts: [] }))).toBe('saved');
    await expect(store.save('k', wholeRecord('x'.repeat(30)), 60)).rejects.toThrow(
      /over the in-memory store's 25/,
    );
    expect(errors).toEqual(['save']);
    // Nothing holds the ended session: not resumable, and not kept past any TTL.
    expect(store.size).toBe(0);
    expect(await store.claim('k', 60)).toBeUndefined();
    await store.close();
  });

  it("keeps a running session's record however long it is quiet", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const store = createMemoryResumeStore();
    expect(store.hold?.('k', () => ({ head: 'live', parts: [] }))).toBe('saved');
    vi.setSystemTime(Date.now() + 3_600_000);
    expect(await store.claim('k', 10)).toEqual({ head: 'live', parts: [] });
    await store.close();
  });
});

describe.runIf(needs('redis-server'))('the Redis resume store (redis-server)', () => {
  let redis: RedisProc;
  const log = { logger: createLogger({ level: 'silent', content: false }) };

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis?.close());

  storeContract(() => createRedisResumeStore({ url: redis.url, log: log.logger }));

  it('writes records with the TTL, under hashed keys with the troupe prefix', async () => {
    const store = createRedisResumeStore({ url: redis.url, log: log.logger });
    await store.save('abc', wholeRecord('{"x":1}', ['{"g":0}']), 120);
    await store.save(
      'abc',
      { head: '{"x":2}', keep: 1, parts: ['{"g":1}'], seq: 2, after: 1 },
      120,
    );
    const direct = new Redis(redis.url);
    try {
      // Both keys of the record (its head and its parts) carry the TTL, in one hash slot.
      for (const key of ['troupe:resume:{abc}', 'troupe:resume:{abc}:parts']) {
        const ttl = await direct.pttl(key);
        expect(ttl).toBeGreaterThan(100_000);
        expect(ttl).toBeLessThanOrEqual(120_000);
      }
      expect(await direct.lrange('troupe:resume:{abc}:parts', 0, -1)).toEqual([
        '{"g":0}',
        '{"g":1}',
      ]);
      await store.claim('abc', 120);
      // The claim leaves only the tombstone, with the TTL.
      expect(await direct.exists('troupe:resume:{abc}:parts')).toBe(0);
      expect(await direct.pttl('troupe:resume:{abc}')).toBeGreaterThan(100_000);
    } finally {
      direct.disconnect();
      await store.close();
    }
  });

  it('refuses a save whole while Redis is over its maxmemory (noeviction), counts it, and marks the older record incomplete', async () => {
    const errors: string[] = [];
    const store = createRedisResumeStore({
      url: redis.url,
      log: log.logger,
      onError: (op) => errors.push(op),
    });
    const direct = new Redis(redis.url);
    try {
      expect(await store.save('full', wholeRecord('h1', ['p0'], 1), 60)).toBe('saved');
      // Over the limit: what Redis holds now is more than it may.
      const used = Number(/used_memory:(\d+)/.exec(await direct.info('memory'))![1]);
      await direct.config('SET', 'maxmemory-policy', 'noeviction');
      await direct.config('SET', 'maxmemory', String(Math.floor(used / 2)));
      const append = { head: 'h2', keep: 1, parts: ['p1'.repeat(10_000)], seq: 2, after: 1 };
      await expect(store.save('full', append, 60)).rejects.toThrow(/OOM/);
      expect(errors).toEqual(['save']);
      // Nothing of it was written (a script that began by trimming wrote it
      // all), and what is left, an older state, is marked incomplete.
      expect(await direct.lrange('troupe:resume:{full}:parts', 0, -1)).toEqual([]);
      expect(await direct.hget('troupe:resume:{full}', 'head')).toBe('h1');
      expect(await store.save('full', append, 60)).toBe('stale');
      // Room again: the whole record is written, and claimed whole.
      await direct.config('SET', 'maxmemory', '0');
      expect(await store.save('full', wholeRecord('h3', ['p0', 'p1'], 3), 60)).toBe('saved');
      expect(await store.claim('full', 60)).toEqual({ head: 'h3', parts: ['p0', 'p1'] });
      // Full again: a claim frees memory and is let through; a record a
      // save did not fit into is given as incomplete.
      await store.save('full2', wholeRecord('g1', [], 1), 60);
      await direct.config('SET', 'maxmemory', String(Math.floor(used / 2)));
      await expect(store.save('full2', wholeRecord('g2', ['q'], 2), 60)).rejects.toThrow(/OOM/);
      expect(await store.claim('full2', 60)).toEqual({ head: 'g1', parts: [], incomplete: true });
    } finally {
      await direct.config('SET', 'maxmemory', '0');
      direct.disconnect();
      await store.close();
    }
  });

  it('answers stale to a save whose parts Redis evicted, and gives a claim of such a record as incomplete', async () => {
    const store = createRedisResumeStore({ url: redis.url, log: log.logger });
    const direct = new Redis(redis.url);
    try {
      await store.save('ev', wholeRecord('h1', ['p0', 'p1'], 1), 60);
      // Eviction takes a key whole: the hash stays, the list is gone.
      await direct.del('troupe:resume:{ev}:parts');
      const append = { head: 'h2', keep: 2, parts: ['p2'], seq: 2, after: 1 };
      expect(await store.save('ev', append, 60)).toBe('stale');
      expect(await store.save('ev', wholeRecord('h3', ['p0', 'p1', 'p2'], 3), 60)).toBe('saved');
      await direct.del('troupe:resume:{ev}:parts');
      expect(await store.claim('ev', 60)).toEqual({ head: 'h3', parts: [], incomplete: true });
      // Single use all the same.
      expect(await store.claim('ev', 60)).toBeUndefined();
    } finally {
      direct.disconnect();
      await store.close();
    }
  });

  it('fails fast while Redis is down, says so in health, counts errors, and recovers', async () => {
    const port = await freePort();
    const own = await startRedis(port);
    const errors: string[] = [];
    const store = createRedisResumeStore({
      url: own.url,
      log: log.logger,
      onError: (op) => errors.push(op),
    });
    try {
      expect(await store.save('k', wholeRecord('v'), 60)).toBe('saved');
      await own.proc.stop();
      const failed = await within(
        (async () => {
          for (;;) {
            const err = await store.save('k', wholeRecord('v'), 60).then(
              () => undefined,
              (e: unknown) => e,
            );
            if (err) return err;
          }
        })(),
        'a failed save once Redis is gone',
      );
      expect(failed).toBeInstanceOf(ResumeStoreError);
      // An outage once reconnecting fails (a close alone may be Redis's idle timeout).
      await within(
        (async () => {
          while ((await store.health()).ok) await new Promise((r) => setTimeout(r, 20));
        })(),
        'the store down once Redis is',
      );
      expect(errors).toContain('save');
      expect(errors).toContain('connection');

      const again = await startRedis(port);
      try {
        await within(
          (async () => {
            while (!(await store.health()).ok) await new Promise((r) => setTimeout(r, 20));
          })(),
          'the store back once Redis is',
          10_000,
        );
        expect(await store.save('k', wholeRecord('v2'), 60)).toBe('saved');
        expect(await store.claim('k', 60)).toEqual({ head: 'v2', parts: [] });
      } finally {
        await again.close();
      }
    } finally {
      await store.close();
      await own.close();
    }
  });

  it('tells the instance whose session wrote a record when another instance claims it', async () => {
    // Two instances: each its own connections to one Redis, and its own sessions.
    const make = () =>
      createResumer({
        store: createRedisResumeStore({ url: redis.url, log: log.logger }),
        ttlS: 60,
        saveDelayMs: 5,
        loadTimeoutMs: 2_000,
        log: log.logger,
      });
    const here = make();
    const there = make();
    try {
      let told!: () => void;
      const takenOver = new Promise<void>((resolve) => (told = resolve));
      const tracker = here.track(
        'sess_far',
        { snapshot: () => ({ items: ['a'] }) },
        undefined,
        log.logger,
        () => told(),
      );
      await tracker.flush();
      expect(await there.claim(tracker.token, undefined)).toMatchObject({ ok: true });
      // Told without writing anything more.
      await within(takenOver, 'the writer told of the claim', 10_000);
      tracker.stop();
    } finally {
      await here.close();
      await there.close();
    }
  });

  it('keeps a conversation whose claim Redis answered too late, for the same token to claim again', async () => {
    const port = await freePort();
    const own = await startRedis(port);
    const options = (loadTimeoutMs: number) => ({
      store: createRedisResumeStore({ url: own.url, log: log.logger }),
      ttlS: 60,
      saveDelayMs: 5,
      loadTimeoutMs,
      log: log.logger,
    });
    const writer = createResumer(options(2_000));
    // Short while Redis is stopped; long after, so a busy machine's slow answer is not taken for a stall.
    const claiming = options(200);
    const claimer = createResumer(claiming);
    try {
      const tracker = writer.track(
        'sess_stall',
        { snapshot: () => ({ items: ['a'] }) },
        undefined,
        log.logger,
      );
      await tracker.flush();
      tracker.stop();
      // Redis stalls (stopped): the claim waits out its time, and Redis runs it when it wakes.
      own.proc.child.kill('SIGSTOP');
      let first;
      try {
        first = await claimer.claim(tracker.token, undefined);
      } finally {
        own.proc.child.kill('SIGCONT');
      }
      expect(first).toMatchObject({ ok: false, reason: 'store_unavailable' });
      expect((first as { message: string }).message).toContain(
        'The conversation is kept: connect again with the same resume token to try again.',
      );
      claiming.loadTimeoutMs = 60_000;
      // Redis runs a connection's commands in order: the late claim, its undoing, then this.
      expect(await claimer.claim(tracker.token, undefined)).toMatchObject({
        ok: true,
        sessionId: 'sess_stall',
        state: { items: ['a'] },
      });
      expect(await claimer.claim(tracker.token, undefined)).toMatchObject({
        ok: false,
        reason: 'not_found',
      });
    } finally {
      await writer.close();
      await claimer.close();
      await own.close();
    }
  });

  it('has every open session write its record again when Redis comes back empty', async () => {
    const port = await freePort();
    const own = await startRedis(port);
    const store = createRedisResumeStore({ url: own.url, log: log.logger });
    const resumer = createResumer({
      store,
      ttlS: 60,
      saveDelayMs: 5,
      loadTimeoutMs: 2_000,
      rewriteSpreadMs: 0,
      log: log.logger,
    });
    const tracker = resumer.track(
      'sess_idle',
      { snapshot: () => ({ items: ['a'] }) },
      undefined,
      log.logger,
    );
    let again: RedisProc | undefined;
    try {
      await tracker.flush();
      // Restarted without persistence: every record is gone, and this session changes nothing.
      await own.proc.stop();
      await within(
        (async () => {
          while ((await store.health()).ok) await new Promise((r) => setTimeout(r, 20));
        })(),
        'the store down once Redis is',
      );
      again = await startRedis(port);
      const direct = new Redis(again.url);
      try {
        await within(
          (async () => {
            while ((await direct.dbsize()) === 0) await new Promise((r) => setTimeout(r, 20));
          })(),
          'the record written again',
          10_000,
        );
      } finally {
        direct.disconnect();
      }
      expect(await resumer.claim(tracker.token, undefined)).toMatchObject({
        ok: true,
        sessionId: 'sess_idle',
        state: { items: ['a'] },
      });
    } finally {
      tracker.stop();
      await resumer.close();
      await again?.close();
      await own.close();
    }
  });
});
