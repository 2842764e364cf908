/**
 * `/v1/realtime`: the WebSocket upgrade, who may connect (auth, origin,
 * limits), and the glue between a socket and its session: frames are parsed
 * with the protocol's schemas, events are encoded for the dialect, and a
 * client that stops reading is cut off before it can hold the server's memory.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import type { CharacterRegistry } from '../characters/registry.js';
import type { LoadedCharacter } from '../characters/types.js';
import type { Config } from '../config/index.js';
import { ProtocolError } from '../errors.js';
import type { Metrics } from '../metrics/index.js';
import {
  DIALECTS,
  createEncoder,
  detectDialect,
  parseClientEvent,
  type Dialect,
} from '../protocol/index.js';
import type { ServerEvent } from '../session/events.js';
import type { Session } from '../session/session.js';
import type { SessionVoice } from '../session/voice-settings.js';
import { originAllowed, requestUrl, unmuteRoute } from './http-routes.js';
import { refuseImageUrls } from './image-policy.js';
import { FrameGate, startPings, watchLifetime, withShortInstructions } from './socket-guards.js';
import type { ServerLlm } from './llm.js';
import type { OverloadMonitor, OverloadVerdict } from './overload.js';
import type { ResumeTracker, Resumer } from './resume.js';
import { createSessionOpener, overloadRefusal, withResumeToken } from './session-open.js';
import type { RestoreInput } from './session-state.js';

/** Close codes of docs/protocol.md. */
export const CLOSE = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  POLICY: 1008,
  TOO_BIG: 1009,
  INTERNAL: 1011,
  TRY_AGAIN: 1013,
  /** No client frame for `SESSION_IDLE_TIMEOUT_S`. */
  IDLE: 4000,
  /** The session lasted `SESSION_MAX_DURATION_S`. */
  EXPIRED: 4001,
} as const;

/** The subprotocol browsers use to carry the token (`openai-insecure-api-key.<token>`). */
const KEY_PROTOCOL_PREFIX = 'openai-insecure-api-key.';
/** How long a closing socket may take to say goodbye before it is cut. */
const CLOSE_TIMEOUT_MS = 1_000;
/** A close frame's reason: 125 bytes of payload minus the 2-byte code. */
const MAX_CLOSE_REASON_BYTES = 123;
/** How long cancelled responses get to send their `response.done` before shutdown closes the sockets. */
const CANCEL_WAIT_MS = 1_000;
/** How long a slow consumer gets to read its way to the 1013 close frame before it is cut. */
const SLOW_CLOSE_TIMEOUT_MS = 10_000;

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
}

/** The realtime endpoint. */
export interface RealtimeEndpoint {
  /** Handles an HTTP upgrade request (any path: others get 404). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  readonly active: number;
  /** Stops taking connections; new ones are closed with 1001. */
  stopAccepting(): void;
  /** Waits until no session has a response running, or `deadline` (epoch ms) passes. */
  drain(deadline: number): Promise<boolean>;
  /**
   * Stops every session, cancelling running responses, and waits (briefly)
   * until they have sent their `response.done`, so clients learn how each
   * turn ended before their socket closes.
   */
  cancelAll(): Promise<void>;
  /** Closes every socket with `code` and stops every session. */
  closeAll(code: number, reason: string): void;
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
  const opener = createSessionOpener({
    ...(ctx.resume ? { resume: ctx.resume } : {}),
    metrics,
    log,
  });
  let accepting = true;
  const pings = startPings(connections, limits.pingIntervalS, (ws) => {
    metrics.server.rejected.inc({ reason: 'dead_peer' });
    log.info({}, 'dead peer cut off');
    connections.get(ws)?.close();
    ws.terminate();
  });

  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: limits.maxFrameBytes,
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

