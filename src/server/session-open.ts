/**
 * Opening a connection's session at the upgrade: a fresh one, or with
 * `?resume=TOKEN` the conversation back from the resume store; then writing
 * its state to the store while it runs, and once more as it closes. Also the
 * overload refusal's wording. The realtime endpoint calls these; the
 * session's per-delta path never does.
 */
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';
import { waitAtMost } from '../timeouts.js';
import type { Metrics } from '../metrics/index.js';
import type { ServerEvent } from '../session/events.js';
import { interruptedTools } from '../session/reply-checkpoints.js';
import { createSession, type Session, type SessionState } from '../session/session.js';
import type { OverloadVerdict } from './overload.js';
import type { ResumeTracker, Resumer } from './resume.js';
import {
  joinParts,
  restoreFromSnapshot,
  sessionStateSource,
  type RestoreInput,
} from './session-state.js';

/** How long a closing session's last write waits for its cut reply to be recorded. */
const CLOSE_IDLE_WAIT_MS = 2_000;

/** Options of {@link createSessionOpener}. */
export interface SessionOpenerOptions {
  /** Absent: `?resume=` gets `resume_failed` and sessions get no token. */
  resume?: Resumer;
  metrics: Metrics;
  log: Logger;
}

/** What a fresh session is opened with (a resumed one keeps its own). */
export interface FreshSession {
  id: string;
  character: LoadedCharacter;
  variant: string | undefined;
  /** `?metadata=`: the prompt generator's `ctx.metadata`; absent = `{}`. */
  metadata?: Record<string, unknown> | undefined;
  /** OpenAI's defaults: spoken replies where the server can speak, no greeting unless `?greeting=1`. */
  openaiDefaults?: boolean;
}

/** A session resumed under its old id, with its logger. */
export type Adopt = (resumed: { id: string; log: Logger }) => void;

/** Opens sessions and keeps their state in the resume store. */
export interface SessionOpener {
  /**
   * A fresh session, or with `?resume=` the conversation back; when that
   * fails, a fresh session and the `resume_failed` error to send once it has started.
   */
  open(
    url: URL,
    auth: string | undefined,
    common: RestoreInput,
    fresh: FreshSession,
    adopt: Adopt,
  ): Promise<{ session: Session; resumeError?: ProtocolError }>;
  /**
   * Starts writing the session's state under a new token (written once more
   * when `ws` closes). `takenOver` is called if another connection resumes
   * the conversation while `ws` is open: it closes the session and the
   * socket; the hand-over waits for the session's cut reply to be recorded.
   */
  track(
    ws: WebSocket,
    session: Session,
    id: string,
    auth: string | undefined,
    log: Logger,
    takenOver?: () => void,
  ): ResumeTracker | undefined;
  /**
   * The socket is being closed by the server: writes its session's last state
   * now; resolves when written (or failed), so the close can follow it. With
   * `until` (a drain's deadline, epoch ms), a write that failed waits for the
   * store to take it until then: a store that is back in time loses nothing.
   */
  closing(ws: WebSocket, until?: number): Promise<void>;

  /** Resolves when every last write started so far has ended. */
  flushed(): Promise<void>;
}

/**
 * Creates the opener of a realtime endpoint.
 *
 * @example const opener = createSessionOpener({ resume, metrics, log });
 */
