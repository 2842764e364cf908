/**
 * `/v1/realtime`: the WebSocket upgrade and the endpoint's sessions. Who may
 * connect is admission.ts's to say, a socket's events in and out are
 * socket-link.ts's, opening (or resuming) a session is session-open.ts's;
 * this module puts them together and stops them all at shutdown.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import type { CharacterRegistry } from '../characters/registry.js';
import { DEFAULT_OVERLOAD_RETRY_MS } from '../config/defaults.js';
import type { Config } from '../config/index.js';
import { ProtocolError, errorLine } from '../errors.js';
import { waitAtMost } from '../timeouts.js';
import { countFromZero, type Metrics } from '../metrics/index.js';
import type { ServerEvent } from '../session/events.js';
import type { SessionSettings } from '../session/response-runner.js';
import type { Session } from '../session/session.js';
import type { SessionVoice } from '../session/voice-settings.js';
import {
  KEY_PROTOCOL_PREFIX,
  OPENAI_ONLY_PATH,
  checkAccess,
  impliedDialect,
  pickSession,
  type PickedSession,
} from './admission.js';
import { requestUrl, unmuteRoute } from './http-routes.js';
import type { ServerLlm } from './llm.js';
import type { OverloadMonitor } from './overload.js';
import type { Resumer } from './resume.js';
import { BackgroundHandover } from '../session/background-handover.js';
import { createSessionOpener, overloadRefusal, type SessionOpener } from './session-open.js';
import type { RestoreInput } from './session-state.js';
import { CLOSE, closeSocket, refuseUpgrade } from './socket-close.js';
import { startPings } from './socket-guards.js';
import { createSocketLink, listenFrames, type SocketLink } from './socket-link.js';

export { CLOSE } from './socket-close.js';

/** How long cancelled responses get to send their `response.done` before shutdown closes the sockets. */
const CANCEL_WAIT_MS = 1_000;

/** What the realtime endpoint needs from the server. */
export interface RealtimeContext {
  config: Config;
  registry: CharacterRegistry;
  llm: ServerLlm;
  metrics: Metrics;
  log: Logger;
  /** Speech engines for sessions; absent = text only. */
  voice?: SessionVoice;
  /** Refuses new sessions (1013) while the process is saturated; absent = never. */
  overload?: OverloadMonitor;
  /** Resume tokens and the store; absent = no resume. */
  resume?: Resumer;
  /**
   * Set in a worker of several: called when a connection becomes a session
   * or ends (the worker tells its primary); `MAX_SESSIONS` is then per worker.
   */
  onSessionsChanged?: () => void;
}

/** The realtime endpoint. */
export interface RealtimeEndpoint {
  /** Handles an HTTP upgrade request (any path: others get 404). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  readonly active: number;
  /** Why a new session would be refused now, if it would (not logged, not counted). */
  refusing(): Refusing | undefined;
  /** Stops taking connections; new ones are closed with 1001. */
  stopAccepting(): void;
  /**
   * Closes each session (1001) once it has no response running: at once for
   * the idle, the others as their responses end. Resolves true when none
   * runs any more, false when `deadline` (epoch ms) passes first.
   */
  drain(deadline: number): Promise<boolean>;
  /**
   * Stops every session, cancelling running responses, and waits (briefly)
   * until they have sent their `response.done`, so clients learn how each
   * turn ended before their socket closes.
   */
  cancelAll(): Promise<void>;
  /**
   * Stops every session and closes every socket with `code`, each once its
   * session's last state is in the resume store; with `until` (epoch ms), a
   * last write the store refused is tried again until then.
   */
  closeAll(code: number, reason: string, until?: number): void;
  /** Resolves when the sessions closed so far have written their last state to the resume store. */
  resumeFlushed(): Promise<void>;
}

/**
 * Creates the endpoint.
 *
 * @example
 * const realtime = createRealtime({ config, registry, llm, metrics, log });
 * server.on('upgrade', realtime.upgrade);
 */
