/**
 * What keeps one socket from holding the server: keepalive pings, idle and
 * lifetime clocks, a bounded and fair frame queue, a cap on invalid events,
 * and short echoes.
 */
import type { WebSocket } from 'ws';
import type { Config } from '../config/index.js';
import { ProtocolError } from '../errors.js';
import type { ServerEvent } from '../session/events.js';

/** Close code of a session idle past `SESSION_IDLE_TIMEOUT_S` (also `CLOSE.IDLE`). */
export const CLOSE_IDLE = 4000;
/** Close code of a session past `SESSION_MAX_DURATION_S` (also `CLOSE.EXPIRED`). */
export const CLOSE_EXPIRED = 4001;
/** Frame bytes one socket may have waiting to be handled, whatever the frame count. */
export const MAX_PENDING_FRAME_BYTES = 16 * 1024 * 1024;
/** A socket's frames yield to other sockets' I/O after this long handled in one go. */
export const FRAME_SLICE_MS = 5;
/** `instructions` longer than this are not echoed in full in `session.created/updated`. */
export const MAX_ECHOED_INSTRUCTIONS = 32 * 1024;

/**
 * Bytes sent to a socket between two pings past which a missing answer is
 * not taken for a dead peer: a stream of audio (24 kHz PCM16 is ~64 KB a
 * second as JSON, G.711 ~11, Ogg/Opus a few) on a link slower than it queues
 * the ping behind seconds of audio, and the answer with it.
 */
export const BUSY_LINK_BYTES = 32 * 1024;

/**
 * Pings every socket each `intervalS`; one that has not answered the
 * previous ping is dead (a vanished peer, a NAT that dropped the flow) and
 * goes to `onDead` — unless `sent(ws)` (bytes written to it so far) grew by
 * {@link BUSY_LINK_BYTES} since the last ping: its answer may be waiting
 * behind them. A peer that is gone then fills the send buffers and is closed
 * as a slow consumer, or is cut off at the first ping after the stream ends.
 * 0 = no pings.
 */
export function startPings(
  connections: Map<WebSocket, unknown>,
  intervalS: number,
  onDead: (ws: WebSocket) => void,
  sent: (ws: WebSocket) => number = () => 0,
): NodeJS.Timeout | undefined {
  if (intervalS <= 0) return undefined;
  /** Sockets waiting for a pong, with the bytes sent to them at the last ping. */
  const waiting = new WeakMap<WebSocket, number>();
  const answered = new WeakSet<WebSocket>();
  const timer = setInterval(() => {
    for (const ws of connections.keys()) {
      if (ws.readyState !== ws.OPEN) continue;
      if (!answered.has(ws)) {
        answered.add(ws);
        ws.on('pong', () => waiting.delete(ws));
      }
      const sentNow = sent(ws);
      const sentAtPing = waiting.get(ws);
      if (sentAtPing !== undefined && sentNow - sentAtPing < BUSY_LINK_BYTES) {
        onDead(ws);
        continue;
      }
      waiting.set(ws, sentNow);
      ws.ping();
    }
  }, intervalS * 1000);
  timer.unref();
  return timer;
}

/** How a session ends when one of its clocks runs out. */
export interface SessionEnd {
  code: number;
  wireCode: string;
  metric: string;
  log: string;
  limitS: (limits: Config['server']) => number;
  message: (limits: Config['server']) => string;
}

const SESSION_ENDS: Record<'idle' | 'expired', SessionEnd> = {
  idle: {
    code: CLOSE_IDLE,
    wireCode: 'session_idle_timeout',
    metric: 'idle',
    log: 'idle session closed',
    limitS: (l) => l.sessionIdleTimeoutS,
    message: (l) =>
      `The session had no client event for ${l.sessionIdleTimeoutS} s and was closed; reconnect to continue.`,
  },
  expired: {
    code: CLOSE_EXPIRED,
    wireCode: 'session_expired',
    metric: 'expired',
    log: 'session expired',
    limitS: (l) => l.sessionMaxDurationS,
    message: (l) =>
      `The session reached its maximum duration of ${l.sessionMaxDurationS} s; reconnect to continue.`,
  },
};

/**
 * When a session's idle clock waits: while it works (a response or a
 * background tool call runs), and for a whole period after it has, so the
 * client has as long to answer what it was told as it had to begin with.
 * Each wait is logged (debug).
 */