export function createSessionOpener(options: SessionOpenerOptions): SessionOpener {
  const { resume, metrics, log } = options;
  const trackers = new Map<WebSocket, { tracker: ResumeTracker; session: Session; log: Logger }>();
  const flushes = new Set<Promise<void>>();

  /** The last write, once a reply the close cut has recorded what it had said. */
  const flush = (
    { tracker, session, log }: { tracker: ResumeTracker; session: Session; log: Logger },
    until?: number,
  ): Promise<void> => {
    // Written once more at the end, changed or not (the store may have lost it).
    // A drain waits until the store has it, or its deadline; otherwise a state the
    // store failed waits for it in memory (the tracker stops itself then).
    const last = (): Promise<void> =>
      until === undefined
        ? tracker.finish()
        : storedBy(tracker, until, log).finally(() => tracker.stop());
    const done = settled(session)
      .then(last)
      .catch((err: unknown) => {
        tracker.stop();
        log.warn({ err: (err as Error).message }, 'resume save failed');
      })
      .finally(() => flushes.delete(done));
    flushes.add(done);
    return done;
  };

  async function resumeSession(
    token: string,
    auth: string | undefined,
    common: RestoreInput,
    adopt: Adopt,
  ): Promise<Session | ProtocolError> {
    const fail = (message: string): ProtocolError =>
      new ProtocolError('resume_failed', message, { param: 'resume' });
    if (!resume) {
      return fail('This server does not resume conversations; a new session was started.');
    }
    const claimed = await resume.claim(token, auth);
    if (!claimed.ok) return fail(claimed.message);
    const sessionLog = log.child({ session: claimed.sessionId });
    try {
      const state = joinParts(claimed.state, claimed.parts);
      // Read before the session takes the state as its own.
      const cut = interruptedTools((state as Partial<SessionState>).conversation?.reply);
      const session = await restoreFromSnapshot(state, { ...common, log: sessionLog });
      adopt({ id: claimed.sessionId, log: sessionLog });
      claimed.settle(true);
      metrics.scale.attempts.inc({ outcome: 'resumed' });
      sessionLog.info({}, 'session resumed');
      for (const tool of cut) metrics.scale.toolsInterrupted.inc({ tool });
      if (cut.length > 0) {
        sessionLog.warn({ tools: cut }, 'tool calls cut off by a stop, resumed as interrupted');
      }
      return session;
    } catch (err) {
      // Not spent: another instance (one that has its character) may restore it.
      claimed.settle(false);
      metrics.scale.attempts.inc({ outcome: 'restore_failed' });
      sessionLog.warn({ err: (err as Error).message }, 'session restore failed');
      const kept = resume.store.settle
        ? ' The conversation is kept: the same resume token opens it on a server that can restore it.'
        : '';
      return fail(
        `The conversation could not be restored: ${(err as Error).message} A new session was started.${kept}`,
      );
    }
  }

  return {
    async open(url, auth, common, fresh, adopt) {
      const token = url.searchParams.get('resume');
      const resumed = token === null ? undefined : await resumeSession(token, auth, common, adopt);
      if (resumed !== undefined && !(resumed instanceof ProtocolError)) return { session: resumed };
      const openai = fresh.openaiDefaults === true;
      const greeting = greetingParam(url, !openai);
      const session = await createSession({
        ...common,
        id: fresh.id,
        character: fresh.character,
        ...(fresh.variant ? { variant: fresh.variant } : {}),
        ...(greeting.on ? {} : { greeting: false }),
        ...(openai ? { spokenByDefault: true } : {}),
        metadata: fresh.metadata ?? {},
      });
      // One error goes out after session.created: a failed resume's, else a bad ?greeting='s.
      const error = resumed ?? greeting.error;
      return { session, ...(error ? { resumeError: error } : {}) };
    },
    track(ws, session, id, auth, sessionLog, takenOver) {
      if (!resume) return undefined;
      const tracker = resume.track(
        id,
        sessionStateSource(session),
        auth,
        sessionLog,
        takenOver &&
          (() => {
            takenOver();
            return settled(session);
          }),
      );
      const entry = { tracker, session, log: sessionLog };
      trackers.set(ws, entry);
      ws.once('close', () => {
        if (trackers.get(ws) !== entry) return;
        trackers.delete(ws);
        void flush(entry);
      });
      return tracker;
    },
    closing(ws, until) {
      const entry = trackers.get(ws);
      if (!entry) return Promise.resolve();
      trackers.delete(ws);
      return flush(entry, until);
    },
    async flushed() {
      await Promise.all([...flushes]);
    },
  };
}

