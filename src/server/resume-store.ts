/**
 * Where resumable conversations are kept between connections: in this
 * process's memory (the default), or in Redis (`REDIS_URL`), shared by every
 * instance and worker.
 *
 * Records are opaque strings under opaque keys (the caller hashes tokens, so
 * a store never holds one). A record can be claimed once: claiming replaces
 * it with a tombstone for the rest of its TTL, and later saves under that
 * key are refused, so a session that is still closing on one instance can
 * never bring back a conversation another connection has taken over.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { TroupeError } from '../errors.js';

/** What a claimed key holds instead of its record. */
const TOMBSTONE = 'claimed';
/** Key prefix in Redis. */
const KEY_PREFIX = 'troupe:resume:';
/** Expired records are swept from memory this often. */
const SWEEP_MS = 60_000;
/** A Redis command that takes longer fails (the session keeps running). */
const REDIS_COMMAND_TIMEOUT_MS = 1_000;
/** How long the first connection attempt to Redis may take. */
const REDIS_CONNECT_TIMEOUT_MS = 2_000;
/** The longest pause between reconnection attempts. */
const REDIS_MAX_RETRY_MS = 2_000;

/** What a save did: `claimed` means another connection took the conversation over. */
export type SaveResult = 'saved' | 'claimed';

/** A resume store. */
export interface ResumeStore {
  readonly kind: 'memory' | 'redis' | 'cluster';
  /** Writes `value` under `key` for `ttlS` seconds, unless the key was claimed. */
  save(key: string, value: string, ttlS: number): Promise<SaveResult>;
  /** Returns the record and leaves a tombstone; undefined when absent, expired or claimed. */
  claim(key: string, ttlS: number): Promise<string | undefined>;
  /** Whether the store answers now. */
  health(): Promise<{ ok: boolean; detail?: string }>;
  close(): Promise<void>;
}

/** A store that failed (Redis down, a timeout): the session keeps running without resume. */
export class ResumeStoreError extends TroupeError {
  override name = 'ResumeStoreError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('E_RESUME_STORE', message, { ...options, retryable: true });
  }
}

/**
 * A store in this process's memory: a conversation resumes on this process only.
 *
 * @example const store = createMemoryResumeStore();
 */
export function createMemoryResumeStore(): ResumeStore & {
  /** Records held now (tombstones included). */
  readonly size: number;
} {
  const records = new Map<string, { value: string; expiresAt: number }>();
  const live = (key: string): string | undefined => {
    const r = records.get(key);
    if (r === undefined) return undefined;
    if (r.expiresAt <= Date.now()) {
      records.delete(key);
      return undefined;
    }
    return r.value;
  };
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [key, r] of records) if (r.expiresAt <= now) records.delete(key);
  }, SWEEP_MS).unref();
  return {
    kind: 'memory',
    get size() {
      return records.size;
    },
    save(key, value, ttlS) {
      if (live(key) === TOMBSTONE) return Promise.resolve('claimed');
      records.set(key, { value, expiresAt: Date.now() + ttlS * 1000 });
      return Promise.resolve('saved');
    },
    claim(key, ttlS) {
      const value = live(key);
      if (value === undefined || value === TOMBSTONE) return Promise.resolve(undefined);
      records.set(key, { value: TOMBSTONE, expiresAt: Date.now() + ttlS * 1000 });
      return Promise.resolve(value);
    },
    health() {
      return Promise.resolve({ ok: true });
    },
    close() {
      clearInterval(sweep);
      records.clear();
      return Promise.resolve();
    },
  };
}

/** Options of {@link createRedisResumeStore}. */
export interface RedisResumeStoreOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…` */
  url: string;
  log: Logger;
  /** Called on each failed command or lost connection (for a metric). */
  onError?: (op: 'save' | 'claim' | 'connection') => void;
}

interface ResumeCommands {
  troupeSave(key: string, value: string, ttlS: number): Promise<number>;
  troupeClaim(key: string, ttlS: number): Promise<string | null>;
}

/**
 * A store in Redis, shared by every instance. Commands fail at once while
 * Redis is unreachable (no offline queue): sessions go on without resume,
 * and the client reconnects in the background.
 *
 * @example const store = createRedisResumeStore({ url: 'redis://127.0.0.1:6379', log });
 */
export function createRedisResumeStore(options: RedisResumeStoreOptions): ResumeStore {
  const { log, onError } = options;
  const redis = new Redis(options.url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(attempt * 200, REDIS_MAX_RETRY_MS),
    keyPrefix: KEY_PREFIX,
  }) as Redis & ResumeCommands;
  // Atomic: a claimed key is never overwritten; a claim leaves a tombstone.
  redis.defineCommand('troupeSave', {
    numberOfKeys: 1,
    lua: `if redis.call('GET', KEYS[1]) == '${TOMBSTONE}' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1`,
  });
  redis.defineCommand('troupeClaim', {
    numberOfKeys: 1,
    lua: `local v = redis.call('GET', KEYS[1])
if (not v) or v == '${TOMBSTONE}' then return false end
redis.call('SET', KEYS[1], '${TOMBSTONE}', 'EX', ARGV[1])
return v`,
  });
  let down = false;
  let closing = false;
  let lastError = '';
  // Logged and counted once per outage, not at every reconnection attempt.
  const markDown = (): void => {
    if (down || closing) return;
    down = true;
    onError?.('connection');
    log.warn({ err: lastError || 'connection closed' }, 'resume store unavailable');
  };
  redis.on('error', (err: Error) => {
    lastError = err.message;
    markDown();
  });
  redis.on('close', markDown);
  let everReady = false;
  redis.on('ready', () => {
    if (down) log.info({}, 'resume store available again');
    down = false;
    everReady = true;
  });
  /** The first commands wait for the first connection; later ones fail at once while it is down. */
  const connected = async (): Promise<void> => {
    if (redis.status === 'ready' || everReady) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        redis.off('ready', ready);
        reject(new Error(`no connection within ${REDIS_CONNECT_TIMEOUT_MS} ms`));
      }, REDIS_CONNECT_TIMEOUT_MS);
      const ready = (): void => {
        clearTimeout(timer);
        resolve();
      };
      redis.once('ready', ready);
    });
  };
  const fail = (op: 'save' | 'claim', err: unknown): never => {
    onError?.(op);
    throw new ResumeStoreError(`Redis ${op} failed: ${(err as Error).message}`, { cause: err });
  };
  return {
    kind: 'redis',
    async save(key, value, ttlS) {
      try {
        await connected();
        return (await redis.troupeSave(key, value, Math.ceil(ttlS))) === 1 ? 'saved' : 'claimed';
      } catch (err) {
        return fail('save', err);
      }
    },
    async claim(key, ttlS) {
      try {
        await connected();
        return (await redis.troupeClaim(key, Math.ceil(ttlS))) ?? undefined;
      } catch (err) {
        return fail('claim', err);
      }
    },
    health() {
      return Promise.resolve(
        redis.status === 'ready'
          ? { ok: true }
          : { ok: false, detail: `redis ${redis.status}${lastError ? `: ${lastError}` : ''}` },
      );
    },
    async close() {
      closing = true;
      try {
        await redis.quit();
      } catch {
        redis.disconnect();
      }
    },
  };
}
