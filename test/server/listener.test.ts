/**
 * The connections closed before a whole request: which of Node's client
 * errors count as the server's refusals, and the one log line a window that
 * sums them up.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CLIENT_ERROR_LOG_MS,
  clientErrorReason,
  LISTEN_BACKLOG,
  tallyClientErrors,
  type ClientErrorReason,
} from '../../src/server/listener.js';
import { listenQueue } from '../helpers/http.js';
import { startTestServer } from '../helpers/server.js';

describe('the listening socket', () => {
  it("keeps a burst of connections waiting in a queue deeper than Node's 511", async () => {
    const t = await startTestServer();
    try {
      const { backlog, cap } = listenQueue(Number(new URL(t.url).port));
      expect(backlog).toBe(Math.min(LISTEN_BACKLOG, cap));
      if (cap > 511) expect(backlog).toBeGreaterThan(511);
    } finally {
      await t.close();
    }
  });
});

describe('clientErrorReason', () => {
  it('names the deadline, the headers past the limit, and any other bad request', () => {
    expect(clientErrorReason('ERR_HTTP_REQUEST_TIMEOUT')).toBe('handshake_timeout');
    expect(clientErrorReason('ERR_TLS_HANDSHAKE_TIMEOUT')).toBe('handshake_timeout');
    expect(clientErrorReason('HPE_HEADER_OVERFLOW')).toBe('headers_too_large');
    expect(clientErrorReason('HPE_INVALID_METHOD')).toBe('bad_request');
    expect(clientErrorReason('ERR_SSL_HTTP_REQUEST')).toBe('bad_request');
    expect(clientErrorReason(undefined)).toBe('bad_request');
  });

  it('does not count a client that hung up itself', () => {
    for (const code of ['ECONNRESET', 'EPIPE', 'ETIMEDOUT']) {
      expect(clientErrorReason(code)).toBeUndefined();
    }
  });
});

describe('tallyClientErrors', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('counts every one at once and logs one line a window with the sums, a warning for a flood', () => {
    vi.useFakeTimers();
    const lines: Array<Record<string, unknown>> = [];
    const log = pino(
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
          done();
        },
      }),
    );
    const counted: ClientErrorReason[] = [];
    const tally = tallyClientErrors(log, (reason) => counted.push(reason));
    for (let i = 0; i < 1000; i++) tally('handshake_timeout');
    tally('bad_request');
    expect(counted).toHaveLength(1001);
    expect(lines).toEqual([]);
    vi.advanceTimersByTime(CLIENT_ERROR_LOG_MS);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      msg: 'connections closed before sending a whole request',
      closed: { handshake_timeout: 1000, bad_request: 1 },
      windowS: CLIENT_ERROR_LOG_MS / 1000,
    });
    // Nothing more until another comes; then a new window.
    vi.advanceTimersByTime(5 * CLIENT_ERROR_LOG_MS);
    expect(lines).toHaveLength(1);
    tally('headers_too_large');
    vi.advanceTimersByTime(CLIENT_ERROR_LOG_MS);
    // A few are everyday (a browser's spare connection): not a warning.
    expect(lines[1]).toMatchObject({ level: 30, closed: { headers_too_large: 1 } });
  });
});