export function idleWaits(
  working: () => boolean,
  log: { debug: (message: string) => void },
): () => boolean {
  let worked = false;
  return () => {
    const now = working();
    if (now) log.debug('idle clock deferred: the session works');
    else if (worked) log.debug('idle clock restarted: the session has just worked');
    const waits = now || worked;
    worked = now;
    return waits;
  };
}

/**
 * A session's idle and lifetime clocks: `onIdle` after `sessionIdleTimeoutS`
 * without client frames (not while `busy` says to wait: see {@link idleWaits}),
 * `onExpired` after
 * `sessionMaxDurationS`. 0 turns either off.
 */
export function watchLifetime(
  ws: WebSocket,
  limits: Config['server'],
  busy: () => boolean,
  onEnd: (end: SessionEnd) => void,
): { active(): void; stop(): void } {
  const on = {
    onIdle: () => onEnd(SESSION_ENDS.idle),
    onExpired: () => onEnd(SESSION_ENDS.expired),
  };
  const idleMs = limits.sessionIdleTimeoutS * 1000;
  const maxMs = limits.sessionMaxDurationS * 1000;
  const idle =
    idleMs > 0
      ? setTimeout(function check() {
          if (ws.readyState !== ws.OPEN) return;
          // A long response or tool call is not idleness: look again once it could have ended.
          if (busy()) idle!.refresh();
          else on.onIdle();
        }, idleMs).unref()
      : undefined;
  const expiry =
    maxMs > 0
      ? setTimeout(() => ws.readyState === ws.OPEN && on.onExpired(), maxMs).unref()
      : undefined;
  return {
    active: () => idle?.refresh(),
    stop() {
      clearTimeout(idle);
      clearTimeout(expiry);
    },
  };
}

/**
 * One socket's waiting frames: at most `maxFrames` (and
 * {@link MAX_PENDING_FRAME_BYTES}) wait; they run back to back for at most
 * {@link FRAME_SLICE_MS}, then wait a turn of the event loop so other
 * sockets' frames and replies go first — a flood of 30,000 frames from one
 * client cannot stall the rest. A frame that finds none waiting starts a
 * new slice: a client's usual event, seconds after its last, is handled at
 * once, not a turn of the loop later.
 */
export class FrameGate {
  #frames = 0;
  #bytes = 0;
  /** Set by the first frame {@link admit} takes: a frame that finds none waiting starts a slice. */
  #sliceStart = 0;
  readonly #maxFrames: number;
  readonly #now: () => number;

  /** `now` is the clock of the slices (milliseconds; tests pass their own). */
  constructor(maxFrames: number, now: () => number = () => performance.now()) {
    this.#maxFrames = maxFrames;
    this.#now = now;
  }

  /**
   * Takes a frame of `size` bytes into the queue, or says why not (naming
   * `eventId`, the frame's own, as far as {@link peekEventId} finds it).
   */
  admit(size: number, eventId: () => string | null = () => null): ProtocolError | undefined {
    if (this.#frames < this.#maxFrames && this.#bytes + size <= MAX_PENDING_FRAME_BYTES) {
      if (this.#frames === 0) this.#sliceStart = this.#now();
      this.#frames++;
      this.#bytes += size;
      return undefined;
    }
    return new ProtocolError(
      'too_many_pending_events',
      `This event was not handled: ${this.#frames} earlier events are still waiting (at most ${this.#maxFrames}, ${MAX_PENDING_FRAME_BYTES} bytes); wait for the server's answers before sending more.`,
      { eventId: eventId() },
    );
  }

  /** Waits for the frame's turn (yielding when the slice is used up), then lets it go. */
  async next(size: number): Promise<void> {
    if (this.#now() - this.#sliceStart >= FRAME_SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.#sliceStart = this.#now();
    }
    this.#frames--;
    this.#bytes -= size;
  }
}

/** How far into a frame {@link peekEventId} looks. */
export const PEEK_EVENT_ID_BYTES = 1024;

/** `"event_id": "…"` as JSON writes it (escapes kept as sent). */
const EVENT_ID_FIELD = /"event_id"\s*:\s*"((?:[^"\\]|\\.){0,256})"/;

/**
 * A frame's `event_id` without parsing it: for a frame refused before it is
 * read (the queue is full), so the client still learns which event was
 * refused. Looks at the first {@link PEEK_EVENT_ID_BYTES} bytes only, where
 * clients put it (after `type`); null when it is not there.
 */
export function peekEventId(frame: Buffer): string | null {
  const head = frame.toString('utf8', 0, Math.min(frame.length, PEEK_EVENT_ID_BYTES));
  const m = EVENT_ID_FIELD.exec(head);
  if (!m) return null;
  try {
    return JSON.parse(`"${m[1]}"`) as string;
  } catch {
    return null;
  }
}

