/**
 * Where resumable conversations are kept between connections: in this
 * process's memory (the default), or in Redis (`REDIS_URL`, redis-store.ts),
 * shared by every instance and worker.
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
import { TroupeError } from '../errors.js';

export { createRedisResumeStore, type RedisResumeStoreOptions } from './redis-store.js';

/** Expired records are swept from memory this often. */
const SWEEP_MS = 60_000;
/** The in-memory store's room for records held as text, in characters, unless told otherwise. */
export const DEFAULT_MEMORY_STORE_MAX_CHARS = 256 * 1024 * 1024;

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
  /** Whether the store works now (it answers, and takes saves), and if not, why: for `/health`. */
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