/**
 * When the store holds the session's last state, or at `until`: a drain keeps
 * the socket open meanwhile, so its client does not resume from a store that
 * never got the conversation (Redis down during a rolling restart).
 */
async function storedBy(tracker: ResumeTracker, until: number, log: Logger): Promise<void> {
  let waited = false;
  const written = tracker.stored(() => {
    waited = true;
    log.warn({}, 'draining: the last state waits for the resume store');
  });
  const stored = await waitAtMost(written, Math.max(0, until - Date.now()));
  if (!waited) return;
  if (stored) log.info({}, 'draining: the last state is written');
  else
    log.error({}, 'draining: the resume store did not come back in time; the conversation is lost');
}

/** When a closed session's cut reply has recorded what it had said, or {@link CLOSE_IDLE_WAIT_MS}. */
async function settled(session: Session): Promise<void> {
  await waitAtMost(session.idle(), CLOSE_IDLE_WAIT_MS);
}

const percent = (share: number): number => Math.round(share * 100);

/** Each overload verdict's cause, as the error says it. */
const OVERLOAD_CAUSES: Record<OverloadVerdict['reason'], (value: number) => string> = {
  cpu: (v) => `CPU ${v} of a core`,
  memory: (v) => `memory at ${percent(v)}% of its limit`,
  container_memory: (v) => `container memory at ${percent(v)}% of its limit`,
  event_loop_busy: (v) => `event loop busy ${percent(v)}% of the time`,
  event_loop_lag: (v) => `event loop ${v} ms behind`,
};

/** What an overloaded server tells a refused client: close reason, error, retry hint. */
export function overloadRefusal(verdict: OverloadVerdict): {
  reason: string;
  error: ProtocolError;
  extra: { retry_after_ms: number };
} {
  const seconds = Math.max(1, Math.round(verdict.retryAfterMs / 1000));
  const cause = OVERLOAD_CAUSES[verdict.reason](verdict.value);
  return {
    reason: `server overloaded; retry in ${seconds} s`,
    error: new ProtocolError(
      'server_overloaded',
      `The server is overloaded (${cause}); retry in ${seconds} s, or on another instance.`,
      { type: 'server_error' },
    ),
    extra: { retry_after_ms: verdict.retryAfterMs },
  };
}

/**
 * `?greeting=0` (or `false`) turns the character's greeting off before the
 * session starts; `1`/`true` turns it on; none leaves `byDefault` (on, but
 * off in OpenAI's compatibility mode: OpenAI's API never speaks first).
 * Another value leaves the default, with an error naming the values taken.
 */
function greetingParam(url: URL, byDefault: boolean): { on: boolean; error?: ProtocolError } {
  const raw = url.searchParams.get('greeting');
  if (raw === null) return { on: byDefault };
  if (raw === '1' || raw === 'true') return { on: true };
  if (raw === '0' || raw === 'false') return { on: false };
  const stays = byDefault ? 'the greeting stays on' : 'there is no greeting';
  const error = new ProtocolError(
    'invalid_value',
    `?greeting=${raw.slice(0, 40)}: expected 0 or false (no greeting), 1 or true (the greeting); ${stays}.`,
    { param: 'greeting' },
  );
  return { on: byDefault, error };
}

/**
 * A session event with what its connection knows: `expires_at` (when the
 * connection reaches `SESSION_MAX_DURATION_S`, Unix seconds; 0 without a
 * limit) and, in `session.created`, the resume token in
 * `session.troupe.resume_token`.
 */
export function withConnection(
  event: Extract<ServerEvent, { session: unknown }>,
  link: { expiresAt: number; token?: string | undefined },
): ServerEvent {
  const troupe =
    event.type === 'session.created' && link.token !== undefined
      ? { ...event.session.troupe, resume_token: link.token }
      : event.session.troupe;
  return { ...event, session: { ...event.session, expires_at: link.expiresAt, troupe } };
}
