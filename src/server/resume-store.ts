/**
 * Where resumable conversations are kept between connections: in this
 * process's memory (the default), or in Redis (`REDIS_URL`), shared by every
 * instance and worker.
 *
 * Records are opaque strings under opaque keys (the caller hashes tokens, so
 * a store never holds one): a small head and a list of parts (the
 * conversation's turns). A save sends the head and only the parts that
 * changed since the writer's last save (usually the turn just ended), so a
 * write costs the same at turn 50 as at turn 5. A record can be claimed
 * once: claiming replaces it with a tombstone for the rest of its TTL, and
 * later saves under that key are refused, so a session that is still
 * closing on one instance can never bring back a conversation another
 * connection has taken over. The in-memory store can also hold a reader of
 * a live session rather than its text (`hold`): it reads it only if the
 * record is claimed.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { TroupeError } from '../errors.js';

/** What a claimed key holds instead of its record (a hash field in Redis). */
const TOMBSTONE = 'claimed';
/** Key prefix in Redis. */
const KEY_PREFIX = 'troupe:resume:';
/** Expired records are swept from memory this often. */
const SWEEP_MS = 60_000;
/** The in-memory store's room for records held as text, in characters, unless told otherwise. */
export const DEFAULT_MEMORY_STORE_MAX_CHARS = 256 * 1024 * 1024;
/** A Redis command that takes longer fails (the session keeps running). */
const REDIS_COMMAND_TIMEOUT_MS = 1_000;
/** How long the first connection attempt to Redis may take. */
const REDIS_CONNECT_TIMEOUT_MS = 2_000;
/** The longest pause between reconnection attempts. */
const REDIS_MAX_RETRY_MS = 2_000;

/**
 * A record as a store keeps it: a small head, rewritten at every save, and
 * parts (a conversation's turns), which a save appends to.
 */
export interface StoredRecord {
  head: string;
  parts: string[];
  /**
   * The store no longer holds the conversation whole (Redis evicted its
   * parts, or was too full for its last save): it cannot be given back.
   */
  incomplete?: true;
}

/**
 * One save: the head, the first `keep` parts the store already holds kept,
 * then `parts` after them. A save that keeps parts builds on the writer's
 * save numbered `after`; a store that did not apply that one answers
 * `stale`, and the writer saves the whole record (`keep` 0) instead.
 */
export interface RecordUpdate {
  head: string;
  /** Parts kept from the record as stored (0: the whole record is in this save). */
  keep: number;
  parts: string[];
  /** This save's number, rising per writer (per key). */
  seq: number;
  /** The number of the save this one builds on; null with `keep` 0. */
  after: number | null;
}

/** Writes a record from a session's live state (see {@link ResumeStore.hold}). */
export type RecordReader = () => StoredRecord;

/** What a save did: `claimed` means another connection took the conversation over. */
export type SaveResult = 'saved' | 'claimed' | 'stale';

/** A resume store. */
export interface ResumeStore {
  readonly kind: 'memory' | 'redis' | 'cluster';
  /** Applies `update` under `key` for `ttlS` seconds, unless the key was claimed. */
  save(key: string, update: RecordUpdate, ttlS: number): Promise<SaveResult>;
  /**
   * A store that sends the saves of one turn of the event loop together has
   * this: it sends what it holds now (before the caller goes on, say, to
   * tell a client its turn ended). Writers then send their pending saves
   * with another's rather than each on its own.
   */
  sendNow?(): void;
  /**
   * A store in this process's memory has this: it keeps `read`, which
   * writes the session's record from its live state, and calls it only if
   * the record is claimed. A change then costs nothing to save; a claim
   * gets the state as it is at that moment. The writer saves the record as
   * text when its session ends (and the reader is let go), and the TTL
   * starts then: a held record lasts as long as its session. `claimed`: as
   * for {@link save}.
   */
  hold?(key: string, read: RecordReader): 'saved' | 'claimed';
  /**
   * Returns the record and leaves a tombstone; undefined when absent, expired
   * or claimed. With `claimId`, a store that has {@link settle} keeps the
   * record under the tombstone until the claim is settled.
   */
  claim(key: string, ttlS: number, claimId?: string): Promise<StoredRecord | undefined>;
  /**
   * A store whose answer may come after the claimer stopped waiting (a
   * stalled Redis still runs the claim when it wakes) has this. `used`: the
   * record kept under claim `claimId` goes for good. Not used: the claim is
   * undone, if no other came after it, and the conversation can be claimed
   * again. A store applies a connection's commands in order, so a settle
   * sent after a claim that timed out meets it.
   */
  settle?(key: string, claimId: string, used: boolean): void;
  /**
   * A store that may have lost what it held while it was unreachable (a
   * Redis restarted without persistence) has this: `listener` is called
   * each time it is reachable again, and writers send their records whole.
   */
  onReconnect?(listener: () => void): void;
  /**
   * A store shared by several processes may have this: `listener` is called
   * with the key of a record this process writes when another process
   * claimed it (a client resumed there while its old connection is here).
   */
  onClaimedElsewhere?(listener: (key: string) => void): void;
  /**
   * A store shared by processes that can ask the writer first (the
   * primary's, for its workers) has this: before another process claims a
   * record this one writes, `give` is asked for it. It closes that session
   * (as taken over) and returns its record as it is then, its cut reply
   * recorded, or undefined when it has no such session; the claim hands
   * that over rather than the last write.
   */
  onHandover?(give: (key: string) => Promise<StoredRecord | undefined>): void;
  /** Whether the store answers now. */
  health(): Promise<{ ok: boolean; detail?: string }>;
  close(): Promise<void>;
}

