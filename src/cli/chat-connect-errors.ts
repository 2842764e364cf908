/**
 * The one line the chat client prints when its connection ends or never
 * starts: why the socket closed (close code and reason in plain words), why
 * it could not connect, or why the server refused the upgrade.
 */
import { isRecord, record, shorten, str } from './chat-text.js';

/** Plain words for the WebSocket close codes a Troupe server uses. */
const CLOSE_MEANINGS: Readonly<Record<number, string>> = {
  1000: 'closed normally',
  1001: 'the server is shutting down or restarting; try again in a moment',
  1005: 'closed without a status code',
  1006: 'the connection dropped without a close frame (network problem or server crash)',
  1008:
    'the server refused the session by policy: a missing or wrong token (pass --token), ' +
    'an origin it does not allow, or a request it cannot serve (see the error above)',
  1009: 'a message was larger than the server accepts',
  1011: 'the server hit an internal error; its log says more',
  1013:
    'the server is busy: it has as many sessions as it allows, or this client fell behind; ' +
    'try again later',
};

/**
 * One line saying why the socket closed, code and reason included.
 *
 * @example describeClose(1013, 'too many sessions') // 'connection closed (1013 too many sessions): the server is busy: …'
 */
export function describeClose(code: number, reason: string): string {
  const said = reason.trim() === '' ? `${code}` : `${code} ${reason.trim()}`;
  const meaning = code === 1008 ? policyMeaning(reason) : CLOSE_MEANINGS[code];
  return meaning === undefined
    ? `connection closed (${said})`
    : `connection closed (${said}): ${meaning}`;
}

/** 1008 covers auth, origins and bad requests alike: the reason tells which, so say that one. */
function policyMeaning(reason: string): string {
  if (/auth|token/i.test(reason)) {
    return 'the server refused the session: authentication failed; pass the right --token';
  }
  if (/origin/i.test(reason)) return 'the server refused the session: this origin is not allowed';
  if (/character/i.test(reason)) {
    return 'the server refused the session: check --character (the error above lists the ids)';
  }
  return CLOSE_MEANINGS[1008]!;
}

/** Hints for the errors a failed connect usually comes down to. */
const CONNECT_HINTS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'is the server running? Start it with npm start',
  ENOTFOUND: 'the host name does not resolve; check --url',
  EAI_AGAIN: 'the host name does not resolve; check --url',
  ETIMEDOUT: 'the server did not answer; check --url and the network',
  ECONNRESET: 'the server dropped the connection; is it a Troupe server?',
};

/**
 * The one line printed when the socket never opened.
 *
 * @example describeConnectError('ws://127.0.0.1:1/v1/realtime', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }))
 */
export function describeConnectError(url: string, err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const code = isRecord(err) ? str(err.code) : undefined;
  const hint = code === undefined ? undefined : CONNECT_HINTS[code];
  return `could not connect to ${url}: ${message || code || 'unknown error'}${hint ? ` (${hint})` : ''}`;
}

/** The message in an HTTP error body: `error.message` or `message` of JSON, else the text. */
function bodyMessage(body: string): string {
  try {
    const json = record(JSON.parse(body));
    return str(record(json.error).message) ?? str(json.error) ?? str(json.message) ?? body;
  } catch {
    return body;
  }
}

/**
 * The one line printed when the server answered the upgrade with plain HTTP
 * (401, 404, 503…) instead of a WebSocket; `body` is the start of its answer.
 *
 * @example describeRejectedUpgrade('ws://h/v1/realtime', 401, 'Unauthorized', '')
 */
export function describeRejectedUpgrade(
  url: string,
  status: number,
  statusText: string,
  body: string,
): string {
  const hint =
    status === 401 || status === 403
      ? ' (pass the right --token)'
      : status === 404
        ? ' (check the URL path; the endpoint is usually /v1/realtime)'
        : status === 503 || status === 429
          ? ' (the server is busy; try again later)'
          : '';
  const said = shorten(bodyMessage(body), 300);
  return (
    `could not connect to ${url}: the server answered HTTP ${status} ${statusText}`.trimEnd() +
    (said === '' ? '' : `: ${said}`) +
    hint
  );
}
