/**
 * The resume store in Redis (`REDIS_URL`), shared by every instance and
 * worker: what a store is and does is in resume-store.ts. A record is two
 * keys in one hash slot, written and claimed by Lua scripts so that each
 * save and claim is atomic.
 *
 * A connection that is up is not a store that works: `/health` hears of an
 * outage (not of a connection Redis closed and got back at once), of a
 * database Redis refused, of saves Redis refuses, and of a Redis Cluster,
 * which the store does not support.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ResumeStoreError, type ResumeStore } from './resume-store.js';

/** What a claimed key holds instead of its record (a hash field in Redis). */
const TOMBSTONE = 'claimed';
/** Key prefix in Redis. */
const KEY_PREFIX = 'troupe:resume:';
/** A Redis command that takes longer fails (the session keeps running). */
const REDIS_COMMAND_TIMEOUT_MS = 1_000;
/** How long the first connection attempt to Redis may take. */
const REDIS_CONNECT_TIMEOUT_MS = 2_000;
/** The longest pause between reconnection attempts. */
const REDIS_MAX_RETRY_MS = 2_000;
/** The first reconnection attempt after a close comes this long after it. */
const REDIS_FIRST_RETRY_MS = 200;
/**
 * A connection Redis closed that is back within this long was no outage
 * (Redis's idle `timeout`, a `CLIENT KILL`): the first reconnection attempt
 * comes after {@link REDIS_FIRST_RETRY_MS}.
 */
const REDIS_RECONNECT_GRACE_MS = 1_000;
/** The most of a Redis error reply `/health` and the log repeat. */
const REPLY_MAX_CHARS = 200;
/** What the store says of a Redis Cluster, in the log and in `/health`. */
const CLUSTER_UNSUPPORTED =
  'Redis Cluster is not supported: point REDIS_URL at a single Redis (a primary, with replicas for failover)';

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

