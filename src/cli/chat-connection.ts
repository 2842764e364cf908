/**
 * The chat client's connection: opens the realtime WebSocket (turning a
 * refused upgrade or a network error into one line to print), renders every
 * server event, and keeps the bookkeeping the modes need: when the session
 * is ready, which turn waits for its reply, whether the server complained.
 */
import WebSocket from 'ws';
import { handsOff } from '../characters/handoffs.js';
import type { ChatOptions } from './chat-options.js';
import { describeConnectError, describeRejectedUpgrade } from './chat-connect-errors.js';
import type { ChatRenderer } from './chat-render.js';
import {
  announcesGreeting,
  isAssistantMessage,
  parseServerEvent,
  type Output,
  type ServerEvent,
} from './chat-text.js';
import { AUDIO_EVENT_ID_PREFIX } from './chat-voice.js';

/** How long a clean close may take before the socket is dropped; ws would wait 30 s. */
const CLOSE_GRACE_MS = 2_000;
/** Most of an HTTP error body kept for the message when the upgrade is refused. */
const MAX_REJECTION_BODY_CHARS = 2_000;

/** How a turn ended, for the piped mode's bookkeeping. */
export type TurnEnd = 'done' | 'rejected' | 'closed';

/** The socket plus what the rest of the client needs to know about it. */
export interface Connection {
  ws: WebSocket;
  renderer: ChatRenderer;
  /** Resolves when the socket is open; rejects with the one line to print when it never opens. */
  opened: Promise<void>;
  /**
   * Resolves once `session.created` (and the greeting it announces) arrived;
   * rejects if the socket closes first.
   */
  ready: Promise<void>;
  /** Sends one user line and asks for a response; resolves when the turn is over. */
  turn(text: string): Promise<TurnEnd>;
  /** Asks the server to stop the response in flight. */
  cancel(): void;
  /** Sends a client event with a fresh `event_id` (ids start with `prefix`); returns the id. */
  send(event: Record<string, unknown>, prefix?: string): string;
  /** Sends audio as `input_audio_buffer.append` (ids start with {@link AUDIO_EVENT_ID_PREFIX}). */
  sendAudio(base64: string): void;
  /**
   * Sends `session.update`; resolves true on `session.updated`, false when the
   * server refused it (the error is on screen) or the socket closed. The server
   * handles frames in order, so an empty update is also a round trip after
   * everything sent before it.
   */
  update(session: Record<string, unknown>): Promise<boolean>;
  /** Calls `listener` with every server event, after it is rendered; returns how to stop. */
  onEvent(listener: (event: ServerEvent) => void): () => void;
  /** Whether a turn is waiting for its `response.done`. */
  readonly busy: boolean;
  /** Whether the server sent an `error` or a failed response (piped mode exits 1). */
  readonly troubled: boolean;
  /** Closes with 1000 and waits for the socket to be gone. */
  quit(): Promise<void>;
  /** Resolves when the socket closes, with whether we asked for it. */
  closed: Promise<{ code: number; reason: string; byUs: boolean }>;
}

/** Writes renderer output; the interactive mode swaps it for one that keeps the prompt intact. */
export type Sink = (outputs: Output[]) => void;

/** Writes renderer output straight to stdout and stderr. */
export function writePlain(outputs: Output[]): void {
  for (const { stream, text } of outputs) {
    (stream === 'stdout' ? process.stdout : process.stderr).write(text);
  }
}

/**
 * Opens the socket and wires it to the renderer and the turn bookkeeping.
 * Every listener is attached before the socket can open: a server sends
 * `session.created` and the greeting right after the upgrade, often in the
 * same TCP read as the 101 answer, so ws emits them in the same tick as
 * 'open' — a listener added after awaiting 'open' would miss them.
 */
