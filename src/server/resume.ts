/**
 * Resume tokens: each session gets an unguessable token (`session.created`
 * → `session.troupe.resume_token`); its conversation is written to the
 * resume store after each change that matters (debounced, off the delta
 * path, never awaited by the session), and a client that reconnects with
 * `?resume=TOKEN` — to any instance sharing the store — gets it back. A
 * store in the session's own process reads the live session instead, only
 * when the record is claimed, and gets its text once, when it ends.
 *
 * A token is spent when used: the resumed session gets a new one, and the
 * old record becomes a tombstone, so a token opens one conversation at most
 * once. With `AUTH_TOKEN` set, a record only opens for the same auth token.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { Counter, Histogram } from 'prom-client';
import { waitAtMost, withTimeout } from '../timeouts.js';
import {
  wholeRecord,
  type RecordUpdate,
  type ResumeStore,
  type SaveResult,
  type StoredRecord,
} from './resume-store.js';

/** The record format; others are refused. */
const RECORD_VERSION = 1;
/** Bytes of randomness in a token (256 bits, base64url). */
const TOKEN_BYTES = 32;
/** Over how long the sessions send their records again once the store is back after an outage. */
const REWRITE_SPREAD_MS = 1_000;
/** The longest pause between looks for records about to expire under a running session. */
const MAX_UPKEEP_MS = 60_000;
/** How often a last write the store refused is tried again while a drain waits for it. */
const STORED_RETRY_MS = 500;
/** What a token looks like: anything else is refused before the store is asked. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** Where a session's state comes from: the session as data, and when it changes. */
export interface SessionStateSource {
  /** The session as JSON-safe data; serialised at once, so it may share live objects. */
  snapshot(): unknown;
  /** The same as JSON text, if the source can write it without a copy first (cheaper). */
  snapshotText?(): string;
  /**
   * The same as JSON text in parts: `head`, the state less its parts, and
   * `parts`, pieces that mostly grow at the end (a conversation's turns),
   * so a write sends only those that changed. A claim hands them back as
   * written, in order (`ClaimResult.parts`), for the caller to parse and put
   * back.
   */
  snapshotParts?(): { head: string; parts: string[] };
}

/** The resume metrics. */
export interface ResumeMetrics {
  /** Store failures, by operation (save, claim, connection). */
  storeErrors: Counter<'op'>;
  /**
   * Resume attempts by outcome: why a claim failed (counted here), or, for
   * a claim that gave a record, `resumed` or `restore_failed` (counted by
   * the caller once it has restored the session or could not).
   */
  attempts: Counter<'outcome'>;
  /** Time of one store write. */
  saveSeconds: Histogram;
}

/** Options of {@link createResumer}. */
export interface ResumerOptions {
  store: ResumeStore;
  ttlS: number;
  /** Changes within this delay are written once. */
  saveDelayMs: number;
  /** How long a claim may take before the connection starts fresh. */
  loadTimeoutMs: number;
  /** Over how long the sessions send their records again once the store is back. @defaultValue 1000 */
  rewriteSpreadMs?: number;
  log: Logger;
  metrics?: ResumeMetrics;
}

/** Why a resume failed (the `resume_failed` error says it in words). */
export type ResumeFailure =
  'invalid_token' | 'not_found' | 'auth_mismatch' | 'store_unavailable' | 'incomplete';

/** A claimed conversation, or why there is none. */
export type ClaimResult =
  | { ok: true; sessionId: string; state: unknown; parts: string[] }
  | { ok: false; reason: ResumeFailure; message: string };

/** A session's link to the store. */
export interface ResumeTracker {
  /** The token to hand the client. */
  readonly token: string;
  /** Writes soon (debounced). Cheap: call after any change that matters. */
  changed(): void;
  /**
   * Writes now, if anything changed since the last write (or none was made),
   * without waiting for a write under way; resolves when every write is done
   * or failed. The state is read at the call, so a turn's end flushed before
   * its `response.done` is sent is on its way to the store first.
   */
  flush(): Promise<void>;
  /**
   * Writes the state once more, whether or not it changed (the store may
   * have lost what it had), and resolves once a write has succeeded: this
   * one, or when it failed, a later one (the store back, every record is
   * written again). `onWait` is called when it has to wait.
   */
  stored(onWait?: () => void): Promise<void>;
  /** Stops writing. */
  stop(): void;
}