export function createRealtime(ctx: RealtimeContext): RealtimeEndpoint {
  const { config, metrics, log } = ctx;
  const limits = config.server;
  const connections = new Map<WebSocket, Session | undefined>();
  /** Sockets whose session shutdown has stopped, until they close. */
  const closing = new WeakSet<WebSocket>();
  const opener = createSessionOpener({
    ...(ctx.resume ? { resume: ctx.resume } : {}),
    metrics,
    log,
  });
  countFromZero(metrics.sessions, ctx.registry);
  // Background calls of a dropped session run on, for a resume in this process to take over.
  const handover = ctx.resume
    ? new BackgroundHandover({
        keepMs: config.scale.resumeTtlS * 1000,
        log: log.child({ part: 'background' }),
      })
    : undefined;
  let accepting = true;
  /** Each socket's connection, whose byte count tells a busy link from a dead one. */
  const links = new WeakMap<WebSocket, Socket>();
  const pings = startPings(
    connections,
    limits.pingIntervalS,
    (ws) => {
      metrics.server.rejected.inc({ reason: 'dead_peer' });
      log.info({ session: connections.get(ws)?.id ?? null }, 'dead peer cut off');
      connections.get(ws)?.close();
      ws.terminate();
    },
    (ws) => links.get(ws)?.bytesWritten ?? 0,
  );
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: limits.maxFrameBytes,
    // Each session's link answers pings, and closes a flood of them with a reason.
    autoPong: false,
    // Browsers fail a connection whose offered subprotocols were all refused,
    // so one is always picked: `realtime` when offered, else another one, and
    // the token's only when the client offered nothing else (it goes back to
    // the client that sent it; refusing it would fail the connection).
    handleProtocols(protocols) {
      if (protocols.has('realtime')) return 'realtime';
      for (const p of protocols) if (!p.startsWith(KEY_PROTOCOL_PREFIX)) return p;
      return protocols.values().next().value ?? false;
    },
  });
  const admit = createAdmitter(ctx, connections, () => accepting);
  const open = createConnectionOpener(ctx, connections, opener, () => accepting, closing, handover);

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // Node removes its own error listener before handing over an upgraded
    // socket: a reset while the 404 below is written would otherwise be an
    // uncaught 'error' that stops the process.
    socket.on('error', () => socket.destroy());
    const url = requestUrl(req.url);
    if (url === undefined) return refuseUpgrade(socket, '400 Bad Request', 'not a valid URL');
    // Unmute's production frontend dials /api/v1/realtime on its own origin;
    // Pipecat and LiveKit Agents may dial /openai/v1/realtime (OpenAI's events only).
    if (url.pathname !== OPENAI_ONLY_PATH && unmuteRoute(url.pathname) !== '/v1/realtime') {
      return refuseUpgrade(
        socket,
        '404 Not Found',
        'WebSocket endpoint is /v1/realtime (or /openai/v1/realtime)',
      );
    }
    if (req.headers['x-forwarded-for'] !== undefined) {
      // Through a load balancer: a 503 before the handshake lets it try
      // another instance at once (nginx: proxy_next_upstream http_503).
      const refusal = accepting ? noRoom(ctx, connections, true, resuming(url)) : SHUTTING_DOWN;
      if (refusal) {
        metrics.server.rejected.inc({ reason: refusal.label });
        const retryS = Math.max(1, Math.round(refusal.retryAfterMs / 1000));
        return refuseUpgrade(socket, '503 Service Unavailable', refusal.reason, retryS);
      }
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      links.set(ws, req.socket);
      // First, before any refusal: see watchSocketErrors.
      const errors = watchSocketErrors(ws, limits.maxFrameBytes, metrics, log);
      const picked = admit(ws, req, url);
      if (picked === undefined) return;
      void open(ws, req, url, picked, errors).catch((err: unknown) => {
        log.error({ err }, 'connection setup failed');
        closeSocket(ws, CLOSE.INTERNAL, 'internal error');
      });
    });
  }

  /** Stops a socket's session and closes it once its last state is written (once). */
  function closeOne(ws: WebSocket, code: number, reason: string, until?: number): void {
    if (closing.has(ws) || !connections.has(ws)) return;
    closing.add(ws);
    connections.get(ws)?.close();
    // The close follows the last write: a client that reconnects at once resumes all it said.
    void opener.closing(ws, until).finally(() => closeSocket(ws, code, reason));
  }

  return {
    upgrade,
    get active() {
      return connections.size;
    },
    refusing() {
      if (!accepting) return SHUTTING_DOWN.label;
      const room = noRoom(ctx, connections, false);
      // Busy (event loop, CPU): a resume is still let in.
      if (room?.label === 'overloaded' && room.resumable) return 'busy';
      return room?.label;
    },
    stopAccepting() {
      accepting = false;
      clearInterval(pings);
    },
    async drain(deadline) {
      // Its clients reconnect elsewhere as each session finishes, not all at
      // the drain's end, and an idle one does not wait for the longest reply.
      for (const [ws, session] of connections) {
        if (session === undefined) continue; // still opening: closeAll takes it
        // A last write the store refuses (Redis down) is tried until the deadline.
        void session
          .idle()
          .then(() => closeOne(ws, CLOSE.GOING_AWAY, SHUTTING_DOWN.reason, deadline));
      }
      const busy = () => [...connections.values()].filter((s) => s?.busy) as Session[];
      while (busy().length > 0) {
        const left = deadline - Date.now();
        if (left <= 0) return false;
        await waitAtMost(Promise.all(busy().map((s) => s.idle())), left);
      }
      return true;
    },
    async cancelAll() {
      const running = [...connections.values()].filter((s) => s?.busy) as Session[];
      for (const session of running) session.close();
      await waitAtMost(Promise.all(running.map((s) => s.idle())), CANCEL_WAIT_MS);
    },
    closeAll(code, reason, until) {
      for (const ws of connections.keys()) closeOne(ws, code, reason, until);
      handover?.close();
    },
    async resumeFlushed() {
      await opener.flushed();
    },
  };
}

