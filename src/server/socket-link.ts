/**
 * One accepted socket and its session: events out (encoded for the
 * client's dialect, with a client that stops reading cut off before it can
 * hold the server's memory), frames in (in order, bounded, parsed with the
 * protocol's schemas), and the idle and lifetime clocks.
 */
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { Config } from '../config/index.js';
import { ProtocolError } from '../errors.js';
import type { Metrics } from '../metrics/index.js';
import {
  createEncoder,
  detectDialect,
  IGNORED_EVENT_CODE,
  parseClientEvent,
  type Dialect,
} from '../protocol/index.js';
import { openAiOnly, type CompatMode } from '../protocol/openai-only.js';
import type { ClientEvent, ServerEvent } from '../session/events.js';
import type { Session } from '../session/session.js';
import { createDeltaWindow } from './delta-window.js';
import { createFrameWriter } from './frame-writer.js';
import { refuseImageUrls } from './image-policy.js';
import type { ResumeTracker } from './resume.js';
import { withConnection } from './session-open.js';
import { CLOSE, closeSocket } from './socket-close.js';
import {
  FrameGate,
  idleWaits,
  peekEventId,
  answerPings,
  MAX_INVALID_EVENTS_PER_S,
  pingFloodError,
  RateMeter,
  watchLifetime,
  withShortInstructions,
} from './socket-guards.js';

/** How long a slow consumer gets to read its way to the 1013 close frame before it is cut. */
const SLOW_CLOSE_TIMEOUT_MS = 10_000;

/** Options of {@link createSocketLink}. */
export interface SocketLinkOptions {
  ws: WebSocket;
  /** The connection's underlying socket (the upgrade request's): a tick's frames leave in one write. */
  socket?: Duplex;
  limits: Config['server'];
  /** Hosts image URLs may come from (`config.sessions.imageUrlHosts`). */
  imageUrlHosts: Config['sessions']['imageUrlHosts'];
  metrics: Metrics;
  /** Every open socket and its session (once it has one). */
  connections: Map<WebSocket, Session | undefined>;
  /** The session's logger. */
  log: Logger;
  dialect: Dialect;
  /** The dialect is not known yet: the client's first events tell. */
  detecting: boolean;
  /** Troupe's events, or OpenAI's only (see openai-only.ts). @defaultValue 'troupe' */
  compat?: CompatMode;
}

/** A socket's side of its session. */
export interface SocketLink {
  /** Sends a server event (the session's `send`). */
  send(event: ServerEvent): void;
  sendError(err: ProtocolError): void;
  /**
   * Sends the error of an event refused as invalid; past
   * {@link MAX_INVALID_EVENTS_PER_S} at once, or that many a second kept up,
   * the socket is closed (1008).
   */
  refuse(err: ProtocolError): void;
  /** The session's link to the resume store, once it has one. */
  readonly resumeLink: { tracker?: ResumeTracker };
  readonly dialect: Dialect;
  /** Whether the dialect is still to be told by the client's events. */
  readonly detecting: boolean;
  /** The session's logger (replaced when a resumed session keeps its old id). */
  log: Logger;
  /** Whether the socket was cut off (slow consumer, idle, lifetime, invalid events): frames are no longer handled. */
  readonly cutOff: boolean;
  /** Unmute's frontend: its encoder, and Ogg/Opus spoken replies, before any event is handled. */
  speakUnmute(session: Session): void;
  /** A text frame as a client event (the dialect detected on the way), or the error to send. */
  decode(frame: string, session: Session): ClientEvent | ProtocolError;
}

/**
 * Creates the link: the send path, the error path, and the clocks.
 *
 * @example const link = createSocketLink({ ws, limits, imageUrlHosts, metrics, connections, log, dialect: 'openai', detecting: true });
 */