/** A whole record as one save (`keep` 0): for tests and tools. */
export function wholeRecord(head: string, parts: string[] = [], seq = 1): RecordUpdate {
  return { head, keep: 0, parts, seq, after: null };
}

/** A store that failed (Redis down, a timeout): the session keeps running without resume. */
export class ResumeStoreError extends TroupeError {
  override name = 'ResumeStoreError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('E_RESUME_STORE', message, { ...options, retryable: true });
  }
}

/** Options of {@link createMemoryResumeStore}. */
export interface MemoryResumeStoreOptions {
  /**
   * Hold a reader of each live session ({@link ResumeStore.hold}) rather
   * than the text of its every change. `false` gives a store that is
   * written as Redis and the cluster store are (for tests and benches of
   * that path). @defaultValue true
   */
  readsLive?: boolean;
  /**
   * Most characters of records held as text (the conversations of ended
   * sessions, and with workers every session's): past it the records
   * written longest ago are let go, so clients that drop conversations
   * cannot fill the process's memory. @defaultValue 256 MiB
   */
  maxChars?: number;
  /** Told of each record let go for room, with its size. */
  onEvicted?: (chars: number) => void;
  /** Told of each save refused (a record over the whole room), for a metric. */
  onError?: (op: 'save') => void;
}

/**
 * A store in this process's memory: a conversation resumes on this process only.
 *
 * @example const store = createMemoryResumeStore();
 */