  const reject = (
    ws: WebSocket,
    code: number,
    reason: string,
    label: string,
    error?: ProtocolError,
    extra?: Record<string, unknown>,
  ) => {
    metrics.server.rejected.inc({ reason: label });
    if (error) {
      metrics.server.protocolErrors.inc({ code: error.wireCode });
      ws.send(
        JSON.stringify({
          type: 'error',
          event_id: `event_${randomUUID()}`,
          error: { ...error.payload, ...extra },
        }),
      );
    }
    closeSocket(ws, code, reason);
  };

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // Node removes its own error listener before handing over an upgraded
    // socket: a reset while the 404 below is written would otherwise be an
    // uncaught 'error' that stops the process.
    socket.on('error', () => socket.destroy());
    const url = requestUrl(req.url);
    if (url === undefined) return refuseUpgrade(socket, '400 Bad Request', 'not a valid URL');
    // Unmute's production frontend dials /api/v1/realtime on its own origin.
    if (unmuteRoute(url.pathname) !== '/v1/realtime') {
      return refuseUpgrade(socket, '404 Not Found', 'WebSocket endpoint is /v1/realtime');
    }
    if (!accepting && req.headers['x-forwarded-for'] !== undefined) {
      // Through a load balancer: a 503 before the handshake lets it try
      // another instance at once (nginx: proxy_next_upstream http_503).
      metrics.server.rejected.inc({ reason: 'shutting_down' });
      return refuseUpgrade(socket, '503 Service Unavailable', 'server shutting down');
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      void connect(ws, req, url).catch((err: unknown) => {
        log.error({ err }, 'connection setup failed');
        closeSocket(ws, CLOSE.INTERNAL, 'internal error');
      });
    });
  }

  async function connect(ws: WebSocket, req: IncomingMessage, url: URL): Promise<void> {
    // First, before any refusal: ws emits 'error' for a bad or oversized frame
    // even on a socket it is closing, and an unheard 'error' would throw and
    // stop the process (a refused client could take the server down).
    let socketLog = log;
    let accepted = false;
    ws.on('error', (err: Error & { code?: string }) => {
      if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
        // A refused socket was already counted under its refusal reason.
        if (accepted) metrics.server.rejected.inc({ reason: 'frame_too_large' });
        socketLog.warn({ limit: limits.maxFrameBytes }, 'frame too large');
      } else socketLog.warn({ code: err.code, err: err.message }, 'socket error');
    });

    // Refusals still complete the upgrade, so the client gets a close code and reason.
    if (!accepting) return reject(ws, CLOSE.GOING_AWAY, 'server shutting down', 'shutting_down');
    const denied = checkAccess(req, url);
    if (denied) return reject(ws, CLOSE.POLICY, denied.reason, denied.label);
    if (connections.size >= limits.maxSessions) {
      return reject(
        ws,
        CLOSE.TRY_AGAIN,
        `server full (${limits.maxSessions} sessions); try again later`,
        'full',
      );
    }
    const overloaded = ctx.overload?.check();
    if (overloaded) return refuseOverloaded(ws, overloaded);

    const picked = pickSession(url);
    if (picked instanceof ProtocolError) {
      return reject(ws, picked.closeCode ?? CLOSE.POLICY, picked.wireCode, picked.wireCode, picked);
    }
    const { character, variant } = picked;
    // Only Unmute's production frontend dials /api/v1/realtime: its dialect from the start
    // (so it gets no session.created it does not know). Elsewhere, without ?dialect=, the
    // client's first session.update (or an Unmute-only event) tells.
    // Beta-protocol clients announce themselves with OpenAI's `OpenAI-Beta: realtime=v1` header.
    const impliedDialect =
      url.pathname !== '/v1/realtime'
        ? 'unmute'
        : /\brealtime=v1\b/.test(String(req.headers['openai-beta'] ?? ''))
          ? 'openai-beta'
          : undefined;
    let dialect = picked.dialect ?? impliedDialect ?? 'openai';
    let detecting = picked.dialect === undefined && impliedDialect === undefined;
    accepted = true;
    connections.set(ws, undefined);
    ws.on('close', () => {
      connections.get(ws)?.close();
      connections.delete(ws);
    });

    let id = `sess_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    let sessionLog = log.child({ session: id });
    socketLog = sessionLog;
    let encoder = createEncoder(dialect);
    /** Unmute's frontend: its encoder, and Ogg/Opus spoken replies, before any event is handled. */
    const speakUnmute = (session: Session): void => {
      dialect = 'unmute';
      encoder = createEncoder('unmute', { character: session.character.id });
      session.configureVoice({ format: 'ogg_opus', outputModalities: ['audio'] });
    };
    let cutOff = false;
    /** The session's link to the resume store, once it has one. */
    const resumeLink: { tracker?: ResumeTracker } = {};
    const send = (event: ServerEvent): void => {
      if (cutOff || ws.readyState !== ws.OPEN) return;
      if (event.type === 'session.created' && resumeLink.tracker) {
        event = withResumeToken(event, resumeLink.tracker.token);
      }
      // LLM failures are counted with the turns (status failed), not as protocol errors.
      if (event.type === 'error' && event.error.type !== 'llm_error') {
        metrics.server.protocolErrors.inc({ code: event.error.code });
      }
      const frame = encoder.encode(withShortInstructions(event));
      if (frame === null) return;
      ws.send(frame);
      if (ws.bufferedAmount > limits.maxBufferedBytes) {
        // A client that stopped reading: free what it holds now, not when it
        // wakes up; the close frame (1013) follows what it has not read yet.
        cutOff = true;
        sessionLog.warn({ buffered: ws.bufferedAmount }, 'slow consumer closed');
        metrics.server.rejected.inc({ reason: 'slow_consumer' });
        connections.get(ws)?.close();
        closeSocket(
          ws,
          CLOSE.TRY_AGAIN,
          `slow consumer: more than ${limits.maxBufferedBytes} bytes unread`,
          SLOW_CLOSE_TIMEOUT_MS,
        );
      }
    };
    const lifetime = watchLifetime(
      ws,
      limits,
      () => connections.get(ws)?.busy === true,
      (end) => {
        // Tell the client why, stop the session, close with the end's code.
        sessionLog.info({ limitS: end.limitS(limits) }, end.log);
        metrics.server.rejected.inc({ reason: end.metric });
        sendError(new ProtocolError(end.wireCode, end.message(limits)));
        cutOff = true;
        connections.get(ws)?.close();
        closeSocket(ws, end.code, end.wireCode);
      },
    );
    ws.on('close', () => lifetime.stop());

    const sendError = (err: ProtocolError): void => send({ type: 'error', error: err.payload });

    // Frames that arrive while the session opens wait in this chain, in order.
    let opened!: () => void;
    let chain: Promise<unknown> = new Promise<void>((resolve) => (opened = resolve));
    const gate = new FrameGate(limits.maxPendingFrames);
    ws.on('message', (data, isBinary) => {
      const receivedAt = performance.now();
      lifetime.active();
      const size = (data as Buffer).length;
      const refused = gate.admit(size);
      if (refused) {
        metrics.server.rejected.inc({ reason: 'frame_flood' });
        return sendError(refused);
      }
      chain = chain.then(async () => {
        await gate.next(size);
        const session = connections.get(ws);
        if (!session || cutOff) return;
        if (isBinary) {
          return sendError(
            new ProtocolError(
              'invalid_frame',
              'Binary frames are not taken; send each event as a JSON text frame.',
            ),
          );
        }
        const frame = (data as Buffer).toString('utf8');
        if (detecting) {
          const detected = detectDialect(frame);
          if (detected !== undefined) {
            detecting = false;
            if (detected === 'unmute') {
              speakUnmute(session);
              sessionLog.info({ dialect }, 'dialect detected');
            }
          }
        }
        const parsed = parseClientEvent(frame, dialect);
        if (!parsed.ok) return sendError(parsed.error);
        const refusedImage = refuseImageUrls(parsed.event, config.sessions.imageUrlHosts);
        if (refusedImage) return sendError(refusedImage);
        if (parsed.event.type === 'session.update') encoder.observe(parsed.event.session);
        if (!accepting && parsed.event.type === 'response.create') {
          // Draining: running responses finish, new ones would outlive the grace period.
          // What the client sent so far is in the store before it hears so: it
          // reconnects with ?resume= at once and asks again, its items all there.
          await resumeLink.tracker?.flush();
          return sendError(
            new ProtocolError(
              'server_shutting_down',
              'response.create: the server is shutting down and starts no new responses; reconnect shortly.',
              { type: 'server_error', eventId: parsed.event.event_id ?? null },
            ),
          );
        }
        return session.handle(parsed.event, receivedAt);
      });
      // A throw must not reject the chain: later frames would be dropped
      // unheard, and the unhandled rejection would stop the process.
      chain = chain.catch((err: unknown) => {
        sessionLog.error({ err }, 'frame handling failed');
        sendError(
          new ProtocolError('internal_error', 'The server failed to handle this frame.', {
            type: 'server_error',
          }),
        );
      });
    });
    const auth = limits.authToken === undefined ? undefined : presentedToken(req, url);
    const common = sessionOptions(send, sessionLog, () => resumeLink.tracker?.changed());
    let opening: { session: Session; resumeError?: ProtocolError };
    try {
      opening = await opener.open(url, auth, common, { id, character, variant }, (resumed) => {
        id = resumed.id;
        sessionLog = resumed.log;
        socketLog = sessionLog;
      });
    } catch (err) {
      // The prompt generator failed or timed out: the character cannot serve now.
      sessionLog.error({ err }, 'session open failed');
      const error = new ProtocolError(
        'character_unavailable',
        `Character "${character.id}" could not start a session: ${(err as Error).message}`,
        { type: 'server_error' },
      );
      reject(ws, CLOSE.INTERNAL, 'character_unavailable', 'character_unavailable', error);
      return opened();
    }
    const { session, resumeError } = opening;
    if (ws.readyState !== ws.OPEN) {
      session.close();
      return opened();
    }
    connections.set(ws, session);
    resumeLink.tracker = opener.track(ws, session, id, auth, sessionLog);
    if (dialect === 'unmute') speakUnmute(session);
    sessionLog.info(
      {
        character: session.character.id,
        variant: variant ?? null,
        dialect: detecting ? 'auto' : dialect,
        origin: req.headers.origin ?? null,
      },
      'session opened',
    );
    ws.once('close', (code) => sessionLog.info({ code }, 'session closed'));
    session.start();
    // After session.created: the client learns of the fresh session first.
    if (resumeError) sendError(resumeError);
    // The token is good from the first event on.
    void resumeLink.tracker?.flush();
    opened();
  }

  function refuseOverloaded(ws: WebSocket, verdict: OverloadVerdict): void {
    const refusal = overloadRefusal(verdict);
    log.warn({ reason: verdict.reason, value: verdict.value }, 'session refused: overloaded');
    reject(ws, CLOSE.TRY_AGAIN, refusal.reason, 'overloaded', refusal.error, refusal.extra);
  }

  /** What every session of this endpoint is made with. */
  function sessionOptions(
    send: (event: ServerEvent) => void,
    sessionLog: Logger,
    onChange: () => void,
  ): RestoreInput {
    return {
      characters: {
        get: (cid: string) => ctx.registry.get(cid),
        ids: () => ctx.registry.list().map((c) => c.id),
      },
      llm: ctx.llm.get,
      settings: config.sessions,
      send,
      log: sessionLog,
      logContent: config.log.content,
      metrics: metrics.sessions,
      onChange,
      ...(ctx.voice ? { voice: ctx.voice } : {}),
    };
  }

  function checkAccess(
    req: IncomingMessage,
    url: URL,
  ): { reason: string; label: string } | undefined {
    const origin = req.headers.origin;
    const hosts = { allowed: limits.allowedHosts, listening: limits.host };
    if (
      origin !== undefined &&
      !originAllowed(origin, req.headers.host, limits.allowedOrigins, hosts)
    ) {
      return { reason: `origin ${origin} not allowed`, label: 'origin' };
    }
    const token = limits.authToken;
    if (token === undefined) return undefined;
    const given = presentedToken(req, url);
    if (given === undefined) return { reason: 'authentication required', label: 'auth' };
    if (!sameSecret(given, token)) return { reason: 'invalid token', label: 'auth' };
    return undefined;
  }

  function pickSession(
    url: URL,
  ): ProtocolError | { character: LoadedCharacter; variant?: string; dialect?: Dialect } {
    const dialectParam = url.searchParams.get('dialect');
    if (dialectParam !== null && !(DIALECTS as readonly string[]).includes(dialectParam)) {
      return new ProtocolError(
        'invalid_dialect',
        `?dialect=${dialectParam} is not offered; use one of ${DIALECTS.join(', ')}.`,
        { param: 'dialect' },
      );
    }
    const ids = ctx.registry.list().map((c) => c.id);
    // OpenAI clients always send ?model=: a character's id there picks it; any other model is ignored.
    const model = url.searchParams.get('model');
    const byModel = model !== null && ctx.registry.get(model) !== undefined ? model : undefined;
    const wanted =
      url.searchParams.get('character') ?? byModel ?? config.sessions.defaultCharacter ?? ids[0];
    if (wanted === undefined) {
      return new ProtocolError(
        'no_characters',
        `No characters are loaded from ${ctx.registry.dir}; run \`troupe check ${ctx.registry.dir}\` to see why.`,
        { type: 'server_error', closeCode: CLOSE.INTERNAL },
      );
    }
    const character = ctx.registry.get(wanted);
    if (character === undefined) {
      return new ProtocolError(
        'unknown_character',
        `No character "${wanted}"; available: ${ids.join(', ')}.`,
        { param: 'character' },
      );
    }
    const variantParam = url.searchParams.get('variant');
    if (variantParam !== null && !character.variants.includes(variantParam)) {
      return new ProtocolError(
        'unknown_variant',
        `Character "${character.id}" has no tool variant "${variantParam}"; variants: ${character.variants.join(', ')}.`,
        { param: 'variant' },
      );
    }
    let variant = variantParam ?? undefined;
    if (variant === undefined && config.sessions.variantAssignment === 'random') {
      variant = character.variants[Math.floor(Math.random() * character.variants.length)];
    }
    return {
      character,
      ...(variant ? { variant } : {}),
      ...(dialectParam !== null ? { dialect: dialectParam as Dialect } : {}),
    };
  }

  return {
    upgrade,
    get active() {
      return connections.size;
    },
    stopAccepting() {
      accepting = false;
      clearInterval(pings);
    },
    async drain(deadline) {
      const busy = () => [...connections.values()].filter((s) => s?.busy) as Session[];
      while (busy().length > 0) {
        const left = deadline - Date.now();
        if (left <= 0) return false;
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all(busy().map((s) => s.idle())),
          new Promise((r) => (timer = setTimeout(r, left))),
        ]);
        clearTimeout(timer);
      }
      return true;
    },
    async cancelAll() {
      const running = [...connections.values()].filter((s) => s?.busy) as Session[];
      for (const session of running) session.close();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(running.map((s) => s.idle())),
        new Promise((r) => (timer = setTimeout(r, CANCEL_WAIT_MS))),
      ]);
      clearTimeout(timer);
    },
    closeAll(code, reason) {
      for (const [ws, session] of connections) {
        session?.close();
        // The close follows the last write: a client that reconnects at once resumes all it said.
        void opener.closing(ws).finally(() => closeSocket(ws, code, reason));
      }
    },
    async resumeFlushed() {
      await opener.flushed();
    },
  };
}

