/**
 * What the Redis resume store tells `/health` and the log, against a real
 * redis-server: saves Redis refuses, a connection Redis closes while idle,
 * an outage, a database Redis refuses, a Redis Cluster. What it stores is in
 * resume-store.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisResumeStore } from '../../src/server/redis-store.js';
import { wholeRecord } from '../../src/server/resume-store.js';
import { createLogger } from '../../src/server/logger.js';
import {
  freePort,
  hasProgram,
  needs,
  startProcess,
  startRedis,
  type RedisProc,
} from '../deploy/processes.js';
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

/** Two redis-servers in cluster mode, each serving half the hash slots, once the cluster is up. */
async function startRedisCluster(): Promise<{ urls: string[]; close(): Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'troupe-redis-cluster-'));
  const ports = [await freePort(), await freePort()];
  const procs = ports.map((port) =>
    startProcess(hasProgram('redis-server') ?? 'redis-server', [
      ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''],
      ...['--appendonly', 'no', '--cluster-enabled', 'yes'],
      ...['--cluster-config-file', path.join(dir, `nodes-${port}.conf`)],
    ]),
  );
  const close = async (): Promise<void> => {
    await Promise.all(procs.map((p) => p.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(procs.map((p) => p.waitFor(/Ready to accept connections/, 'redis-server')));
    const [a, b] = ports.map((port) => new Redis(port, '127.0.0.1'));
    try {
      await a!.cluster('ADDSLOTSRANGE', 0, 8191);
      await b!.cluster('ADDSLOTSRANGE', 8192, 16383);
      await a!.cluster('MEET', '127.0.0.1', ports[1]!);
      await within(
        (async () => {
          while (!/cluster_state:ok/.test(String(await a!.cluster('INFO')))) {
            await new Promise((r) => setTimeout(r, 50));
          }
        })(),
        'the cluster up',
      );
    } finally {
      a!.disconnect();
      b!.disconnect();
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { urls: ports.map((port) => `redis://127.0.0.1:${port}`), close };
}

describe.runIf(needs('redis-server'))(
  'the Redis resume store in health and the log (redis-server)',
  () => {
    let redis: RedisProc;

    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(() => redis?.close());

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

    it('lets a save made while a closed connection comes back wait for it, not fail', async () => {
      const own = await startRedis();
      const direct = new Redis(own.url);
      const log = capturedLog();
      let rewrites = 0;
      const store = createRedisResumeStore({ url: own.url, log: log.logger });
      store.onReconnect?.(() => rewrites++);
      try {
        expect(await store.save('k', wholeRecord('v'), 60)).toBe('saved');
        const closed = log.next((l) => l.msg === 'resume store connection closed', 'the close');
        await direct.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
        await closed;
        // Before the first reconnection attempt: the save waits for the connection, then lands.
        expect(await store.save('k', wholeRecord('v2'), 60)).toBe('saved');
        const back = await log.next((l) => l.msg === 'resume store reconnected', 'the store back');
        expect(back).toMatchObject({ restarted: false, missed: false });
        expect(rewrites).toBe(0);
        expect(log.at(40)).toEqual([]);
        expect(await store.health()).toEqual({ ok: true });
      } finally {
        direct.disconnect();
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

    it('says a Redis Cluster is not supported, once, in the log and in health', async () => {
      const cluster = await startRedisCluster();
      const log = capturedLog();
      const store = createRedisResumeStore({ url: cluster.urls[0]!, log: log.logger });
      const selecting = createRedisResumeStore({ url: `${cluster.urls[0]}/1`, log: log.logger });
      const direct = new Redis(cluster.urls[0]!);
      const unsupported =
        'Redis Cluster is not supported: point REDIS_URL at a single Redis (a primary, with replicas for failover)';
      try {
        // A record's keys hash by the name in braces: one here, one the other node serves.
        const slot = async (key: string) => Number(await direct.cluster('KEYSLOT', key));
        const names = Array.from({ length: 50 }, (_, i) => `c${i}`);
        const slots = await Promise.all(names.map(slot));
        const local = names[slots.findIndex((n) => n < 8192)]!;
        const elsewhere = names[slots.findIndex((n) => n >= 8192)]!;
        await expect(store.save(elsewhere, wholeRecord('v'), 60)).rejects.toThrow(/MOVED/);
        expect(await store.health()).toEqual({ ok: false, detail: unsupported });
        // Keys this node serves still work; the store is no less unsupported.
        expect(await store.save(local, wholeRecord('v'), 60)).toBe('saved');
        await expect(store.claim(elsewhere, 60)).rejects.toThrow(/MOVED/);
        expect(await store.health()).toEqual({ ok: false, detail: unsupported });
        // A database number: Redis refuses the SELECT in cluster mode.
        await expect(selecting.save(local, wholeRecord('v'), 60)).rejects.toThrow(/cluster mode/);
        expect(await selecting.health()).toEqual({ ok: false, detail: unsupported });
        expect(log.at(50).map((l) => l.msg)).toEqual([unsupported, unsupported]);
        expect(log.at(40)).toEqual([]);
      } finally {
        direct.disconnect();
        await store.close();
        await selecting.close();
        await cluster.close();
      }
    });
  },
);

describe('the Redis store before its first connection', () => {
  it('lets many saves wait for it without a listener each (Node would warn of a leak on stderr)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    // Nothing listens there: each save waits for the first connection, then fails.
    const store = createRedisResumeStore({
      url: `redis://127.0.0.1:${await freePort()}`,
      log: capturedLog().logger,
    });
    try {
      const saves = Array.from({ length: 20 }, (_, i) =>
        store.save(`key${i}`, wholeRecord('{}', []), 60).then(
          () => 'saved',
          () => 'failed',
        ),
      );
      expect(await within(Promise.all(saves), 'the saves to fail')).toEqual(
        Array(20).fill('failed'),
      );
      // A warning is emitted on the next tick after the listener that passes the limit.
      await new Promise((r) => setImmediate(r));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
      await store.close();
    }
  });
});