export function createMemoryResumeStore(options: MemoryResumeStoreOptions = {}): ResumeStore & {
  /** Records held now (tombstones included). */
  readonly size: number;
} {
  type Entry = { expiresAt: number } & (
    | { kind: 'text'; record: StoredRecord & { seq: number }; chars?: number }
    | { kind: 'live'; read: RecordReader }
    | { kind: 'claimed' }
  );
  // In the order they were last written: the first are let go first for room.
  const records = new Map<string, Entry>();
  const maxChars = options.maxChars ?? DEFAULT_MEMORY_STORE_MAX_CHARS;
  /** Characters of the text records held now. */
  let chars = 0;
  /** A text record's characters, counted once, when it is put. */
  const sizeOf = (r: Entry | undefined): number => (r?.kind === 'text' ? (r.chars ?? 0) : 0);
  const drop = (key: string): void => {
    chars -= sizeOf(records.get(key));
    records.delete(key);
  };
  /** Sets a record as the last written, and makes room for it (never by letting it go itself). */
  const put = (key: string, entry: Entry): void => {
    if (entry.kind === 'text') {
      const { head, parts } = entry.record;
      entry.chars = head.length + parts.reduce((n, p) => n + p.length, 0);
    }
    const size = sizeOf(entry);
    if (size > maxChars) {
      // What was held under the key goes too: a resume of an older state
      // would lose the newer items without a word (resume_failed says so),
      // and a live session's reader would hold the ended session for good.
      if (records.get(key)?.kind !== 'claimed') drop(key);
      throw new ResumeStoreError(
        `a record of ${size} characters is over the in-memory store's ${maxChars} (RESUME_MEMORY_MB)`,
      );
    }
    drop(key);
    for (const [old, r] of records) {
      if (chars + size <= maxChars) break;
      if (r.kind !== 'text') continue;
      options.onEvicted?.(sizeOf(r));
      drop(old);
    }
    records.set(key, entry);
    chars += size;
  };
  const live = (key: string): Entry | undefined => {
    const r = records.get(key);
    if (r === undefined) return undefined;
    if (r.expiresAt <= Date.now()) {
      drop(key);
      return undefined;
    }
    return r;
  };
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [key, r] of records) if (r.expiresAt <= now) drop(key);
  }, SWEEP_MS).unref();
  const hold: NonNullable<ResumeStore['hold']> = (key, read) => {
    if (live(key)?.kind === 'claimed') return 'claimed';
    // The session is running: its record lasts as long (the TTL starts when
    // the session ends and the writer saves it as text).
    put(key, { kind: 'live', read, expiresAt: Number.POSITIVE_INFINITY });
    return 'saved';
  };
  return {
    kind: 'memory',
    get size() {
      return records.size;
    },
    save(key, update, ttlS) {
      const r = live(key);
      if (r?.kind === 'claimed') return Promise.resolve('claimed');
      const held = r?.kind === 'text' ? r.record : undefined;
      const expiresAt = Date.now() + ttlS * 1000;
      let record: StoredRecord & { seq: number };
      if (update.keep > 0) {
        if (held === undefined || held.seq !== update.after || update.keep > held.parts.length) {
          return Promise.resolve('stale');
        }
        const parts = held.parts.slice(0, update.keep);
        parts.push(...update.parts);
        record = { head: update.head, parts, seq: update.seq };
      } else {
        record = { head: update.head, parts: update.parts.slice(), seq: update.seq };
      }
      try {
        put(key, { kind: 'text', record, expiresAt });
      } catch (err) {
        options.onError?.('save');
        return Promise.reject(err as Error);
      }
      return Promise.resolve('saved');
    },
    ...(options.readsLive === false ? {} : { hold }),
    claim(key, ttlS) {
      const r = live(key);
      if (r === undefined || r.kind === 'claimed') return Promise.resolve(undefined);
      let record: StoredRecord;
      try {
        // A live session's record is written now.
        record = r.kind === 'text' ? { head: r.record.head, parts: r.record.parts } : r.read();
      } catch (err) {
        // The record stays: the claim failed, as a store that did not answer.
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      put(key, { kind: 'claimed', expiresAt: Date.now() + ttlS * 1000 });
      return Promise.resolve(record);
    },
    health() {
      return Promise.resolve({ ok: true });
    },
    close() {
      clearInterval(sweep);
      records.clear();
      chars = 0;
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
  troupeSave(
    head: string,
    parts: string,
    ttlS: number,
    record: string,
    keep: number,
    seq: number,
    after: number | string,
    ...added: string[]
  ): Promise<number>;
  troupeClaim(
    head: string,
    parts: string,
    ttlS: number,
    claimId: string,
  ): Promise<[string, string[]] | [string] | null>;
  troupeSettle(head: string, parts: string, claimId: string, used: '1' | '0'): Promise<number>;
}

/** Parts pushed per RPUSH in the save script (Lua's unpack has a limit). */
const PUSH_BATCH = 500;

/**
 * Atomic save. KEYS: the record's hash (fields `head`, `seq`, `n`, or the
 * tombstone's `claimed`) and its parts list. ARGV: TTL, head, keep, seq,
 * after, then the parts to append. 0: claimed; -1: stale (the save it builds
 * on is not the last applied, or its parts are no longer all there: Redis
 * evicted the list); 1: saved. Only what changed crosses the wire. `n` is
 * the number of parts, for a claim to check.
 *
 * The first write is the `HSET`: Redis over its `maxmemory` refuses a
 * script's first write that may grow memory, and lets every write after it
 * through, so a script that began with `LTRIM` or `DEL` (which shrink) wrote
 * past the limit. A full Redis now refuses the save whole, and the record,
 * which would be an older state of the conversation, loses its turns and
 * `seq` (removing is let through): a claim gives it as incomplete, a resume
 * says so, and the next save writes it whole.
 */
const SAVE_LUA = `if redis.call('HEXISTS', KEYS[1], '${TOMBSTONE}') == 1 then return 0 end
local keep = tonumber(ARGV[3])
if keep > 0 then
  local last = redis.call('HMGET', KEYS[1], 'seq', 'n')
  if last[1] ~= ARGV[5] then return -1 end
  local n = tonumber(last[2])
  local len = redis.call('LLEN', KEYS[2])
  if len < keep or (n and len ~= n) then return -1 end
end
local set = redis.pcall('HSET', KEYS[1], 'head', ARGV[2], 'seq', ARGV[4], 'n', keep + #ARGV - 5)
if type(set) == 'table' and set.err then
  redis.call('HDEL', KEYS[1], 'seq')
  redis.call('DEL', KEYS[2])
  return redis.error_reply(set.err)
end
if keep > 0 then
  redis.call('LTRIM', KEYS[2], 0, keep - 1)
else
  redis.call('DEL', KEYS[2])
end
for i = 6, #ARGV, ${PUSH_BATCH} do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + ${PUSH_BATCH} - 1, #ARGV)))
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1`;

/**
 * Atomic, single-use claim: the record, and a tombstone (the claim's id,
 * ARGV[2]) for the TTL; its head alone (no parts) when it is incomplete: the
 * list no longer holds the `n` parts the last save left (evicted), or a save
 * that did not fit took its `seq`. The record stays under the tombstone
 * until {@link SETTLE_LUA} (none: it goes at once).
 */
const CLAIM_LUA = `if redis.call('HEXISTS', KEYS[1], '${TOMBSTONE}') == 1 then return false end
local got = redis.call('HMGET', KEYS[1], 'head', 'seq', 'n')
local head, seq, n = got[1], got[2], tonumber(got[3])
if not head then return false end
local parts = redis.call('LRANGE', KEYS[2], 0, -1)
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[1], '${TOMBSTONE}', '1')
else
  redis.call('HSET', KEYS[1], '${TOMBSTONE}', ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
if not seq or (n and #parts ~= n) then return {head} end
return {head, parts}`;

/**
 * Settles claim ARGV[1], if it is still the key's: used (ARGV[2] '1'), the
 * record goes and the tombstone stays; not used, the tombstone goes and the
 * record can be claimed again. 1: settled; 0: another claim's, or none.
 */
const SETTLE_LUA = `if redis.call('HGET', KEYS[1], '${TOMBSTONE}') ~= ARGV[1] then return 0 end
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[1], 'head', 'seq', 'n')
  redis.call('DEL', KEYS[2])
else
  redis.call('HDEL', KEYS[1], '${TOMBSTONE}')
end
return 1`;

/** A record's keys: one hash slot (`{…}`), so a Redis Cluster can run the scripts too. */
function redisKeys(key: string): [string, string] {
  return [`{${key}}`, `{${key}}:parts`];
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
  // Atomic: a claimed key is never written again; a claim leaves a tombstone.
  redis.defineCommand('troupeSave', { numberOfKeys: 2, lua: SAVE_LUA });
  redis.defineCommand('troupeClaim', { numberOfKeys: 2, lua: CLAIM_LUA });
  redis.defineCommand('troupeSettle', { numberOfKeys: 2, lua: SETTLE_LUA });
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
  const reconnected: Array<() => void> = [];
  const claimedListeners: Array<(key: string) => void> = [];
  /** The connection that listens for claims (Redis takes no other commands on it). */
  let claimedNotices: Redis | undefined;
  redis.on('ready', () => {
    const wasDown = down;
    down = false;
    everReady = true;
    if (!wasDown) return;
    log.info({}, 'resume store available again');
    for (const listener of reconnected) listener();
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
    async save(key, update, ttlS) {
      try {
        await connected();
        const [head, parts] = redisKeys(key);
        const done = await redis.troupeSave(
          head,
          parts,
          Math.ceil(ttlS),
          update.head,
          update.keep,
          update.seq,
          update.after ?? '',
          ...update.parts,
        );
        return done === 1 ? 'saved' : done === 0 ? 'claimed' : 'stale';
      } catch (err) {
        return fail('save', err);
      }
    },
    async claim(key, ttlS, claimId = '') {
      try {
        await connected();
        const [head, parts] = redisKeys(key);
        const got = await redis.troupeClaim(head, parts, Math.ceil(ttlS), claimId);
        if (got === null) return undefined;
        // The instance whose session wrote it closes that session's connection at once.
        redis.publish(CLAIMED_CHANNEL, key).catch(() => undefined);
        return got.length === 2
          ? { head: got[0], parts: got[1] }
          : { head: got[0], parts: [], incomplete: true };
      } catch (err) {
        return fail('claim', err);
      }
    },
    settle(key, claimId, used) {
      const [head, parts] = redisKeys(key);
      // Sent even while the claim it settles waits: Redis runs them in order.
      redis.troupeSettle(head, parts, claimId, used ? '1' : '0').catch((err: Error) => {
        onError?.('claim');
        log.warn({ err: err.message, used }, 'resume claim not settled');
      });
    },
    onClaimedElsewhere(listener) {
      claimedListeners.push(listener);
      claimedNotices ??= subscribeClaims(redis, (key) => {
        for (const l of claimedListeners) l(key);
      });
    },
    onReconnect(listener) {
      reconnected.push(listener);
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
      for (const client of [redis, claimedNotices]) {
        try {
          await client?.quit();
        } catch {
          client?.disconnect();
        }
      }
    },
  };
}

/** The channel on which an instance says it claimed a record (its key), for the instance that wrote it. */
const CLAIMED_CHANNEL = 'troupe:resume:claimed';

/** A second connection, subscribed to claims each time it connects. */
function subscribeClaims(redis: Redis, onClaimed: (key: string) => void): Redis {
  const sub = redis.duplicate({ keyPrefix: '', autoResubscribe: false });
  // Its failures are the main connection's too, and said there.
  sub.on('error', () => undefined);
  sub.on('message', (channel: string, key: string) => {
    if (channel === CLAIMED_CHANNEL) onClaimed(key);
  });
  // Each time it connects (Redis may be down at first, or restart).
  sub.on('ready', () => void sub.subscribe(CLAIMED_CHANNEL).catch(() => undefined));
  return sub;
}