/** The resume side of a server. */
export interface Resumer {
  readonly store: ResumeStore;
  /** Takes the conversation of `token` (once); `auth` is the client's auth token, if any. */
  claim(token: string, auth: string | undefined): Promise<ClaimResult>;
  /**
   * Starts writing a session's state under a new token. `onTakenOver` is
   * called once if another connection resumes the conversation while this
   * one is still open: at once when that connection is in this process or
   * the store tells of claims elsewhere (the primary's, Redis), else at this
   * session's next write (the store says the record was claimed).
   * The tracker has stopped writing by then. In this process the claim
   * waits for what it returns (the session closed, its cut reply recorded)
   * and hands over the session as it is then.
   */
  track(
    sessionId: string,
    source: SessionStateSource,
    auth: string | undefined,
    log: Logger,
    onTakenOver?: () => void | Promise<void>,
  ): ResumeTracker;
  close(): Promise<void>;
}

interface ResumeRecord {
  v: typeof RECORD_VERSION;
  session: string;
  /** sha256 of the auth token the session was opened with, or null. */
  auth: string | null;
  savedAt: number;
  state: unknown;
}

/**
 * The store key of a token: its hash, so the store never holds a usable
 * token; with an auth token, the hash of both. A token presented under
 * another auth token then names no record: the claim, which spends a
 * record, never reaches (or spends) a conversation it may not open, and the
 * connection still open on it is not told it was resumed elsewhere.
 */
export function tokenKey(token: string, auth?: string): string {
  const hash = createHash('sha256').update(token);
  if (auth !== undefined) hash.update('\0').update(auth);
  return hash.digest('base64url');
}

/** A new token: 256 random bits, base64url (43 characters). */
export function newResumeToken(): string {
  return randomBytes(TOKEN_BYTES).toString('base64url');
}

function authHash(auth: string | undefined): string | null {
  return auth === undefined ? null : createHash('sha256').update(auth).digest('hex');
}