/**
 * Why a new session would be refused now: `busy` is overloaded by the event
 * loop or CPU, which a resume is let past (so a readiness probe must not
 * take the instance out for it); `overloaded` is past its memory limits.
 */
export type Refusing = 'full' | 'overloaded' | 'busy' | 'shutting_down';

/** Why a new session is turned away, and when to try again. */
interface Refusal {
  /** The `troupe_connections_rejected_total` reason. */
  label: 'full' | 'overloaded' | 'shutting_down';
  /** Overloaded, but a resume would be let in (the event loop or CPU is busy). */
  resumable?: boolean;
  /** The close reason, or the 503's text. */
  reason: string;
  retryAfterMs: number;
  /** The `error` a client let through the handshake gets first, if any. */
  error?: ProtocolError;
  extra?: Record<string, unknown>;
}

const SHUTTING_DOWN: Refusal = {
  label: 'shutting_down',
  reason: 'server shutting down',
  retryAfterMs: DEFAULT_OVERLOAD_RETRY_MS,
};

/**
 * Whether this worker has no room for a new session: full (`MAX_SESSIONS`)
 * or overloaded (logged when `refused`). The same verdict whether it is
 * given as a 503 before the handshake or a 1013 after it, or only reported.
 */
function noRoom(
  ctx: RealtimeContext,
  connections: Map<WebSocket, Session | undefined>,
  refused = true,
  resume = false,
): Refusal | undefined {
  const { maxSessions } = ctx.config.server;
  if (connections.size >= maxSessions) {
    // A worker is handed a connection it has no room for only when every worker is full.
    const cap = ctx.onSessionsChanged
      ? `${maxSessions} sessions per worker`
      : `${maxSessions} sessions`;
    return {
      label: 'full',
      reason: `server full (${cap}); try again later`,
      retryAfterMs: DEFAULT_OVERLOAD_RETRY_MS,
    };
  }
  const overloaded = ctx.overload?.check();
  if (!overloaded) return undefined;
  if (resume && BUSY_REASONS.has(overloaded.reason)) return undefined;
  if (refused)
    ctx.log.warn(
      { reason: overloaded.reason, value: overloaded.value },
      'session refused: overloaded',
    );
  return {
    label: 'overloaded',
    retryAfterMs: overloaded.retryAfterMs,
    resumable: BUSY_REASONS.has(overloaded.reason),
    ...overloadRefusal(overloaded),
  };
}

