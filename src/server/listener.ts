/**
 * The server's socket: the HTTP(S) server with its handshake deadlines, the
 * answer to a connection that never sends a whole request (counted and
 * logged), and listening (or, in a worker, taking the primary's connections).
 */
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { ConfigError } from '../errors.js';
import type { RejectReason } from '../metrics/index.js';
import type { createHttpHandler } from './http-routes.js';
import type { ClusterView } from './index.js';
import { summedLog } from './logger.js';
import type { RealtimeEndpoint } from './realtime.js';

/**
 * How many connections the kernel keeps waiting for the server to take
 * (capped by the system's `net.core.somaxconn`). Node takes one per turn of
 * its event loop, so when a busy server gets a burst (the clients of an
 * instance that died, reconnecting at once) they wait here; past this queue
 * the kernel drops their handshakes, and they stall for seconds on TCP's
 * retries. Node's own default is 511.
 */
export const LISTEN_BACKLOG = 4096;

/**
 * Node's request timeouts for `HANDSHAKE_TIMEOUT_S`: a connection that has
 * not sent a whole request by then (nothing at all, or half its headers) gets
 * 408 and is closed. Node checks its connections every
 * `connectionsCheckingInterval` (30 s by default, which would let one live
 * 90 s past its 60 s default); a second here. An upgraded WebSocket leaves
 * these checks once its handshake is done.
 */
function handshakeTimeouts(seconds: number): {
  headersTimeout: number;
  requestTimeout: number;
  connectionsCheckingInterval: number;
} {
  const ms = seconds * 1000;
  return {
    headersTimeout: ms,
    requestTimeout: ms,
    connectionsCheckingInterval: Math.min(1000, ms / 2),
  };
}

/**
 * Creates the HTTP(S) server and listens on the configured address, or, in
 * a worker, takes the connections its primary hands it.
 */
export async function listen(
  config: Config,
  tls: { cert: string; key: string } | undefined,
  handler: ReturnType<typeof createHttpHandler>,
  upgrade: RealtimeEndpoint['upgrade'],
  cluster: ClusterView | undefined,
  onClientError: (reason: ClientErrorReason) => void,
): Promise<Server> {
  let server: Server;
  const timeouts = handshakeTimeouts(config.server.handshakeTimeoutS);
  if (tls) {
    try {
      // TLS's own handshake first (Node's default: 120 s), then the request's.
      server = createHttpsServer(
        { ...tls, ...timeouts, handshakeTimeout: timeouts.headersTimeout },
        handler,
      );
    } catch (err) {
      throw new ConfigError(
        `TLS_CERT=${config.server.tls?.certFile} and TLS_KEY=${config.server.tls?.keyFile}: not a usable PEM certificate and key (${(err as Error).message}).`,
        { cause: err },
      );
    }
  } else {
    server = createHttpServer(timeouts, handler);
  }
  server.on('upgrade', upgrade);
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Answer as Node does without this listener (400, 408, 431…), then hang up.
    if (socket.writable && (socket as { bytesWritten?: number }).bytesWritten === 0) {
      socket.write(`HTTP/1.1 ${clientErrorStatus(err.code)}\r\nConnection: close\r\n\r\n`);
    }
    socket.destroy();
    const reason = clientErrorReason(err.code);
    if (reason) onClientError(reason);
  });
  if (cluster) {
    // Node starts tracking connections (the request and header timeouts,
    // closeAllConnections) when a server starts listening; this one never
    // does itself, the primary listens for it.
    server.emit('listening');
    cluster.onConnection((socket) => {
      server.emit('connection', socket);
      socket.resume();
    });
    return server;
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(listenFailure(config.server.host, config.server.port, err)),
    );
    server.listen(
      { port: config.server.port, host: config.server.host, backlog: LISTEN_BACKLOG },
      resolve,
    );
  });
  return server;
}

/**
 * Why the server cannot listen, as a {@link ConfigError} that says what to do.
 *
 * @example throw listenFailure('0.0.0.0', 8080, err);
 */
export function listenFailure(host: string, port: number, err: NodeJS.ErrnoException): ConfigError {
  return new ConfigError(
    err.code === 'EADDRINUSE'
      ? `port ${port} on ${host} is in use; set PORT to a free one.`
      : `cannot listen on ${host}:${port}: ${err.message}`,
    { cause: err },
  );
}

/**
 * Why a connection was closed before it sent a whole request, as
 * `troupe_connections_rejected_total` counts it; none for a client that hung
 * up itself (a reset, a broken pipe).
 */
export type ClientErrorReason = Extract<
  RejectReason,
  'handshake_timeout' | 'headers_too_large' | 'bad_request'
>;

/** {@link ClientErrorReason} of Node's `clientError` code, if the server closed it. */
export function clientErrorReason(code: string | undefined): ClientErrorReason | undefined {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
    case 'ERR_TLS_HANDSHAKE_TIMEOUT':
      return 'handshake_timeout';
    case 'HPE_HEADER_OVERFLOW':
      return 'headers_too_large';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'ETIMEDOUT':
      return undefined;
    default:
      return 'bad_request';
  }
}

/** How often at most {@link tallyClientErrors} writes its line. */
export const CLIENT_ERROR_LOG_MS = 10_000;
/** From this many in one window the line is a `warn`; fewer are `info`. */
export const CLIENT_ERROR_WARN = 100;

/**
 * Counts the connections closed before a whole request, and logs them as
 * one line at most every `everyMs` (the first at the end of its window): a
 * flood of half-open connections is one line per window, not one per
 * connection. A few are everyday (a browser opens a spare connection it may
 * never use) and are `info`; {@link CLIENT_ERROR_WARN} or more, `warn`.
 */
export function tallyClientErrors(
  log: Logger,
  count: (reason: ClientErrorReason) => void,
  everyMs = CLIENT_ERROR_LOG_MS,
): (reason: ClientErrorReason) => void {
  let closed: Partial<Record<ClientErrorReason, number>> = {};
  const tell = summedLog(everyMs, false, (total) => {
    log[total >= CLIENT_ERROR_WARN ? 'warn' : 'info'](
      { closed, windowS: everyMs / 1000 },
      'connections closed before sending a whole request',
    );
    closed = {};
  });
  return (reason) => {
    count(reason);
    closed[reason] = (closed[reason] ?? 0) + 1;
    tell();
  };
}

function clientErrorStatus(code: string | undefined): string {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return '431 Request Header Fields Too Large';
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return '408 Request Timeout';
    default:
      return '400 Bad Request';
  }
}

export async function readTls(tls: { certFile: string; keyFile: string }) {
  const [cert, key] = await Promise.all([
    readPem(tls.certFile, 'TLS_CERT'),
    readPem(tls.keyFile, 'TLS_KEY'),
  ]);
  return { cert, key };
}

async function readPem(file: string, variable: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${variable}=${file}: cannot read it (${(err as Error).message}).`, {
      cause: err,
    });
  }
}
