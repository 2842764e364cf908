/**
 * Who may open a session, and which one: the connection policy of the
 * realtime endpoint (origin, auth token) and what the URL and headers ask
 * for (character, variant, dialect, metadata).
 */
import type { IncomingMessage } from 'node:http';
import type { CharacterRegistry } from '../characters/registry.js';
import type { LoadedCharacter } from '../characters/types.js';
import type { Config } from '../config/index.js';
import { ProtocolError } from '../errors.js';
import { DIALECTS, type Dialect } from '../protocol/index.js';
import { COMPAT_MODES, type CompatMode } from '../protocol/openai-only.js';
import { metadataParam } from '../protocol/session-metadata.js';
import { originAllowed } from './http-routes.js';
import {
  bearerToken,
  checkClientSecret,
  CLIENT_SECRET_PREFIX,
  sameSecret,
  secretKey,
} from './client-secrets.js';
import { CLOSE } from './socket-close.js';

/**
 * The realtime endpoint in OpenAI's compatibility mode, for clients that take
 * OpenAI's events and defaults only (Pipecat, LiveKit Agents): its
 * connections get `?compat=openai` unless they say otherwise.
 */
export const OPENAI_ONLY_PATH = '/openai/v1/realtime';

/** The subprotocol browsers use to carry the token (`openai-insecure-api-key.<token>`). */
export const KEY_PROTOCOL_PREFIX = 'openai-insecure-api-key.';

/** What a connection asked for. */
export interface PickedSession {
  character: LoadedCharacter;
  variant?: string;
  dialect?: Dialect;
  /** Troupe's events and defaults, or OpenAI's (`?compat=`, the path, or `REALTIME_COMPAT`). */
  compat: CompatMode;
  /** `?metadata=`: what the character's prompt generator gets as `ctx.metadata`. */
  metadata?: Record<string, unknown>;
}

/** Why a connection is refused: the close reason, the metric label and the `error` sent before the close. */
export interface Denial {
  reason: string;
  label: string;
  error: ProtocolError;
}

/** A connection the checks let in; `secretModel`: the `session.model` of the client secret it carries. */
export interface Admitted {
  admitted: true;
  secretModel?: string;
}

const ADMITTED: Admitted = { admitted: true };

/** Where a connection may carry the token, as the refusals name them. */
const TOKEN_CARRIERS =
  '`Authorization: Bearer <key>`, the subprotocol `openai-insecure-api-key.<key>` (browsers) or `?token=<key>`';

/** The origin and auth checks: why the connection is refused, or that it may proceed. */
export function checkAccess(
  limits: Config['server'],
  req: IncomingMessage,
  url: URL,
): Denial | Admitted {
  const origin = req.headers.origin;
  const hosts = { allowed: limits.allowedHosts, listening: limits.host };
  if (
    origin !== undefined &&
    !originAllowed(origin, req.headers.host, limits.allowedOrigins, hosts)
  ) {
    // `null`: a file:// page or a sandboxed frame, which no list can tell apart.
    const fix =
      origin === 'null'
        ? 'serve the page over http(s) and add its origin to ALLOWED_ORIGINS'
        : sameHost(origin, req.headers.host)
          ? `this server does not answer to the host ${req.headers.host!.slice(0, 200)}: add it to ALLOWED_HOSTS`
          : 'add the origin to ALLOWED_ORIGINS (or serve the page from this server)';
    return {
      reason: `origin ${origin} not allowed`,
      label: 'origin',
      error: new ProtocolError(
        'origin_not_allowed',
        `Pages of origin ${origin.slice(0, 200)} may not open sessions on this server; ${fix}.`,
      ),
    };
  }
  const token = limits.authToken;
  if (token === undefined) return ADMITTED;
  const given = presentedTokens(req, url);
  if (given.length === 0) {
    return {
      reason: 'authentication required',
      label: 'auth',
      error: new ProtocolError(
        'missing_api_key',
        `This server needs a key: a client secret minted with its token (POST /v1/realtime/client_secrets, from your backend; a page should not hold the token), or the token (AUTH_TOKEN) itself; send it as ${TOKEN_CARRIERS}.`,
      ),
    };
  }
  if (given.some((t) => sameSecret(t.token, token))) return ADMITTED;
  const secret = given.find((t) => t.token.startsWith(CLIENT_SECRET_PREFIX));
  if (secret !== undefined) {
    const check = checkClientSecret(secretKey(token), secret.token);
    if (check.ok)
      return check.model === undefined ? ADMITTED : { ...ADMITTED, secretModel: check.model };
    if (check.why === 'expired') {
      const at = new Date(check.expiredAt * 1000).toISOString();
      return {
        reason: 'client secret expired',
        label: 'auth',
        error: new ProtocolError(
          'invalid_api_key',
          `The client secret given (${secret.via}) expired at ${at}; mint another (POST /v1/realtime/client_secrets).`,
        ),
      };
    }
  }
  const where = given.map((t) => t.via).join(' and ');
  return {
    reason: 'invalid token',
    label: 'auth',
    error: new ProtocolError(
      'invalid_api_key',
      `The token given (${where}) is neither this server's token (AUTH_TOKEN) nor a client secret it minted.`,
    ),
  };
}