/** Answers an upgrade request with an HTTP error, then hangs up. */
function refuseUpgrade(socket: Duplex, status: string, text: string): void {
  // Hang up once written: the socket is half-open (HTTP servers allow it), and
  // a client that never ends its side would hold it, and stall shutdown, forever.
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n${text}\n`,
  );
}

function closeSocket(
  ws: WebSocket,
  code: number,
  reason: string,
  timeoutMs = CLOSE_TIMEOUT_MS,
): void {
  ws.close(code, fitCloseReason(reason));
  // A peer that never answers the close would keep the socket (and its buffers).
  setTimeout(() => ws.terminate(), timeoutMs).unref();
}

/**
 * A close reason may hold 123 bytes of UTF-8 (ws throws past that); reasons
 * quote what the client sent, such as its Origin, so cut by bytes, between
 * characters.
 */
function fitCloseReason(reason: string): string {
  if (Buffer.byteLength(reason) <= MAX_CLOSE_REASON_BYTES) return reason;
  let out = '';
  for (const ch of reason) {
    if (Buffer.byteLength(out + ch) > MAX_CLOSE_REASON_BYTES) break;
    out += ch;
  }
  return out;
}

/** Bearer header, `openai-insecure-api-key.<token>` subprotocol, or `?token=`. */
function presentedToken(req: IncomingMessage, url: URL): string | undefined {
  // The scheme is case-insensitive (RFC 9110 §11.1).
  const bearer = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (bearer) return bearer[1];
  const protocols = req.headers['sec-websocket-protocol'];
  if (protocols) {
    for (const p of protocols.split(',').map((s) => s.trim())) {
      if (p.startsWith(KEY_PROTOCOL_PREFIX)) return p.slice(KEY_PROTOCOL_PREFIX.length);
    }
  }
  return url.searchParams.get('token') ?? undefined;
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