export function connect(
  options: ChatOptions,
  renderer: ChatRenderer,
  sink: () => Sink,
): Connection {
  const { ws, opened } = openSocket(options);
  let nextId = 0;
  let closingByUs = false;
  let troubled = false;
  /** The turn waiting for its response: the id of its `response.create`, and how to end it. */
  let pending: { createId: string; end: (how: TurnEnd) => void } | undefined;

  const closed = new Promise<{ code: number; reason: string; byUs: boolean }>((resolve) => {
    ws.once('close', (code, reason) => {
      pending?.end('closed');
      resolve({ code, reason: reason.toString('utf8'), byUs: closingByUs });
    });
  });
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    void closed.then(() => reject(new Error('the connection closed before the session started')));
  });
  /** `session.created` announced a greeting that has not arrived yet. */
  let greetingDue = false;
  // Nobody may be awaiting `ready` when the socket closes (the close is reported on its own).
  ready.catch(() => undefined);
  opened.catch(() => undefined);

  const listeners = new Set<(event: ServerEvent) => void>();
  function listen(listener: (event: ServerEvent) => void): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  function send(event: Record<string, unknown>, prefix = 'evt_chat'): string {
    const eventId = `${prefix}_${++nextId}`;
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ event_id: eventId, ...event }));
    return eventId;
  }

  function onEvent(event: ServerEvent): void {
    sink()(renderer.render(event));
    // Ready once the greeting is on screen too. The server sends it right
    // after session.created, but often in a later TCP read: a piped first line
    // echoed in between would print "you: …" above the greeting.
    if (event.type === 'session.created') {
      greetingDue = announcesGreeting(event);
      if (!greetingDue) markReady();
    } else if (greetingDue && (isAssistantMessage(event) || event.type.startsWith('response.'))) {
      greetingDue = false;
      markReady();
    }
    if (event.type === 'error') {
      troubled = true;
      // A `response.create` the server refused never gets a `response.done`: the
      // error's event_id names it, so the turn ends here instead of hanging.
      const causedBy = (event.error as { event_id?: unknown } | undefined)?.event_id;
      if (pending !== undefined && causedBy === pending.createId) pending.end('rejected');
    } else if (event.type === 'response.done') {
      const status = (event.response as { status?: unknown } | undefined)?.status;
      if (status === 'failed') troubled = true;
      // A handoff: the new character's reply to the same line follows.
      if (!handsOff(event.response)) pending?.end('done');
    }
    for (const listener of [...listeners]) listener(event);
  }

  ws.on('message', (data, isBinary) => {
    if (isBinary) return; // audio frames of other dialects; this client is text only
    const event = parseServerEvent(String(data));
    if (event === undefined) {
      sink()(renderer.note('(ignored a frame that is not a JSON event)'));
      return;
    }
    onEvent(event);
  });

  return {
    ws,
    renderer,
    opened,
    ready,
    closed,
    get busy() {
      return pending !== undefined;
    },
    get troubled() {
      return troubled;
    },
    turn(text) {
      return new Promise<TurnEnd>((resolve) => {
        if (ws.readyState !== WebSocket.OPEN) {
          resolve('closed');
          return;
        }
        send({
          type: 'conversation.item.create',
          item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
        });
        const createId = send({ type: 'response.create' });
        pending = {
          createId,
          end: (how) => {
            pending = undefined;
            resolve(how);
          },
        };
      });
    },
    cancel() {
      send({ type: 'response.cancel' });
    },
    send,
    sendAudio(base64) {
      send({ type: 'input_audio_buffer.append', audio: base64 }, AUDIO_EVENT_ID_PREFIX);
    },
    onEvent: listen,
    update(session) {
      return new Promise<boolean>((resolve) => {
        if (ws.readyState !== WebSocket.OPEN) {
          resolve(false);
          return;
        }
        const id = send({ type: 'session.update', session });
        const stop = listen((event) => {
          if (event.type === 'session.updated') finish(true);
          else if (event.type === 'error' && errorEventId(event) === id) finish(false);
        });
        const finish = (ok: boolean): void => {
          stop();
          resolve(ok);
        };
        void closed.then(() => finish(false));
      });
    },
    async quit() {
      if (ws.readyState === WebSocket.CLOSED) return;
      closingByUs = true;
      // A server that never answers the close frame must not keep the user waiting.
      const timer = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
      timer.unref();
      ws.close(1000, 'bye');
      await closed;
      clearTimeout(timer);
    },
  };
}

/**
 * Opens the socket. `opened` resolves once it is open, or rejects with the
 * one line to print: the server's refusal of the upgrade (its status and
 * body) or the network error.
 */
function openSocket(options: ChatOptions): { ws: WebSocket; opened: Promise<void> } {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const ws = new WebSocket(options.url, { headers });

  let settleOpen: (failure?: string) => void = () => undefined;
  const opened = new Promise<void>((resolve, reject) => {
    let settled = false;
    settleOpen = (failure) => {
      if (settled) return;
      settled = true;
      if (failure === undefined) resolve();
      else {
        reject(new Error(failure));
        ws.terminate();
      }
    };
  });
  // Kept for the socket's whole life: an 'error' without a listener would crash
  // the process. After the open, the 'close' that follows an error reports it.
  ws.on('error', (err) => settleOpen(describeConnectError(options.url, err)));
  ws.once('unexpected-response', (_req, res) => {
    // The server answered the upgrade with plain HTTP (401, 404, 503…): its body says why.
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (body.length < MAX_REJECTION_BODY_CHARS) body += chunk;
    });
    const done = (): void =>
      settleOpen(
        describeRejectedUpgrade(
          options.url,
          res.statusCode ?? 0,
          res.statusMessage ?? '',
          body.slice(0, MAX_REJECTION_BODY_CHARS),
        ),
      );
    res.once('end', done);
    res.once('error', done);
    res.once('close', done);
  });
  ws.once('open', () => settleOpen());
  return { ws, opened };
}

/** The `event_id` an `error` event names as its cause, if any. */
function errorEventId(event: ServerEvent): string | undefined {
  const id = (event.error as { event_id?: unknown } | undefined)?.event_id;
  return typeof id === 'string' ? id : undefined;
}