/**
 * The character, variant, dialect and metadata a connection asks for, or why
 * it cannot have them. The character: `?character=`, else the client
 * secret's `session.model` or `?model=` when a character's id, else the default.
 */
export function pickSession(
  registry: CharacterRegistry,
  sessions: Config['sessions'],
  url: URL,
  secretModel?: string,
): ProtocolError | PickedSession {
  const dialectParam = offeredParam(url, 'dialect', DIALECTS);
  if (dialectParam instanceof ProtocolError) return dialectParam;
  // ?compat=, else the path's, else the server's default.
  const compatParam = offeredParam(url, 'compat', COMPAT_MODES);
  if (compatParam instanceof ProtocolError) return compatParam;
  const byPath = url.pathname === OPENAI_ONLY_PATH ? 'openai' : sessions.compat;
  const compat = compatParam ?? byPath;
  const ids = registry.list().map((c) => c.id);
  // OpenAI clients always send ?model=, and a client secret may name a model: a character's
  // id picks it (the secret's first); any other model is ignored.
  const model = [secretModel, url.searchParams.get('model')].find(
    (m) => m != null && registry.get(m) !== undefined,
  );
  const wanted = url.searchParams.get('character') ?? model ?? sessions.defaultCharacter ?? ids[0];
  if (wanted === undefined) {
    return new ProtocolError(
      'no_characters',
      `No characters are loaded from ${registry.dir}; run \`troupe check ${registry.dir}\` to see why.`,
      { type: 'server_error', closeCode: CLOSE.INTERNAL },
    );
  }
  const character = registry.get(wanted);
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
  const metadata = metadataParam(url);
  if (metadata instanceof ProtocolError) return metadata;
  let variant = variantParam ?? undefined;
  if (variant === undefined && sessions.variantAssignment === 'random') {
    variant = character.variants[Math.floor(Math.random() * character.variants.length)];
  }
  return {
    character,
    compat,
    ...(variant ? { variant } : {}),
    ...(dialectParam !== null ? { dialect: dialectParam } : {}),
    ...(metadata ? { metadata } : {}),
  };
}

/**
 * A query parameter that takes one of `values`: the one given, null when
 * absent, or an `invalid_<name>` error naming those offered.
 */
function offeredParam<T extends string>(
  url: URL,
  name: string,
  values: readonly T[],
): T | null | ProtocolError {
  const given = url.searchParams.get(name);
  if (given === null || (values as readonly string[]).includes(given)) return given as T | null;
  return new ProtocolError(
    `invalid_${name}`,
    `?${name}=${given.slice(0, 40)} is not offered; use one of ${values.join(', ')}.`,
    { param: name },
  );
}

/**
 * The dialect a connection speaks from the start, if its path or headers
 * say: Unmute's production frontend dials /api/v1/realtime (its dialect from
 * the start, so it gets no session.created it does not know); beta-protocol
 * clients send OpenAI's `OpenAI-Beta: realtime=v1` header. Undefined: the
 * client's first session.update (or an Unmute-only event) tells.
 */
export function impliedDialect(req: IncomingMessage, url: URL): Dialect | undefined {
  if (url.pathname !== '/v1/realtime' && url.pathname !== OPENAI_ONLY_PATH) return 'unmute';
  return /\brealtime=v1\b/.test(String(req.headers['openai-beta'] ?? ''))
    ? 'openai-beta'
    : undefined;
}

/**
 * Every token a connection carries: the Bearer header, the
 * `openai-insecure-api-key.<token>` subprotocol and `?token=`. Any one that
 * is the server's admits it: the SDKs send the subprotocol with whatever key
 * they were given, beside a `?token=` in the URL.
 */
export function presentedTokens(
  req: IncomingMessage,
  url: URL,
): Array<{ token: string; via: string }> {
  const found: Array<{ token: string; via: string }> = [];
  const bearer = bearerToken(req);
  if (bearer !== undefined) found.push({ token: bearer, via: 'the Authorization header' });
  const protocols = req.headers['sec-websocket-protocol'];
  for (const p of protocols ? protocols.split(',').map((s) => s.trim()) : []) {
    if (p.startsWith(KEY_PROTOCOL_PREFIX)) {
      found.push({ token: p.slice(KEY_PROTOCOL_PREFIX.length), via: 'the subprotocol' });
      break;
    }
  }
  const query = url.searchParams.get('token');
  if (query !== null) found.push({ token: query, via: '?token=' });
  return found;
}

/** Whether a page of `origin` was served by the host the request names (a same-origin page). */
function sameHost(origin: string, host: string | undefined): boolean {
  try {
    return host !== undefined && new URL(origin).host === host;
  } catch {
    return false;
  }
}