/**
 * Events one socket may have refused as invalid (not JSON, an unknown type,
 * a field the schema refuses, a binary frame): this many at once, then this
 * many a second ({@link RateMeter}); one more closes it. A real client sends at most
 * ~50 events a second (20 ms audio chunks), and an event refused is a bug it
 * hears of at once; more than 100 refused at once is a flood, each answered
 * by an `error` several times its size, and other sessions would wait on it.
 */
export const MAX_INVALID_EVENTS_PER_S = 100;

/**
 * Pings and pongs one socket may send: this many at once, then this many a
 * second ({@link RateMeter}); one more closes it. Clients ping every few seconds at
 * most (browsers cannot ping at all) and pong once for each of the server's
 * keepalive pings; each ping costs the server a pong written to the socket,
 * and a pong nobody asked for costs reading it. `ws`'s own guard (cut at 60
 * pongs not yet written) dropped the connection without a close frame or a
 * word of why; this one says why.
 */
export const MAX_PINGS_PER_S = 100;

/** The error a socket that sent more pings and pongs than {@link MAX_PINGS_PER_S} allows is closed with. */
export const pingFloodError = (): ProtocolError =>
  new ProtocolError(
    'too_many_pings',
    `More than ${MAX_PINGS_PER_S} WebSocket pings or pongs at once (or over ${MAX_PINGS_PER_S} a second), so the session was closed; a keepalive ping every few seconds is plenty.`,
  );

/**
 * Answers a socket's pings with pongs (the server's ws has `autoPong` off):
 * `answered` after each pong, `flood` instead past {@link MAX_PINGS_PER_S},
 * pongs the client sends counted with its pings; nothing while `skip`
 * holds (the socket is cut off).
 */
export function answerPings(
  ws: WebSocket,
  on: { skip: () => boolean; answered: () => void; flood: () => void },
): void {
  const frames = new RateMeter(MAX_PINGS_PER_S);
  const open = (): boolean => !on.skip() && ws.readyState === ws.OPEN;
  ws.on('ping', (data) => {
    if (!open()) return;
    if (frames.over()) return on.flood();
    ws.pong(data);
    on.answered();
  });
  ws.on('pong', () => {
    if (open() && frames.over()) on.flood();
  });
}

/**
 * Meters one socket's events of a kind (invalid events, pings and pongs):
 * `max` may come at once, then `max` a second. A bucket of `max`
 * tokens, filled again at `max` a second by the clock, each event taking
 * one: a stall of the server, which then reads a second's events at once,
 * does not make a client that keeps under the rate look like a flood (a
 * count over the last second of reads did, from ~80 pings a second). Two
 * numbers per socket, whatever the rate.
 */
export class RateMeter {
  #tokens: number;
  #at: number | undefined;
  readonly #max: number;
  readonly #now: () => number;

  /** `now` is the clock (milliseconds; tests pass their own). */
  constructor(max = MAX_INVALID_EVENTS_PER_S, now: () => number = () => performance.now()) {
    this.#max = max;
    this.#tokens = max;
    this.#now = now;
  }

  /** Counts one event; true when it is more than the meter allows. */
  over(): boolean {
    const now = this.#now();
    if (this.#at !== undefined) {
      this.#tokens = Math.min(this.#max, this.#tokens + ((now - this.#at) * this.#max) / 1000);
    }
    this.#at = now;
    if (this.#tokens < 1) return true;
    this.#tokens -= 1;
    return false;
  }
}

/**
 * `session.created/updated` with `instructions` over {@link MAX_ECHOED_INSTRUCTIONS}
 * cut short: a client's megabyte of instructions must not come back to it
 * on every update (it fills the socket and gets a healthy client cut off).
 */
export function withShortInstructions(event: ServerEvent): ServerEvent {
  if (event.type !== 'session.created' && event.type !== 'session.updated') return event;
  const instructions = (event.session as { instructions?: unknown }).instructions;
  if (typeof instructions !== 'string' || instructions.length <= MAX_ECHOED_INSTRUCTIONS) {
    return event;
  }
  const left = instructions.length - MAX_ECHOED_INSTRUCTIONS;
  return {
    ...event,
    session: {
      ...event.session,
      instructions: `${instructions.slice(0, MAX_ECHOED_INSTRUCTIONS)}… [${left} more characters not echoed]`,
    },
  };
}
