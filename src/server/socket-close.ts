/**
 * How the realtime endpoint says no and says goodbye: the close codes of
 * docs/protocol.md, an HTTP refusal before the WebSocket handshake, and a
 * close that cannot hang on a peer that never answers it.
 */
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/** Close codes of docs/protocol.md. */
export const CLOSE = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  /** ws: a frame that breaks the protocol. */
  PROTOCOL: 1002,
  /** ws: a text frame that is not UTF-8. */
  NOT_UTF8: 1007,
  POLICY: 1008,
  TOO_BIG: 1009,
  INTERNAL: 1011,
  TRY_AGAIN: 1013,
  /** No client frame for `SESSION_IDLE_TIMEOUT_S`. */
  IDLE: 4000,
  /** The session lasted `SESSION_MAX_DURATION_S`. */
  EXPIRED: 4001,
  /** Another connection resumed the conversation (`?resume=` with its token). */
  RESUMED_ELSEWHERE: 4002,
} as const;

/** How long a closing socket may take to say goodbye before it is cut. */
const CLOSE_TIMEOUT_MS = 1_000;
/** A close frame's reason: 125 bytes of payload minus the 2-byte code. */
const MAX_CLOSE_REASON_BYTES = 123;

/** Answers an upgrade request with an HTTP error, then hangs up. */
export function refuseUpgrade(
  socket: Duplex,
  status: string,
  text: string,
  retryAfterS?: number,
): void {
  // Hang up once written: the socket is half-open (HTTP servers allow it), and
  // a client that never ends its side would hold it, and stall shutdown, forever.
  socket.once('finish', () => socket.destroy());
  const retry = retryAfterS === undefined ? '' : `Retry-After: ${retryAfterS}\r\n`;
  const body = `${text}\n`;
  // With its length: a proxy (nginx) that keeps its client's connection
  // open passes the answer on whole, not as a body without an end.
  socket.end(
    `HTTP/1.1 ${status}\r\nConnection: close\r\n${retry}Content-Type: text/plain\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** Closes with `code` and `reason`; a peer that has not answered within `timeoutMs` is cut. */
export function closeSocket(
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
