import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ResumeStoreError,
  createMemoryResumeStore,
  createRedisResumeStore,
  type ResumeStore,
} from '../../src/server/resume-store.js';
import { createLogger } from '../../src/server/logger.js';
import { freePort, needs, startRedis, type RedisProc } from '../deploy/processes.js';
import { within } from '../helpers/wait.js';

/** The behaviour every store shares. */
function storeContract(make: () => ResumeStore) {
  it('gives a saved record back once, then never again', async () => {
    const store = make();
    expect(await store.save('k1', '{"a":1}', 60)).toBe('saved');
    expect(await store.save('k1', '{"a":2}', 60)).toBe('saved');
    expect(await store.claim('k1', 60)).toBe('{"a":2}');
    expect(await store.claim('k1', 60)).toBeUndefined();
    await store.close();
  });

  it('refuses a save under a claimed key, so a closing session cannot bring it back', async () => {
    const store = make();
    await store.save('k2', '{"a":1}', 60);
    await store.claim('k2', 60);
    expect(await store.save('k2', '{"a":3}', 60)).toBe('claimed');
    expect(await store.claim('k2', 60)).toBeUndefined();
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
    await store.save('k', 'v', 10);
    vi.setSystemTime(Date.now() + 9_000);
    await store.save('k2', 'v2', 10);
    vi.setSystemTime(Date.now() + 2_000);
    expect(await store.claim('k', 10)).toBeUndefined();
    expect(await store.claim('k2', 10)).toBe('v2');
    await store.close();
  });
});

describe.runIf(needs('redis-server'))('the Redis resume store (redis-server)', () => {
  let redis: RedisProc;
  const log = { logger: createLogger({ level: 'silent', content: false }) };

  beforeAll(async () => {
    redis = await startRedis();
  }, 40_000);
  afterAll(() => redis?.close());

  storeContract(() => createRedisResumeStore({ url: redis.url, log: log.logger }));

  it('writes records with the TTL, under hashed keys with the troupe prefix', async () => {
    const store = createRedisResumeStore({ url: redis.url, log: log.logger });
    await store.save('abc', '{"x":1}', 120);
    const direct = new Redis(redis.url);
    try {
      const ttl = await direct.pttl('troupe:resume:abc');
      expect(ttl).toBeGreaterThan(100_000);
      expect(ttl).toBeLessThanOrEqual(120_000);
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
      expect(await store.save('k', 'v', 60)).toBe('saved');
      await own.proc.stop();
      const failed = await within(
        (async () => {
          for (;;) {
            const err = await store.save('k', 'v', 60).then(
              () => undefined,
              (e: unknown) => e,
            );
            if (err) return err;
          }
        })(),
        'a failed save once Redis is gone',
      );
      expect(failed).toBeInstanceOf(ResumeStoreError);
      expect(await store.health()).toMatchObject({ ok: false });
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
        expect(await store.save('k', 'v2', 60)).toBe('saved');
        expect(await store.claim('k', 60)).toBe('v2');
      } finally {
        await again.close();
      }
    } finally {
      await store.close();
      await own.close();
    }
  }, 40_000);
});