function sameHash(a: string | null, b: string | null): boolean {
  if (a === null || b === null) return a === b;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Creates the resume side of a server.
 *
 * @example
 * const resumer = createResumer({ store: createMemoryResumeStore(), ttlS: 900, saveDelayMs: 50, loadTimeoutMs: 2000, log });
 * const tracker = resumer.track(session.id, { snapshot: () => session.snapshot() }, undefined, log);
 */
export function createResumer(options: ResumerOptions): Resumer {
  const { store } = options;
  /** Sessions whose write waits for its delay, for a store that sends saves together. */
  const waiting = new Set<() => void>();
  /** The sessions of this process still writing, by record key: told at once when claimed. */
  const live = new Map<string, LiveSession>();
  /** The sessions writing to the store, for the upkeep of their records. */
  const writers = new Set<Writer>();
  // A store back after an outage may have lost every record (a Redis
  // restarted without persistence): sessions that change nothing for a while
  // would not be resumable until they did. Each sends its record again,
  // spread over a second so they do not all arrive at once.
  store.onReconnect?.(() => {
    for (const w of writers) {
      setTimeout(w.rewrite, Math.random() * (options.rewriteSpreadMs ?? REWRITE_SPREAD_MS)).unref();
    }
  });
  // Resumed in another process while still open here: closed at once, not at its next write.
  store.onClaimedElsewhere?.((key) => void live.get(key)?.takenOver());
  /**
   * Closes this process's session of `key`, if it runs here, and gives its
   * record as it is then, cut reply and all: for a claim in this process,
   * and for one in another that asks first (the primary's store).
   */
  const handOver = async (key: string): Promise<StoredRecord | undefined> => {
    const local = live.get(key);
    if (!local) return undefined;
    await local.takenOver();
    return local.reread();
  };
  store.onHandover?.(handOver);
  // A record's TTL counts from its last write: a session open and quiet for
  // longer would lose it while still running. Each record not written for
  // half its TTL is written again (its head; the turns are kept).
  const ttlMs = options.ttlS * 1000;
  const upkeep = setInterval(
    () => {
      const now = Date.now();
      for (const w of writers) w.keepAlive(now, ttlMs / 2);
    },
    Math.min(MAX_UPKEEP_MS, ttlMs / 4),
  ).unref();
  return {
    store,
    async claim(token, auth) {
      const claimed = await claimRecord(options, token, auth);
      if (!claimed.ok) return claimed;
      // Still open in this process: its connection is closed first, and the
      // conversation handed over is the session as it is then.
      const now = await handOver(tokenKey(token, auth));
      const record = now === undefined ? undefined : parseRecord(now);
      return record
        ? { ok: true, sessionId: record.session, state: record.state, parts: record.parts }
        : claimed;
    },
    track(sessionId, source, auth, log, onTakenOver) {
      const token = newResumeToken();
      const read = (): StoredRecord => writeRecord(sessionId, authHash(auth), source);
      const at: Tracked = { token, key: tokenKey(token, auth), log, live, read };
      if (onTakenOver) at.onTakenOver = onTakenOver;
      return store.hold
        ? holdSession(options, store.hold.bind(store), at)
        : trackSession(options, { waiting, writers }, at);
    },
    close() {
      clearInterval(upkeep);
      return store.close();
    },
  };
}

/** A writing session's side of the upkeep of its record. */
interface Writer {
  /** Sends the whole record again (the store may have lost it). */
  rewrite(): void;
  /** Writes the record again if it was last written `olderThanMs` before `now`. */
  keepAlive(now: number, olderThanMs: number): void;
}

/** A session of this process still writing, as a claim of its record sees it. */
interface LiveSession {
  /** Stops its writes and closes it (once); resolves when its cut reply is recorded. */
  takenOver(): Promise<void>;
  /** Its record as it is now, if it was closed (else the claim's read is the same). */
  reread(): StoredRecord | undefined;
}

/** One tracked session: its token and record key, and who to tell when another connection takes it. */
interface Tracked {
  token: string;
  key: string;
  log: Logger;
  live: Map<string, LiveSession>;
  /** The session's record as it is now. */
  read: () => StoredRecord;
  onTakenOver?: () => void | Promise<void>;
}

/**
 * The tracker's side of a take-over: registered as live in this process;
 * `takenOver()` stops it and tells its session, once.
 */
function takeOverWatch(at: Tracked, stop: () => void): { takenOver(): void; forget(): void } {
  let told: Promise<void> | undefined;
  const takenOver = (): Promise<void> => {
    at.live.delete(at.key);
    stop();
    if (told === undefined) {
      // Another connection resumed this conversation: it is theirs now.
      at.log.info({}, 'resume taken over');
      told = Promise.resolve(at.onTakenOver?.()).catch((err: unknown) => {
        at.log.warn({ err: (err as Error).message }, 'closing the taken-over session failed');
      });
    }
    return told;
  };
  const local: LiveSession = {
    takenOver,
    reread: () => (at.onTakenOver ? at.read() : undefined),
  };
  at.live.set(at.key, local);
  return {
    takenOver: () => void takenOver(),
    forget: () => {
      if (at.live.get(at.key) === local) at.live.delete(at.key);
    },
  };
}

/** Opens a stored conversation by its token (single use); see {@link Resumer.claim}. */
async function claimRecord(
  options: ResumerOptions,
  token: string,
  auth: string | undefined,
): Promise<ClaimResult> {
  const { store, ttlS, metrics } = options;
  const outcome = (o: string): void => metrics?.attempts.inc({ outcome: o });
  if (!TOKEN_PATTERN.test(token)) {
    outcome('invalid_token');
    return {
      ok: false,
      reason: 'invalid_token',
      message: 'The resume token is malformed; a new session was started.',
    };
  }
  let raw: StoredRecord | undefined;
  const key = tokenKey(token, auth);
  // A store that may answer after this stops waiting keeps the record until the claim is settled.
  const claimId = store.settle ? newResumeToken() : undefined;
  try {
    raw = await withTimeout(
      store.claim(key, ttlS, claimId),
      options.loadTimeoutMs,
      () => new Error(`no answer within ${options.loadTimeoutMs} ms`),
    );
  } catch (err) {
    outcome('store_unavailable');
    options.log.warn({ err: (err as Error).message }, 'resume claim failed');
    // The claim may still run when the store wakes: undone then, the token still opens it.
    if (claimId !== undefined) store.settle?.(key, claimId, false);
    const kept =
      claimId === undefined
        ? ''
        : ' The conversation is kept: connect again with the same resume token to try again.';
    return {
      ok: false,
      reason: 'store_unavailable',
      message: `The conversation could not be resumed: the resume store is unavailable or did not answer in time; a new session was started.${kept}`,
    };
  }
  if (raw !== undefined && claimId !== undefined) store.settle?.(key, claimId, true);
  if (raw?.incomplete) {
    outcome('incomplete');
    options.log.warn(
      'resume record incomplete: the store lost part of it (Redis full or evicting under maxmemory)',
    );
    return {
      ok: false,
      reason: 'incomplete',
      message:
        'The conversation could not be resumed: the resume store no longer held all of it; a new session was started.',
    };
  }
  const record = raw === undefined ? undefined : parseRecord(raw);
  if (record === undefined) {
    outcome('not_found');
    const unknown = auth === undefined ? 'unknown' : 'unknown (or issued under another auth token)';
    return {
      ok: false,
      reason: 'not_found',
      message: `The resume token is ${unknown}, expired or already used; a new session was started.`,
    };
  }
  if (!sameHash(record.auth, authHash(auth))) {
    outcome('auth_mismatch');
    return {
      ok: false,
      reason: 'auth_mismatch',
      message: 'The resume token was issued under another auth token; a new session was started.',
    };
  }
  // Counted as resumed by the caller once the session is restored (or as restore_failed).
  return { ok: true, sessionId: record.session, state: record.state, parts: record.parts };
}

/** Resolves when one of `waiters` is called (it is let go then). */
function whenCalled(waiters: Set<() => void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      waiters.delete(done);
      resolve();
    };
    waiters.add(done);
  });
}

