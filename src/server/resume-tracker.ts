/**
 * The writing side of resume (see resume.ts): each session's tracker, which
 * writes its state to the store after each change that matters (debounced,
 * never awaited by the session) and once more at its end, and the watch by
 * which a claim in this process closes the session and takes it as it is.
 */
import type { Logger } from 'pino';
import { waitAtMost } from '../timeouts.js';
import type { ResumeTracker, ResumerOptions } from './resume.js';
import {
  wholeRecord,
  type RecordUpdate,
  type ResumeStore,
  type SaveResult,
  type StoredRecord,
} from './resume-store.js';

/** How often a last write the store refused is tried again while a drain waits for it. */
const STORED_RETRY_MS = 500;
/**
 * How often the last state of a session that ended while the store failed
 * is tried again (besides at once when the store reconnects): a store that
 * is up but refuses writes (Redis full) tells no one when it takes them again.
 */
const UNWRITTEN_RETRY_MS = 5_000;
/** Ended sessions whose last state may wait in memory for the store at once; past this the oldest is lost. */
export const MAX_UNWRITTEN = 1_000;
/**
 * The characters those states may hold in all (64 Mi): past this the oldest
 * are lost, and one larger on its own never waits. A state is a whole
 * conversation (up to 32 MiB), and an outage must not fill the process.
 */
export const MAX_UNWRITTEN_CHARS = 64 * 1024 * 1024;

/** A writing session's side of the upkeep of its record. */
export interface Writer {
  /** Its record's key. */
  readonly key: string;
  /** Sends the whole record again (the store may have lost it). */
  rewrite(): void;
  /** Writes the record again if it was last written `olderThanMs` before `now`. */
  keepAlive(now: number, olderThanMs: number): void;
}

/** A session of this process still writing, as a claim of its record sees it. */
export interface LiveSession {
  /** Stops its writes and closes it (once); resolves when its cut reply is recorded. */
  takenOver(): Promise<void>;
  /** Its record as it is now, if it was closed (else the claim's read is the same). */
  reread(): StoredRecord | undefined;
}