/**
 * Overload verdicts a resume is let past: a conversation that was already
 * served, landing here with the other clients of an instance that died,
 * when the event loop looks busiest. Not past memory: that would crash the
 * process and every session in it.
 */
const BUSY_REASONS = new Set(['event_loop_busy', 'event_loop_lag', 'cpu']);

/** A connection that resumes a conversation (`?resume=`). */
const resuming = (url: URL): boolean => url.searchParams.has('resume');

/**
 * The connection policy: a socket that may not have a session is refused
 * (with a close code and reason, and an `error` where there is one to give)
 * and gets undefined; one that may, the session it asked for.
 */
function createAdmitter(
  ctx: RealtimeContext,
  connections: Map<WebSocket, Session | undefined>,
  accepting: () => boolean,
): (ws: WebSocket, req: IncomingMessage, url: URL) => PickedSession | undefined {
  const { config, metrics } = ctx;
  const limits = config.server;
  const reject = (
    ws: WebSocket,
    code: number,
    reason: string,
    label: string,
    error?: ProtocolError,
    extra?: Record<string, unknown>,
  ): undefined => {
    metrics.server.rejected.inc({ reason: label });
    if (error) sendRefusal(ws, metrics, error, extra);
    closeSocket(ws, code, reason);
    return undefined;
  };
  return (ws, req, url) => {
    // Refusals still complete the upgrade, so the client gets a close code and reason.
    if (!accepting()) {
      return reject(ws, CLOSE.GOING_AWAY, SHUTTING_DOWN.reason, SHUTTING_DOWN.label);
    }
    const access = checkAccess(limits, req, url);
    if (!('admitted' in access)) {
      // Who knocked with a wrong token or from a page not allowed: the operator's to see.
      ctx.log.info(
        { reason: access.label, origin: req.headers.origin ?? null, ...clientAddress(req) },
        'session refused: not allowed',
      );
      return reject(ws, CLOSE.POLICY, access.reason, access.label, access.error);
    }
    const room = noRoom(ctx, connections, true, resuming(url));
    if (room) {
      return reject(ws, CLOSE.TRY_AGAIN, room.reason, room.label, room.error, room.extra);
    }
    const picked = pickSession(ctx.registry, config.sessions, url, access.secretModel);
    if (picked instanceof ProtocolError) {
      return reject(ws, picked.closeCode ?? CLOSE.POLICY, picked.wireCode, picked.wireCode, picked);
    }
    return picked;
  };
}

/**
 * Where a connection came from, for its log lines: the peer's address (a
 * load balancer's, behind one) and the `X-Forwarded-For` it passed on, which
 * match a balancer's own log line to the session.
 */
function clientAddress(req: IncomingMessage): {
  address: string | null;
  forwarded_for: string | null;
} {
  const forwarded = req.headers['x-forwarded-for'];
  return {
    address: req.socket.remoteAddress ?? null,
    forwarded_for: (Array.isArray(forwarded) ? forwarded.join(', ') : forwarded) ?? null,
  };
}

/** The `error` a refused socket gets before its close frame. */
function sendRefusal(
  ws: WebSocket,
  metrics: Metrics,
  error: ProtocolError,
  extra?: Record<string, unknown>,
): void {
  metrics.server.protocolErrors.inc({ code: error.wireCode });
  ws.send(
    JSON.stringify({
      type: 'error',
      event_id: `event_${randomUUID()}`,
      error: { ...error.payload, ...extra },
    }),
  );
}