/** Saves a writer's next update; when the store lost what it builds on (a failed write, an expiry), all of it again. */
async function saveNext(
  store: ResumeStore,
  key: string,
  ttlS: number,
  updates: ReturnType<typeof saveMaker>,
): Promise<SaveResult> {
  const result = await store.save(key, updates.next(), ttlS);
  if (result !== 'stale') return result;
  updates.resend();
  return store.save(key, updates.next(), ttlS);
}

/** A writer's saves, each the head and the parts that changed since the last one sent. */
function saveMaker(read: () => StoredRecord): { next(): RecordUpdate; resend(): void } {
  /** The parts the store holds once the saves sent so far are applied, and the last save's number. */
  let sent: string[] = [];
  let seq = 0;
  return {
    next() {
      const { head, parts } = read();
      let keep = 0;
      const common = Math.min(sent.length, parts.length);
      while (keep < common && sent[keep] === parts[keep]) keep++;
      const after = seq === 0 || keep === 0 ? null : seq;
      seq++;
      sent = parts;
      return {
        head,
        keep: after === null ? 0 : keep,
        parts: parts.slice(after === null ? 0 : keep),
        seq,
        after,
      };
    },
    /** What the store holds is unknown: the next save sends everything. */
    resend() {
      sent = [];
    },
  };
}

/** Writes one session's changes to the store; see {@link Resumer.track}. */
function trackSession(
  options: ResumerOptions,
  sessions: { waiting: Set<() => void>; writers: Set<Writer> },
  at: Tracked,
): ResumeTracker {
  const { store, ttlS, metrics } = options;
  const { waiting, writers } = sessions;
  const { token, key, log, read } = at;
  const watch = takeOverWatch(at, () => stop());
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  /** A change not written yet (the first write is always due: the token opens from then on). */
  let dirty = true;
  /** The last write failed (logged once until one succeeds again). */
  let failing = false;
  /** Who waits for the state to be in the store ({@link ResumeTracker.stored}). */
  const whenWritten = new Set<() => void>();

  const updates = saveMaker(read);
  const write = async (): Promise<void> => {
    timer = undefined;
    waiting.delete(writeEarly);
    if (stopped) return;
    dirty = false;
    const started = performance.now();
    try {
      const result = await saveNext(store, key, ttlS, updates);
      metrics?.saveSeconds.observe((performance.now() - started) / 1000);
      if (result === 'claimed') watch.takenOver();
      else writtenAt = Date.now();
      if (failing) log.info({}, 'resume saves work again');
      failing = false;
      if (!dirty) for (const resolve of whenWritten) resolve();
    } catch (err) {
      // What the store holds now is unknown: the next write sends everything.
      updates.resend();
      dirty = true;
      // Once per outage for each session, not at every change it makes meanwhile.
      if (failing) log.debug({ err: (err as Error).message }, 'resume save failed');
      else log.warn({ err: (err as Error).message }, 'resume save failed');
      failing = true;
    }
  };
  // Debounced writes go one at a time; changes during one are written after it.
  // A flush writes at once, beside one under way: the store applies a
  // connection's commands in order, so the newer state lands last.
  const begin = (): Promise<void> => {
    const mine = write();
    const all = writing ? Promise.all([writing, mine]).then(() => undefined) : mine;
    writing = all;
    void all.finally(() => {
      if (writing !== all) return;
      writing = undefined;
      if (again && !stopped) {
        again = false;
        void run();
      }
    });
    return all;
  };
  const run = (): Promise<void> => {
    if (writing) {
      again = true;
      return writing;
    }
    return begin();
  };

  /** Writes now what waits for its delay: it leaves with another session's flush. */
  const writeEarly = (): void => {
    clearTimeout(timer);
    void run();
  };

  /** When the store last took a write (its TTL counts from there). */
  let writtenAt = Date.now();
  const writer: Writer = {
    rewrite() {
      if (stopped) return;
      updates.resend();
      dirty = true;
      clearTimeout(timer);
      timer = undefined;
      void run();
    },
    keepAlive(now, olderThanMs) {
      if (stopped || writing || timer !== undefined || now - writtenAt < olderThanMs) return;
      dirty = true;
      void run();
    },
  };
  writers.add(writer);

  function stop(): void {
    stopped = true;
    clearTimeout(timer);
    waiting.delete(writeEarly);
    writers.delete(writer);
  }

  return {
    token,
    changed() {
      dirty = true;
      if (stopped || timer !== undefined) return;
      timer = setTimeout(() => void run(), options.saveDelayMs);
      if (store.sendNow) waiting.add(writeEarly);
    },
    async flush() {
      if (stopped) return;
      clearTimeout(timer);
      timer = undefined;
      waiting.delete(writeEarly);
      if (dirty) {
        again = false;
        void begin();
        if (store.sendNow) {
          // The sessions whose writes wait for their delay send them with this one.
          for (const early of [...waiting]) early();
          store.sendNow();
        }
      }
      while (writing) await writing;
    },
    async stored(onWait) {
      while (!stopped) {
        dirty = true;
        await this.flush();
        if (!dirty || stopped) return;
        onWait?.();
        onWait = undefined;
        // A store down is written again when it reconnects; one that stalled, by a try now and then.
        await waitAtMost(whenCalled(whenWritten), STORED_RETRY_MS);
        if (!dirty) return;
      }
    },
    stop() {
      watch.forget();
      stop();
      for (const resolve of whenWritten) resolve();
    },
  };
}

