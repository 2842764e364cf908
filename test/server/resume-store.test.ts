import { once } from 'node:events';
import { Writable } from 'node:stream';
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
import { request } from '../helpers/http.js';
import { startTestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

type LogLine = { level: number; msg: string; err?: string } & Record<string, unknown>;

/** A debug logger whose lines a test reads, and waits for. */
function capturedLog() {
  const lines: LogLine[] = [];
  const listeners = new Set<() => void>();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) {
        lines.push(JSON.parse(l) as LogLine);
      }
      for (const listener of listeners) listener();
      done();
    },
  });
  return {
    logger: createLogger({ level: 'debug', content: false }, sink),
    lines,
    /** The lines at `level` (pino's number: 40 warn, 50 error). */
    at: (level: number) => lines.filter((l) => l.level === level),
    /** The first line that matches, once there is one. */
    next(match: (line: LogLine) => boolean, what: string): Promise<LogLine> {
      return within(
        new Promise((resolve) => {
          const check = (): void => {
            const line = lines.find(match);
            if (!line) return;
            listeners.delete(check);
            resolve(line);
          };
          listeners.add(check);
          check();
        }),
        what,
      );
    },
  };
}

/** Calls `probe` every 10 ms until `until` settles, and gives every answer. */
async function sampleUntil<T>(probe: () => Promise<T>, until: Promise<unknown>): Promise<T[]> {
  let done = false;
  void until.finally(() => (done = true));
  const seen: T[] = [];
  while (!done) {
    seen.push(await probe());
    await new Promise((r) => setTimeout(r, 10));
  }
  return seen;
}

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

  it('says in health that saves fail while Redis refuses them, with its reason, until one goes through', async () => {
    const own = await startRedis();
    const log = capturedLog();
    const errors: string[] = [];
    const store = createRedisResumeStore({
      url: own.url,
      log: log.logger,
      onError: (op) => errors.push(op),
    });
    const direct = new Redis(own.url);
    try {
      expect(await store.save('k', wholeRecord('secret words', ['more']), 60)).toBe('saved');
      // Full, with nothing it may evict: every save is refused, the connection is fine.
      await direct.config('SET', 'maxmemory-policy', 'noeviction');
      await direct.config('SET', 'maxmemory', '1');
      await expect(
        store.save('k', wholeRecord('secret words', ['more', 'again']), 60),
      ).rejects.toThrow(/OOM/);
      expect(await store.health()).toEqual({
        ok: false,
        detail: "redis saves failing: OOM command not allowed when used memory > 'maxmemory'.",
      });
      await expect(store.save('k2', wholeRecord('h'), 60)).rejects.toThrow(/OOM/);
      expect(log.at(40).map((l) => l.msg)).toEqual(['resume store saves failing']);
      await direct.config('SET', 'maxmemory', '0');
      expect(await store.save('k2', wholeRecord('h'), 60)).toBe('saved');
      expect(await store.health()).toEqual({ ok: true });

      // A read-only replica: claims are refused too, and a claim that goes through clears it.
      await direct.replicaof('127.0.0.1', String(await freePort()));
      await expect(store.claim('k', 60)).rejects.toThrow(/READONLY/);
      expect(await store.health()).toMatchObject({
        ok: false,
        detail: /^redis saves failing: READONLY You can't write against a read only replica\.?$/,
      });
      await direct.replicaof('NO', 'ONE');
      expect(await store.claim('k', 60)).toMatchObject({ head: 'secret words' });
      expect(await store.health()).toEqual({ ok: true });
      expect(errors).toEqual(['save', 'save', 'claim']);
      expect(log.lines.map((l) => l.msg).filter((m) => /saves/.test(m))).toEqual([
        'resume store saves failing',
        'resume store saves succeeding again',
        'resume store saves failing',
        'resume store saves succeeding again',
      ]);
      expect(JSON.stringify(log.lines)).not.toContain('secret');

      // An ACL user that may not run a command the save script uses.
      await direct.acl('SETUSER', 'troupe', 'on', '>pw', '~*', '&*', '+@all', '-expire');
      const limited = createRedisResumeStore({
        url: own.url.replace('redis://', 'redis://troupe:pw@'),
        log: log.logger,
      });
      try {
        await expect(limited.save('k3', wholeRecord('h'), 60)).rejects.toThrow(/can't run/);
        expect(await limited.health()).toEqual({
          ok: false,
          detail:
            "redis saves failing: ERR The user executing the script can't run this command or subcommand",
        });
      } finally {
        await limited.close();
      }
    } finally {
      direct.disconnect();
      await store.close();
      await own.close();
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

  it('takes a connection Redis closed for idling and got back at once for no outage, and still reports a real one once', async () => {
    const port = await freePort();
    const own = await startRedis(port);
    const direct = new Redis(own.url);
    const log = capturedLog();
    const errors: string[] = [];
    let rewrites = 0;
    const store = createRedisResumeStore({
      url: own.url,
      log: log.logger,
      onError: (op) => errors.push(op),
      keepaliveMs: 0,
    });
    store.onReconnect?.(() => rewrites++);
    let again: RedisProc | undefined;
    try {
      expect(await store.save('k', wholeRecord('v'), 60)).toBe('saved');
      // Redis closes a client idle for a second; the store's is back at the first attempt.
      await direct.config('SET', 'timeout', '1');
      const back = log.next(
        (l) => /^resume store (reconnected|unavailable)$/.test(l.msg),
        'the idle connection closed by Redis, and back',
      );
      const healths = await sampleUntil(() => store.health(), back);
      expect(await back).toMatchObject({ msg: 'resume store reconnected', restarted: false });
      expect(healths.every((h) => h.ok)).toBe(true);
      expect(await store.health()).toEqual({ ok: true });
      expect(log.at(40)).toEqual([]);
      expect(errors).toEqual([]);
      // The same server, which kept its records: nothing to write again.
      expect(rewrites).toBe(0);
      expect(await store.save('k', wholeRecord('v2'), 60)).toBe('saved');

      // Stopped: an outage, logged and counted once however many attempts fail.
      direct.disconnect();
      await own.proc.stop();
      const down = await log.next((l) => l.msg === 'resume store unavailable', 'the outage');
      expect(down.err).toMatch(/ECONNREFUSED/);
      expect(await store.health()).toMatchObject({ ok: false, detail: /ECONNREFUSED/ });
      again = await startRedis(port);
      await log.next((l) => l.msg === 'resume store available again', 'the store back');
      expect(log.at(40)).toHaveLength(1);
      expect(errors).toEqual(['connection']);
      expect(rewrites).toBe(1);
      expect(await store.health()).toEqual({ ok: true });
    } finally {
      direct.disconnect();
      await store.close();
      await again?.close();
      await own.close();
    }
  });

  it("keeps its connection from idling past Redis's timeout with a PING", async () => {
    const own = await startRedis();
    const log = capturedLog();
    const store = createRedisResumeStore({ url: own.url, log: log.logger, keepaliveMs: 200 });
    const bystander = new Redis(own.url, { retryStrategy: () => null });
    try {
      await bystander.config('SET', 'timeout', '2');
      expect(await store.save('k', wholeRecord('v'), 60)).toBe('saved');
      // Idle since after the store's save: Redis closes it once it has idled past the timeout.
      const closed = once(bystander, 'close');
      await bystander.ping();
      await within(closed, 'the idle connection closed by Redis');
      expect(log.lines.filter((l) => /^resume store /.test(l.msg))).toEqual([]);
      expect(await store.save('k', wholeRecord('v2'), 60)).toBe('saved');
    } finally {
      bystander.disconnect();
      await store.close();
      await own.close();
    }
  });

  it('says why the connection went, not why an earlier one did', async () => {
    const port = await freePort();
    const own = await startRedis(port);
    const log = capturedLog();
    const store = createRedisResumeStore({ url: own.url, log: log.logger });
    let again: RedisProc | undefined;
    let direct: Redis | undefined;
    try {
      expect(await store.save('k', wholeRecord('v'), 60)).toBe('saved');
      await own.proc.stop();
      // Connections refused: the store's last error says so.
      await within(
        (async () => {
          while (!/ECONNREFUSED/.test((await store.health()).detail ?? '')) {
            await new Promise((r) => setTimeout(r, 20));
          }
        })(),
        'an outage with refused connections',
      );
      again = await startRedis(port);
      await log.next((l) => l.msg === 'resume store available again', 'the store back');
      // Redis drops the connection and answers nothing for a while: an outage of its own.
      direct = new Redis(again.url);
      await direct
        .pipeline()
        .client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
        .client('PAUSE', '3000', 'ALL')
        .exec();
      const lines = log.lines.length;
      const down = await log.next(
        (l) => l.msg === 'resume store unavailable' && log.lines.indexOf(l) >= lines,
        'the second outage',
      );
      expect(down.err).not.toMatch(/ECONNREFUSED/);
      expect((await store.health()).detail ?? '').not.toMatch(/ECONNREFUSED/);
    } finally {
      direct?.disconnect();
      await store.close();
      await again?.close();
      await own.close();
    }
  });

  it('writes nowhere while Redis refuses the database REDIS_URL names, and says so in health', async () => {
    const log = capturedLog();
    const errors: string[] = [];
    const store = createRedisResumeStore({
      url: `${redis.url}/99`,
      log: log.logger,
      onError: (op) => errors.push(op),
    });
    const direct = new Redis(redis.url);
    try {
      await expect(store.save('db99', wholeRecord('v'), 60)).rejects.toThrow(
        'ERR DB index is out of range',
      );
      await expect(store.claim('db99', 60, 'c1')).rejects.toThrow('ERR DB index is out of range');
      store.settle?.('db99', 'c1', false);
      expect(await store.health()).toEqual({
        ok: false,
        detail: 'redis: ERR DB index is out of range',
      });
      // Not in database 0, nor anywhere else.
      const keyspace = await direct.info('keyspace');
      expect(await direct.keys('*db99*')).toEqual([]);
      expect(keyspace).not.toMatch(/^db(?!0:)\d+:/m);
      expect(log.at(50).map((l) => [l.msg, l.err])).toEqual([
        ['resume store cannot use the database REDIS_URL names', 'ERR DB index is out of range'],
      ]);
      expect(log.lines.filter((l) => /unavailable|available again/.test(l.msg))).toEqual([]);
      expect(errors).toEqual(['connection', 'save', 'claim']);
    } finally {
      direct.disconnect();
      await store.close();
    }
  });

  it("makes the server's /health degraded with the database Redis refused", async () => {
    const t = await startTestServer({ env: { REDIS_URL: `${redis.url}/99` } });
    try {
      const resume = await within(
        (async () => {
          for (;;) {
            const health = (await request(`${t.url}/health`)).json() as {
              status: string;
              resume: { detail?: string };
            };
            // Until its first connection is made (statuses wait, connecting, connect).
            if (!/^redis (wait|connecting|connect)$/.test(health.resume.detail ?? ''))
              return health;
            await new Promise((r) => setTimeout(r, 20));
          }
        })(),
        "the store's first connection",
      );
      expect(resume).toMatchObject({
        status: 'degraded',
        resume: { store: 'redis', ok: false, detail: 'redis: ERR DB index is out of range' },
      });
    } finally {
      await t.close();
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
    const make = (loadTimeoutMs: number) =>
      createResumer({
        store: createRedisResumeStore({ url: own.url, log: log.logger }),
        ttlS: 60,
        saveDelayMs: 5,
        loadTimeoutMs,
        log: log.logger,
      });
    const writer = make(2_000);
    const claimer = make(200);
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