/** One tracked session: its token and record key, and who to tell when another connection takes it. */
export interface Tracked {
  token: string;
  key: string;
  log: Logger;
  live: Map<string, LiveSession>;
  /** The session's record as it is now (after an unwritten finish, as it was then). */
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

/** What the trackers of one resumer share. */
export interface TrackedSessions {
  /** Sessions whose write waits for its delay, for a store that sends saves together. */
  waiting: Set<() => void>;
  /** The sessions writing to the store, for the upkeep of their records. */
  writers: Set<Writer>;
  /** Ended sessions whose last state waits for the store, oldest first: each one's way to give up. */
  unwritten: Map<string, (why: string) => void>;
  /** The characters of those states, in all. */
  unwrittenChars: { total: number };
}

/**
 * Saves a writer's next update: the store's answer, or undefined when it
 * failed (said once per outage for each session, not at every change it
 * makes meanwhile, though several writes fail at once; the next write then
 * sends everything). `saves.failing` is the writer's: whether its last one failed.
 */
async function saveLogged(
  options: ResumerOptions,
  at: Tracked,
  updates: ReturnType<typeof saveMaker>,
  saves: { failing: boolean },
): Promise<SaveResult | undefined> {
  const started = performance.now();
  try {
    const result = await saveNext(options.store, at.key, options.ttlS, updates);
    options.metrics?.saveSeconds.observe((performance.now() - started) / 1000);
    if (saves.failing) at.log.info({}, 'resume saves work again');
    saves.failing = false;
    return result;
  } catch (err) {
    updates.resend();
    if (saves.failing) at.log.debug({ err: (err as Error).message }, 'resume save failed');
    else at.log.warn({ err: (err as Error).message }, 'resume save failed');
    saves.failing = true;
    return undefined;
  }
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
export function trackSession(
  options: ResumerOptions,
  sessions: TrackedSessions,
  at: Tracked,
): ResumeTracker {
  const { store, ttlS } = options;
  const { waiting, writers } = sessions;
  const { token } = at;
  const watch = takeOverWatch(at, () => stop());
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  /** A change not written yet (the first write is always due: the token opens from then on). */
  let dirty = true;
  /** Whether the last write failed (logged once until one succeeds again). */
  const saves = { failing: false };
  /** Who waits for the state to be in the store ({@link ResumeTracker.stored}). */
  const whenWritten = new Set<() => void>();

  const updates = saveMaker(() => at.read());
  const write = async (): Promise<void> => {
    timer = undefined;
    waiting.delete(writeEarly);
    if (stopped) return;
    dirty = false;
    const result = await saveLogged(options, at, updates, saves);
    if (result === undefined) {
      dirty = true;
      return;
    }
    if (result === 'claimed') watch.takenOver();
    else writtenAt = Date.now();
    if (!dirty) for (const resolve of whenWritten) resolve();
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
    key: at.key,
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
    async finish() {
      if (stopped) return;
      dirty = true;
      await this.flush();
      // Only Redis comes back: the primary's store refused it for room, or is gone with it.
      if (stopped || !dirty || store.kind !== 'redis') return this.stop();
      const state = { stopped: () => stopped, dirty: () => dirty };
      waitForStore(this, at, { ttlS, sessions, whenWritten, ...state });
    },
    stop() {
      watch.forget();
      stop();
      for (const resolve of whenWritten) resolve();
    },
  };
}

/**
 * The last write failed at the session's end: its state, as it is now,
 * waits for the store (see {@link ResumeTracker.finish}) and is written at
 * the store's reconnection (the writer's rewrite) or a try every
 * {@link UNWRITTEN_RETRY_MS}, for at most the TTL. A claim in this process
 * still gets it: the session's watch stays until it is written.
 */
function waitForStore(
  tracker: ResumeTracker,
  at: Tracked,
  o: {
    ttlS: number;
    sessions: TrackedSessions;
    whenWritten: Set<() => void>;
    /** The tracker stopped (a claim took the conversation over, or the server stops). */
    stopped: () => boolean;
    /** Its last state is not written yet. */
    dirty: () => boolean;
  },
): void {
  const { key, log } = at;
  const closed = at.read();
  const chars = closed.parts.reduce((n, p) => n + p.length, closed.head.length);
  const held = o.sessions.unwrittenChars;
  at.read = () => closed;
  // Nothing left to close when a claim takes it over: the connection is gone.
  at.onTakenOver = () => undefined;
  const until = Date.now() + o.ttlS * 1000;
  let done = false;
  const end = (): void => {
    done = true;
    if (o.sessions.unwritten.delete(key)) held.total -= chars;
    tracker.stop();
  };
  const waiting = (): boolean => !done && !o.stopped() && o.dirty();
  const giveUp = (why: string): void => {
    if (waiting()) log.error({ why }, 'resume record lost: its last state never reached the store');
    if (!done) end();
  };
  if (chars > MAX_UNWRITTEN_CHARS) return giveUp(`${chars} characters: over the room to wait`);
  for (const first of o.sessions.unwritten.values()) {
    if (o.sessions.unwritten.size < MAX_UNWRITTEN && held.total + chars <= MAX_UNWRITTEN_CHARS)
      break;
    first(
      `over ${MAX_UNWRITTEN} records or ${MAX_UNWRITTEN_CHARS} characters waited for the store`,
    );
  }
  o.sessions.unwritten.set(key, giveUp);
  held.total += chars;
  log.warn({ ttlS: o.ttlS }, 'resume save failed at the close: the last state waits for the store');
  void (async () => {
    while (waiting()) {
      const left = until - Date.now();
      if (left <= 0) return giveUp(`the store did not take it within RESUME_TTL_S (${o.ttlS} s)`);
      await waitAtMost(whenCalled(o.whenWritten), Math.min(UNWRITTEN_RETRY_MS, left));
      if (waiting()) await tracker.flush();
    }
    if (done) return;
    // Written, or taken over by a claim (which said so).
    if (!o.stopped()) log.info({}, 'resume record written: the store took the last state');
    end();
  })();
}

/**
 * A session's link to a store that keeps a reader of its live state
 * ({@link ResumeStore.hold}): a change is a note that the record is good
 * until now, and the record is written as text once, when the session ends.
 */
export function holdSession(
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
    finish() {
      this.stop();
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