/** A record's keys: one hash slot (`{…}`), as a Redis Cluster would need to run the scripts. */
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
    retryStrategy: (attempt) => Math.min(attempt * REDIS_FIRST_RETRY_MS, REDIS_MAX_RETRY_MS),
    keyPrefix: KEY_PREFIX,
  }) as Redis & ResumeCommands;
  // Atomic: a claimed key is never written again; a claim leaves a tombstone.
  redis.defineCommand('troupeSave', { numberOfKeys: 2, lua: SAVE_LUA });
  redis.defineCommand('troupeClaim', { numberOfKeys: 2, lua: CLAIM_LUA });
  redis.defineCommand('troupeSettle', { numberOfKeys: 2, lua: SETTLE_LUA });
  const link = watchConnection(redis, log, onError);
  const database = watchDatabase(redis, log, onError);
  const replies = watchReplies(log);
  const claimedListeners: Array<(key: string) => void> = [];
  /** The connection that listens for claims (Redis takes no other commands on it). */
  let claimedNotices: Redis | undefined;
  /** Resolves once a command may be sent, and would reach the database REDIS_URL names. */
  const usable = async (): Promise<void> => {
    await link.usable();
    const refused = database.refused();
    if (refused !== undefined) throw new Error(refused);
  };
  const fail = (op: 'save' | 'claim', err: unknown): never => {
    onError?.(op);
    link.failed();
    replies.failed(err);
    throw new ResumeStoreError(`Redis ${op} failed: ${(err as Error).message}`, { cause: err });
  };
  return {
    kind: 'redis',
    async save(key, update, ttlS) {
      try {
        await usable();
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
        replies.succeeded();
        return done === 1 ? 'saved' : done === 0 ? 'claimed' : 'stale';
      } catch (err) {
        return fail('save', err);
      }
    },
    async claim(key, ttlS, claimId = '') {
      try {
        await usable();
        const [head, parts] = redisKeys(key);
        const got = await redis.troupeClaim(head, parts, Math.ceil(ttlS), claimId);
        replies.succeeded();
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
      // No claim was sent: it found the database refused.
      if (database.refused() !== undefined) return;
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
      link.reconnected.push(listener);
    },
    health() {
      // An outage says so first: commands fail then for want of a connection.
      const detail = link.problem() ?? database.problem() ?? replies.problem();
      return Promise.resolve(detail === undefined ? { ok: true } : { ok: false, detail });
    },
    async close() {
      link.stop();
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

/** What the store knows of its connection (see {@link watchConnection}). */
interface ConnectionWatch {
  /** Why the store cannot reach Redis now; undefined while it can, or while a closed connection is being replaced. */
  problem(): string | undefined;
  /** Resolves once commands may be sent: the first wait for the first connection; later ones fail at once while it is down. */
  usable(): Promise<void>;
  /**
   * Called each time Redis is reachable again after an outage; after a
   * close, if Redis restarted meanwhile or a command found no connection.
   */
  readonly reconnected: Array<() => void>;
  /** A command failed (for want of a connection, if it is not up). */
  failed(): void;
  /** The store is closing: its connection's end is no outage. */
  stop(): void;
}

/**
 * Follows the connection's events, to tell an outage (logged and counted
 * once, `/health` degraded) from a connection Redis closed on purpose and
 * that is back at the first reconnection attempt: Redis closes a client
 * idle past its `timeout`, and says so with a clean close, not an error. A
 * close is an outage only if the connection is not back within
 * {@link REDIS_RECONNECT_GRACE_MS}, or an attempt to reconnect fails (Redis
 * stopped, a refused connection) before that.
 *
 * No keepalive (a PING now and then) keeps an idle connection from Redis's
 * `timeout`: such a close costs a reconnection and nothing else now, a
 * least-privilege ACL user has no PING (deployment.md's has not), and
 * Redis's own `tcp-keepalive` keeps a firewall or NAT from dropping idle
 * connections.
 */
function watchConnection(
  redis: Redis,
  log: Logger,
  onError: RedisResumeStoreOptions['onError'],
): ConnectionWatch {
  let down = false;
  let closing = false;
  let everReady = false;
  /** The last connection error, for `/health` while down; none once connected. */
  let lastError = '';
  /** Running from a close until the connection is back, or the close is taken for an outage. */
  let grace: NodeJS.Timeout | undefined;
  /** The server that answered last (its run_id), to tell a restart from a close. */
  let server: string | undefined;
  /** A command failed while the connection was not up: its writer waits for a rewrite. */
  let missed = false;
  const reconnected: Array<() => void> = [];
  const notify = (): void => {
    for (const listener of reconnected) listener();
  };
  // Logged and counted once per outage, not at every reconnection attempt.
  const markDown = (): void => {
    clearTimeout(grace);
    grace = undefined;
    if (down || closing) return;
    down = true;
    onError?.('connection');
    log.warn({ err: lastError || 'connection closed' }, 'resume store unavailable');
  };
  redis.on('error', (err: Error) => {
    // Its database refused, the connection is up (see watchDatabase).
    if (isSelect(err)) return;
    lastError = err.message;
    markDown();
  });
  redis.on('close', () => {
    if (closing || down || grace !== undefined) return;
    if (!everReady) return markDown();
    log.debug({}, 'resume store connection closed');
    grace = setTimeout(markDown, REDIS_RECONNECT_GRACE_MS);
  });
  redis.on('ready', () => {
    const closed = grace !== undefined;
    clearTimeout(grace);
    grace = undefined;
    lastError = '';
    const wasDown = down;
    down = false;
    everReady = true;
    const before = server;
    const lost = missed;
    missed = false;
    void runId(redis).then((id) => {
      server = id;
      if (!closed) return;
      // Back at once: the same server kept its records (a restarted one lost
      // them), and only a write that found no connection meanwhile is missing.
      const restarted = id === undefined || id !== before;
      log.debug({ restarted, missed: lost }, 'resume store reconnected');
      if (restarted || lost) notify();
    });
    if (!wasDown) return;
    log.info({}, 'resume store available again');
    notify();
  });
  /** The wait for the first connection, shared by the commands sent before it. */
  let first: Promise<void> | undefined;
  /** The wait for a connection closed on purpose to come back, shared likewise. */
  let back: Promise<void> | undefined;
  return {
    reconnected,
    problem() {
      if (redis.status === 'ready' || grace !== undefined) return undefined;
      return `redis ${redis.status}${lastError ? `: ${lastError}` : ''}`;
    },
    usable() {
      if (redis.status !== 'ready' && grace !== undefined) {
        // Closed and reconnecting (Redis's idle `timeout`): a command waits
        // for the connection rather than fail, for the grace at most.
        back ??= nextReady(redis, REDIS_RECONNECT_GRACE_MS).then(() => {
          back = undefined;
        });
        return back;
      }
      if (redis.status === 'ready' || everReady) return Promise.resolve();
      // One wait for every command before the first connection: a listener
      // each made Node warn of a leak (on stderr, in the JSON log) past ten.
      first ??= nextReady(redis, REDIS_CONNECT_TIMEOUT_MS).then((ready) => {
        if (ready) return;
        first = undefined;
        throw new Error(`no connection within ${REDIS_CONNECT_TIMEOUT_MS} ms`);
      });
      return first;
    },
    failed() {
      if (redis.status !== 'ready') missed = true;
    },
    stop() {
      closing = true;
      clearTimeout(grace);
      grace = undefined;
    },
  };
}

/**
 * Whether Redis took the database REDIS_URL names. ioredis selects it on
 * each connection and, when Redis refuses (an index past its `databases`,
 * an ACL without SELECT), only emits an error and goes on in database 0:
 * the store wrote there. Redis answers that SELECT before the ready check
 * sent after it, so the refusal is known before the connection is ready,
 * and the store sends no command while it stands. Logged and counted once,
 * until a connection selects the database.
 */
function watchDatabase(
  redis: Redis,
  log: Logger,
  onError: RedisResumeStoreOptions['onError'],
): {
  /** Redis's refusal of the database, while it stands. */
  refused(): string | undefined;
  /** The refusal as `/health` says it. */
  problem(): string | undefined;
} {
  /** Redis's reply to the last refused SELECT, until a connection's is taken. */
  let refused: string | undefined;
  let refusedNow = false;
  redis.on('connect', () => (refusedNow = false));
  redis.on('error', (err: Error) => {
    if (!isSelect(err)) return;
    refusedNow = true;
    const reply = shortReply(err.message);
    if (reply === refused) return;
    refused = reply;
    onError?.('connection');
    if (isClusterReply(reply)) log.error({ err: reply }, CLUSTER_UNSUPPORTED);
    else log.error({ err: reply }, 'resume store cannot use the database REDIS_URL names');
  });
  redis.on('ready', () => {
    if (!refusedNow) refused = undefined;
  });
  return {
    refused: () => refused,
    problem() {
      if (refused === undefined) return undefined;
      return isClusterReply(refused) ? CLUSTER_UNSUPPORTED : `redis: ${refused}`;
    },
  };
}

/** Whether an error is Redis's refusal of the SELECT ioredis sends as it connects. */
function isSelect(err: Error): boolean {
  return (err as Error & { command?: { name?: string } }).command?.name === 'select';
}

/** What Redis answered to the store's saves and claims (see {@link watchReplies}). */
interface ReplyWatch {
  /** Redis ran a save or a claim, whatever its answer. */
  succeeded(): void;
  /** A save or a claim failed. */
  failed(err: unknown): void;
  /** Why saves fail now, for `/health`; undefined while they go through. */
  problem(): string | undefined;
}

/**
 * Remembers whether Redis refuses the store's commands on a connection that
 * is up: over its `maxmemory` with `noeviction` (OOM), a read-only replica
 * (READONLY), an ACL user without a command the scripts use (NOPERM). A
 * connection that works says nothing of that, so while the last save or
 * claim was refused and none has gone through since, the store is not
 * healthy. Only Redis's own error replies count: a command that found no
 * connection, or timed out, is the connection's to report. Logged when it
 * starts and when it ends, not at each save.
 */
function watchReplies(log: Logger): ReplyWatch {
  let refusing: string | undefined;
  /** A Redis Cluster answered: said once, and for good (keys another node serves keep failing). */
  let cluster = false;
  return {
    succeeded() {
      if (refusing === undefined) return;
      refusing = undefined;
      if (!cluster) log.info({}, 'resume store saves succeeding again');
    },
    failed(err) {
      if (!(err instanceof Error) || err.name !== 'ReplyError') return;
      const reply = shortReply(err.message);
      if (isClusterReply(reply)) {
        if (!cluster) log.error({ err: reply }, CLUSTER_UNSUPPORTED);
        cluster = true;
      } else if (refusing === undefined && !cluster) {
        log.warn({ err: reply }, 'resume store saves failing');
      }
      refusing = reply;
    },
    problem() {
      if (cluster) return CLUSTER_UNSUPPORTED;
      return refusing === undefined ? undefined : `redis saves failing: ${refusing}`;
    },
  };
}

/**
 * Whether a reply is one only a Redis Cluster gives: a key another node
 * serves (MOVED, ASK), a cluster missing slots (CLUSTERDOWN), a SELECT in
 * cluster mode. The store does not follow a Cluster's redirections (its
 * keys and scripts would fit one: a record's keys share a hash slot).
 */
function isClusterReply(reply: string): boolean {
  return /^(MOVED|ASK|CLUSTERDOWN) |in cluster mode/.test(reply);
}

/**
 * Redis's error reply without what it adds for a script (its hash and line),
 * cut to {@link REPLY_MAX_CHARS}. A reply names a command at most, never its
 * arguments (a record, a key).
 */
function shortReply(message: string): string {
  return message.replace(/\s*script: \w+, on @user_script:\d+\.?$/, '').slice(0, REPLY_MAX_CHARS);
}

/** The run_id of the Redis server that answers (new at each start); undefined if INFO is refused. */
async function runId(redis: Redis): Promise<string | undefined> {
  try {
    return /^run_id:(\w+)/m.exec(await redis.info('server'))?.[1];
  } catch {
    return undefined;
  }
}

/** Resolves true at the connection's next `ready`, or false after `ms`. */
function nextReady(redis: Redis, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ready: boolean): void => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ready);
    };
    const onReady = (): void => done(true);
    const timer = setTimeout(() => done(false), ms);
    redis.once('ready', onReady);
  });
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