/** The record as the store keeps it: a JSON head, the state written straight from the session, and its parts. */
function writeRecord(
  sessionId: string,
  hashed: string | null,
  from: SessionStateSource,
): StoredRecord {
  const head = `{"v":${RECORD_VERSION},"session":${JSON.stringify(sessionId)},"auth":${JSON.stringify(hashed)},"savedAt":${Date.now()},"state":`;
  if (from.snapshotParts) {
    const split = from.snapshotParts();
    return { head: `${head}${split.head}}`, parts: split.parts };
  }
  if (from.snapshotText) return { head: `${head}${from.snapshotText()}}`, parts: [] };
  const record: ResumeRecord = {
    v: RECORD_VERSION,
    session: sessionId,
    auth: hashed,
    savedAt: Date.now(),
    state: from.snapshot(),
  };
  return { head: JSON.stringify(record), parts: [] };
}

/**
 * A session's link to a store that keeps a reader of its live state
 * ({@link ResumeStore.hold}): a change is a note that the record is good
 * until now, and the record is written as text once, when the session ends.
 */
function holdSession(
  options: ResumerOptions,
  hold: NonNullable<ResumeStore['hold']>,
  at: Tracked,
): ResumeTracker {
  const { store, ttlS } = options;
  const { read } = at;
  let stopped = false;
  const watch = takeOverWatch(at, () => (stopped = true));
  const held = (): void => {
    if (stopped) return;
    if (hold(at.key, read) === 'claimed') watch.takenOver();
  };
  return {
    token: at.token,
    changed: held,
    flush() {
      held();
      return Promise.resolve();
    },
    stored() {
      held();
      return Promise.resolve();
    },
    stop() {
      if (stopped) return;
      stopped = true;
      watch.forget();
      // The session is over: its record as text, and the session let go.
      try {
        const { head, parts } = read();
        store.save(at.key, wholeRecord(head, parts), ttlS).catch((err: unknown) => {
          at.log.warn({ err: (err as Error).message }, 'resume save failed');
        });
      } catch (err) {
        at.log.warn({ err: (err as Error).message }, 'resume save failed');
      }
    },
  };
}

/** The record's head parsed; its parts stay text (the caller parses them as it restores). */
function parseRecord(raw: StoredRecord): (ResumeRecord & { parts: string[] }) | undefined {
  try {
    const r = JSON.parse(raw.head) as Partial<ResumeRecord>;
    if (r?.v !== RECORD_VERSION || typeof r.session !== 'string') return undefined;
    return { ...(r as ResumeRecord), parts: raw.parts };
  } catch {
    return undefined;
  }
}