export function createSocketLink(o: SocketLinkOptions): SocketLink {
  const { ws, limits, metrics, connections } = o;
  let dialect = o.dialect;
  let detecting = o.detecting;
  let sessionLog = o.log;
  let encoder = createEncoder(dialect);
  const speakUnmute = (session: Session): void => {
    dialect = 'unmute';
    encoder = createEncoder('unmute', { character: session.character.id });
    session.configureVoice({ format: 'ogg_opus', outputModalities: ['audio'] });
  };
  let cutOff = false;
  const resumeLink: { tracker?: ResumeTracker } = {};
  const frames = createFrameWriter(ws, o.socket);
  const only = o.compat === 'openai' ? openAiOnly() : undefined;
  // The lifetime's clock starts with the link: `expires_at` says when it ends.
  const maxS = limits.sessionMaxDurationS;
  const expiresAt = maxS > 0 ? Math.floor(Date.now() / 1000) + maxS : 0;
  const deliver = (sessionEvent: ServerEvent): void => {
    if (cutOff || ws.readyState !== ws.OPEN) return;
    let event = only ? only(sessionEvent) : sessionEvent;
    if (event === null) return;
    if (event.type === 'session.created' || event.type === 'session.updated') {
      event = withConnection(event, { expiresAt, token: resumeLink.tracker?.token });
    }
    // LLM failures are counted with the turns (status failed), not as protocol errors.
    if (event.type === 'error' && event.error.type !== 'llm_error') {
      metrics.server.protocolErrors.inc({ code: event.error.code });
    }
    const frame = encoder.encode(withShortInstructions(event));
    if (frame === null) return;
    frames.write(frame);
    cutIfUnread();
  };
  /** Past `MAX_BUFFERED_BYTES` unsent (events or pongs), the client is cut off. */
  const cutIfUnread = (): void => {
    if (ws.bufferedAmount - frames.held <= limits.maxBufferedBytes) return;
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
  };
  // Text deltas may wait a little to leave together (DELTA_BATCH_MS).
  const deltas = createDeltaWindow(limits.deltaBatchMs, deliver);
  const send = deltas.send;
  const sendError = (err: ProtocolError): void => send({ type: 'error', error: err.payload });
  const lifetime = watchLifetime(
    ws,
    limits,
    idleWaits(() => connections.get(ws)?.working === true, sessionLog),
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
  /** Closes a flooding socket (1008) with `err`, its code as the reason; its session stops. */
  const closeFlood = (err: ProtocolError, metric: 'invalid_events' | 'ping_flood'): void => {
    sessionLog.warn({ code: err.wireCode }, 'flood closed');
    metrics.server.rejected.inc({ reason: metric });
    sendError(err);
    cutOff = true;
    connections.get(ws)?.close();
    closeSocket(ws, CLOSE.POLICY, err.wireCode);
    // Read no more: a flooder keeps sending until it reads the close, and
    // every frame would still be parsed. Its socket is cut within a second.
    ws.pause();
  };
  const invalid = new RateMeter(MAX_INVALID_EVENTS_PER_S);
  const refuse = (err: ProtocolError): void => {
    sendError(err);
    // Unmute's frontend sends bridge.* events as a matter of course: ignored, not invalid.
    if (cutOff || err.wireCode === IGNORED_EVENT_CODE || !invalid.over()) return;
    closeFlood(
      new ProtocolError(
        'too_many_invalid_events',
        `More than ${MAX_INVALID_EVENTS_PER_S} events were refused as invalid at once (or over ${MAX_INVALID_EVENTS_PER_S} a second), so the session was closed; fix the events the earlier errors name, then reconnect.`,
      ),
      'invalid_events',
    );
  };
  answerPings(ws, {
    skip: () => cutOff,
    // A client that pings and never reads holds its pongs in our memory.
    answered: cutIfUnread,
    flood: () => closeFlood(pingFloodError(), 'ping_flood'),
  });
  ws.on('close', () => {
    lifetime.stop();
    deltas.close();
  });
  ws.on('message', () => lifetime.active());

  return {
    send,
    sendError,
    refuse,
    resumeLink,
    speakUnmute,
    get dialect() {
      return dialect;
    },
    get detecting() {
      return detecting;
    },
    get log() {
      return sessionLog;
    },
    set log(next) {
      sessionLog = next;
    },
    get cutOff() {
      return cutOff;
    },
    decode(frame, session) {
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
      if (!parsed.ok) return parsed.error;
      const refusedImage = refuseImageUrls(parsed.event, o.imageUrlHosts);
      if (refusedImage) return refusedImage;
      if (parsed.event.type === 'session.update') encoder.observe(parsed.event.session);
      return parsed.event;
    },
  };
}

/** Options of {@link listenFrames}. */
export interface FrameLoopOptions {
  ws: WebSocket;
  link: SocketLink;
  limits: Config['server'];
  metrics: Metrics;
  connections: Map<WebSocket, Session | undefined>;
  /** False while the server drains: new responses are refused. */
  accepting: () => boolean;
  /** Sockets whose session the server has stopped (shutdown): their frames are refused, not dropped. */
  closing: { has(ws: WebSocket): boolean };
}

/**
 * Handles the socket's frames one at a time, in order; frames that arrive
 * while the session opens wait. Returns the function that lets them through.
 *
 * @example const opened = listenFrames({ ws, link, limits, metrics, connections, accepting });
 */
export function listenFrames(o: FrameLoopOptions): () => void {
  const { ws, link, metrics, connections } = o;
  let opened!: () => void;
  let chain: Promise<unknown> = new Promise<void>((resolve) => (opened = resolve));
  const gate = new FrameGate(o.limits.maxPendingFrames);
  ws.on('message', (data, isBinary) => {
    // Cut off: what is still in flight is dropped unanswered, at no cost.
    if (link.cutOff) return;
    const receivedAt = performance.now();
    const size = (data as Buffer).length;
    const refused = gate.admit(size, () => (isBinary ? null : peekEventId(data as Buffer)));
    if (refused) {
      metrics.server.rejected.inc({ reason: 'frame_flood' });
      return link.sendError(refused);
    }
    chain = chain.then(async () => {
      await gate.next(size);
      const session = connections.get(ws);
      if (!session || link.cutOff) return;
      if (isBinary) {
        return link.refuse(
          new ProtocolError(
            'invalid_frame',
            'Binary frames are not taken; send each event as a JSON text frame.',
          ),
        );
      }
      const event = link.decode((data as Buffer).toString('utf8'), session);
      if (event instanceof ProtocolError) return link.refuse(event);
      if (o.closing.has(ws)) {
        // The session has stopped and the socket closes once its state is
        // written: said so, not dropped, so the client sends it again after resuming.
        return link.sendError(
          new ProtocolError(
            'server_shutting_down',
            `${event.type}: the server is shutting down and this session has stopped; reconnect with ?resume= and send it again.`,
            { type: 'server_error', eventId: event.event_id ?? null },
          ),
        );
      }
      if (!o.accepting() && event.type === 'response.create') {
        // Draining: running responses finish, new ones would outlive the grace period.
        // What the client sent so far is in the store before it hears so: it
        // reconnects with ?resume= at once and asks again, its items all there.
        await link.resumeLink.tracker?.flush();
        return link.sendError(
          new ProtocolError(
            'server_shutting_down',
            'response.create: the server is shutting down and starts no new responses; reconnect shortly.',
            { type: 'server_error', eventId: event.event_id ?? null },
          ),
        );
      }
      return session.handle(event, receivedAt);
    });
    // A throw must not reject the chain: later frames would be dropped
    // unheard, and the unhandled rejection would stop the process.
    chain = chain.catch((err: unknown) => {
      link.log.error({ err }, 'frame handling failed');
      link.sendError(
        new ProtocolError('internal_error', 'The server failed to handle this frame.', {
          type: 'server_error',
        }),
      );
    });
  });
  return opened;
}
