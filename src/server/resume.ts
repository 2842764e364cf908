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
import { withTimeout } from '../timeouts.js';
import type { ResumeStore, StoredRecord } from './resume-store.js';
import {
  holdSession,
  trackSession,
  type LiveSession,
  type Tracked,
  type TrackedSessions,
} from './resume-tracker.js';

/** The record format; others are refused. */
const RECORD_VERSION = 1;
/** Bytes of randomness in a token (256 bits, base64url). */
const TOKEN_BYTES = 32;
/** Over how long the sessions send their records again once the store is back after an outage. */
const REWRITE_SPREAD_MS = 1_000;
/** The longest pause between looks for records about to expire under a running session. */
const MAX_UPKEEP_MS = 60_000;
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
  | {
      ok: true;
      sessionId: string;
      state: unknown;
      parts: string[];
      /**
       * Call once the conversation is restored (`true`: the record goes for
       * good) or could not be (`false`: the token opens it again, e.g. on an
       * instance that has its character). Until then, a store that settles
       * claims keeps the record under its tombstone.
       */
      settle(used: boolean): void;
    }
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
  /**
   * The session has ended: writes its state once more, whether or not it
   * changed (the store may have lost it: a Redis restarted or flushed),
   * then stops. When Redis fails that write (down, full), the state as it
   * is now waits in memory and is written as soon as Redis takes it, for at
   * most the record's TTL: a client that dropped during an outage resumes
   * what it last had, not an older record Redis kept. At most 1,000 such
   * states and 64 Mi characters wait (`MAX_UNWRITTEN`, `MAX_UNWRITTEN_CHARS`);
   * each one lost is logged.
   * Resolves after the first try.
   */
  finish(): Promise<void>;
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
  const sessions: TrackedSessions = {
    waiting: new Set(),
    writers: new Set(),
    unwritten: new Map(),
    unwrittenChars: { total: 0 },
  };
  const { writers, unwritten } = sessions;
  /** The sessions of this process still writing, by record key: told at once when claimed. */
  const live = new Map<string, LiveSession>();
  // A store back after an outage may have lost every record (a Redis
  // restarted without persistence): sessions that change nothing for a while
  // would not be resumable until they did. Each sends its record again,
  // spread over a second so they do not all arrive at once.
  // The last states of sessions that ended meanwhile go first, at once: a
  // claim on another instance would find the older record until they land.
  store.onReconnect?.(() => {
    for (const w of writers) {
      if (unwritten.has(w.key)) w.rewrite();
      else
        setTimeout(
          w.rewrite,
          Math.random() * (options.rewriteSpreadMs ?? REWRITE_SPREAD_MS),
        ).unref();
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
      const claimed = await claimRecord(options, token, auth, handOver);
      if (!claimed.ok) return claimed;
      // Still open in this process: its connection is closed first, and the
      // conversation handed over is the session as it is then.
      const now = await handOver(tokenKey(token, auth));
      const record = now === undefined ? undefined : parseRecord(now);
      return record
        ? { ...claimed, sessionId: record.session, state: record.state, parts: record.parts }
        : claimed;
    },
    track(sessionId, source, auth, log, onTakenOver) {
      const token = newResumeToken();
      const read = (): StoredRecord => writeRecord(sessionId, authHash(auth), source);
      const at: Tracked = { token, key: tokenKey(token, auth), log, live, read };
      if (onTakenOver) at.onTakenOver = onTakenOver;
      return store.hold
        ? holdSession(options, store.hold.bind(store), at)
        : trackSession(options, sessions, at);
    },
    close() {
      clearInterval(upkeep);
      for (const giveUp of [...unwritten.values()]) giveUp('the server stopped first');
      return store.close();
    },
  };
}

/** Opens a stored conversation by its token (single use); see {@link Resumer.claim}. */
async function claimRecord(
  options: ResumerOptions,
  token: string,
  auth: string | undefined,
  handOver: (key: string) => Promise<StoredRecord | undefined>,
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
  const settle = (used: boolean): void => {
    if (raw !== undefined && claimId !== undefined) store.settle?.(key, claimId, used);
  };
  if (raw === undefined || raw.incomplete) {
    // The store lost it, or never took its last state (Redis was full or
    // down at the session's end), but this process holds it: a session
    // still open here, or one whose last state waits for the store.
    const held = await handOver(key);
    const record = held === undefined ? undefined : parseRecord(held);
    if (record && sameHash(record.auth, authHash(auth))) {
      return {
        ok: true,
        sessionId: record.session,
        state: record.state,
        parts: record.parts,
        settle,
      };
    }
  }
  if (raw?.incomplete) {
    settle(true);
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
    settle(true);
    outcome('not_found');
    const unknown = auth === undefined ? 'unknown' : 'unknown (or issued under another auth token)';
    return {
      ok: false,
      reason: 'not_found',
      message: `The resume token is ${unknown}, expired or already used; a new session was started.`,
    };
  }
  if (!sameHash(record.auth, authHash(auth))) {
    settle(true);
    outcome('auth_mismatch');
    return {
      ok: false,
      reason: 'auth_mismatch',
      message: 'The resume token was issued under another auth token; a new session was started.',
    };
  }
  // Counted as resumed by the caller once the session is restored (or as restore_failed).
  return { ok: true, sessionId: record.session, state: record.state, parts: record.parts, settle };
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