/**
 * The handshake of an admitted socket: its dialect, its link (events in and
 * out), then its session, fresh or resumed with `?resume=`, started and
 * written to the resume store from then on.
 */
function createConnectionOpener(
  ctx: RealtimeContext,
  connections: Map<WebSocket, Session | undefined>,
  opener: SessionOpener,
  accepting: () => boolean,
  closing: WeakSet<WebSocket>,
  handover: BackgroundHandover | undefined,
): (
  ws: WebSocket,
  req: IncomingMessage,
  url: URL,
  picked: PickedSession,
  errors: SocketErrors,
) => Promise<void> {
  const { config, metrics, log } = ctx;
  const limits = config.server;
  const settings = sessionSettings(ctx);
  return async (ws, req, url, picked, errors) => {
    const { character, variant, metadata } = picked;
    const implied = impliedDialect(req, url);
    let id = `sess_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    const link = createSocketLink({
      ws,
      socket: req.socket,
      limits,
      imageUrlHosts: config.sessions.imageUrlHosts,
      metrics,
      connections,
      log: log.child({ session: id }),
      dialect: picked.dialect ?? implied ?? 'openai',
      compat: picked.compat,
      detecting: picked.dialect === undefined && implied === undefined,
    });
    errors.accepted(link);
    connections.set(ws, undefined);
    ctx.onSessionsChanged?.();
    ws.on('close', (code) => {
      // A client that closed normally is done: its background calls stop (others may resume).
      connections.get(ws)?.close({ final: code === CLOSE.NORMAL });
      connections.delete(ws);
      ctx.onSessionsChanged?.();
    });
    const opened = listenFrames({ ws, link, limits, metrics, connections, accepting, closing });
    // Admitted with the server's token or a key minted from it: resume records are bound to the token.
    const auth = limits.authToken;
    const shared = sessionOptions(ctx, settings, handover, link.send, link.log, (settled) => {
      const tracker = link.resumeLink.tracker;
      tracker?.changed();
      if (settled) void tracker?.flush();
    });
    // OpenAI's events only: the client never sees the server's tool calls, nor follows them up.
    const common = picked.compat === 'openai' ? { ...shared, toolCallsShown: false } : shared;
    let opening: { session: Session; resumeError?: ProtocolError };
    try {
      const fresh = {
        id,
        character,
        variant,
        metadata,
        openaiDefaults: picked.compat === 'openai',
      };
      opening = await opener.open(url, auth, common, fresh, (resumed) => {
        id = resumed.id;
        link.log = resumed.log;
      });
    } catch (err) {
      // The prompt generator failed or timed out: the character cannot serve now.
      link.log.error({ err }, 'session open failed');
      const error = new ProtocolError(
        'character_unavailable',
        `Character "${character.id}" could not start a session: ${errorLine(err, 300)}`,
        { type: 'server_error' },
      );
      metrics.server.rejected.inc({ reason: 'character_unavailable' });
      sendRefusal(ws, metrics, error);
      closeSocket(ws, CLOSE.INTERNAL, 'character_unavailable');
      return opened();
    }
    const { session, resumeError } = opening;
    if (ws.readyState !== ws.OPEN) {
      session.close();
      return opened();
    }
    connections.set(ws, session);
    link.resumeLink.tracker = opener.track(ws, session, id, auth, link.log, () => {
      // Another connection resumed this conversation: one conversation, one connection.
      metrics.server.rejected.inc({ reason: 'resumed_elsewhere' });
      link.sendError(
        new ProtocolError(
          'session_resumed_elsewhere',
          'This conversation was resumed on another connection (?resume= with its token); this connection is closed, and what is sent on it is no longer kept.',
        ),
      );
      connections.get(ws)?.close();
      closeSocket(ws, CLOSE.RESUMED_ELSEWHERE, 'session_resumed_elsewhere');
    });
    if (link.dialect === 'unmute') link.speakUnmute(session);
    link.log.info(
      {
        character: session.character.id,
        variant: variant ?? null,
        dialect: link.detecting ? 'auto' : link.dialect,
        origin: req.headers.origin ?? null,
        ...clientAddress(req),
      },
      'session opened',
    );
    const sessionLog = link.log;
    ws.once('close', (code) => sessionLog.info({ code }, 'session closed'));
    session.start();
    // After session.created: the client learns of the fresh session first.
    if (resumeError) link.sendError(resumeError);
    // The token is good from the first event on.
    void link.resumeLink.tracker?.flush();
    opened();
  };
}

/** A socket's error listener: told when the socket was accepted, and where its session logs. */
interface SocketErrors {
  accepted(link: SocketLink): void;
}

/**
 * ws emits 'error' for a bad or oversized frame even on a socket it is
 * closing, and an unheard 'error' would throw and stop the process (a
 * refused client could take the server down): listened to from the start.
 */
function watchSocketErrors(
  ws: WebSocket,
  maxFrameBytes: number,
  metrics: Metrics,
  log: Logger,
): SocketErrors {
  let logs: { log: Logger } = { log };
  let accepted = false;
  // ws closes the socket of a bad frame with its code alone, before it emits
  // the error: the close's reason says why.
  const close = ws.close.bind(ws);
  ws.close = (code?: number, reason?: string | Buffer): void =>
    close(code, reason ?? (code === undefined ? undefined : frameCloseReason(code, maxFrameBytes)));
  ws.on('error', (err: Error & { code?: string }) => {
    if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
      // A refused socket was already counted under its refusal reason.
      if (accepted) metrics.server.rejected.inc({ reason: 'frame_too_large' });
      logs.log.warn({ limit: maxFrameBytes }, 'frame too large');
    } else logs.log.warn({ code: err.code, err: err.message }, 'socket error');
  });
  return {
    accepted(link) {
      accepted = true;
      logs = link;
    },
  };
}

/** The reason of a close for a bad frame, which ws gives without one. */
function frameCloseReason(code: number, maxFrameBytes: number): string | undefined {
  if (code === CLOSE.TOO_BIG) return `frame over MAX_FRAME_BYTES (${maxFrameBytes} bytes)`;
  if (code === CLOSE.NOT_UTF8) return 'a text frame that is not UTF-8';
  if (code === CLOSE.PROTOCOL) return 'an invalid WebSocket frame';
  return undefined;
}

/**
 * How the endpoint's sessions run turns. A reply under way is written at
 * times only to a store outside the process (the primary's, Redis): the
 * in-process store reads the live session when a record is claimed, and
 * dies with it.
 */
function sessionSettings(ctx: RealtimeContext): SessionSettings {
  const { sessions, scale } = ctx.config;
  const writes = ctx.resume !== undefined && ctx.resume.store.hold === undefined;
  return writes ? { ...sessions, replySaveMs: scale.resumeReplySaveMs } : sessions;
}

/** What every session of the endpoint is made with. */
function sessionOptions(
  ctx: RealtimeContext,
  settings: SessionSettings,
  handover: BackgroundHandover | undefined,
  send: (event: ServerEvent) => void,
  sessionLog: Logger,
  onChange: (settled: boolean) => void,
): RestoreInput {
  return {
    characters: {
      get: (cid: string) => ctx.registry.get(cid),
      ids: () => ctx.registry.list().map((c) => c.id),
    },
    llm: ctx.llm.get,
    settings,
    send,
    log: sessionLog,
    logContent: ctx.config.log.content,
    metrics: ctx.metrics.sessions,
    onChange: (_session, settled) => onChange(settled === true),
    ...(ctx.voice ? { voice: ctx.voice } : {}),
    ...(handover ? { handover } : {}),
  };
}
