/**
 * Client secrets: short-lived keys a backend mints for a browser, as with
 * OpenAI's `POST /v1/realtime/client_secrets`, so the page never holds the
 * server's token (`AUTH_TOKEN`). A key (`ek_…`) says when it expires and is
 * signed with a key made from `AUTH_TOKEN`: every instance and worker that
 * has the token checks it alone, with nothing stored. It opens sessions
 * until it expires, as OpenAI's do; a session it opened goes on after that.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';

/** What a client secret starts with (as OpenAI's ephemeral keys). */
export const CLIENT_SECRET_PREFIX = 'ek_';
/** How long a key lasts unless the request says (OpenAI's default: 10 minutes). */
export const CLIENT_SECRET_DEFAULT_S = 600;
/** The longest life and the shortest a request may ask for (OpenAI's bounds). */
export const CLIENT_SECRET_MAX_S = 7_200;
export const CLIENT_SECRET_MIN_S = 10;

/** A mint request's body: OpenAI's shape; Troupe keeps no session settings in a key. */
const MintRequest = z.strictObject({
  expires_after: z
    .strictObject({
      anchor: z.literal('created_at').optional(),
      seconds: z.int().min(CLIENT_SECRET_MIN_S).max(CLIENT_SECRET_MAX_S).optional(),
    })
    .optional(),
  session: z
    .strictObject({
      type: z.literal('realtime').optional(),
      /** A character's id picks it, as `?model=` does; any other model is ignored. */
      model: z.string().max(200).optional(),
    })
    .optional(),
});

/** A minted key, as OpenAI answers it. */
export interface MintedSecret {
  value: string;
  /** Unix seconds. */
  expires_at: number;
  session: { type: 'realtime'; object: 'realtime.session'; model: string | null };
}

/** What a presented key is worth. */
export type SecretCheck =
  | { ok: true; model?: string }
  | { ok: false; why: 'expired'; expiredAt: number }
  | { ok: false; why: 'invalid' };

/** The signing key, made from the server's token. */
export function secretKey(authToken: string): Buffer {
  return createHmac('sha256', authToken).update('troupe client secret v1').digest();
}

/**
 * Mints a key from a request body (already parsed JSON; undefined for an
 * empty body), or says what is wrong with the body.
 *
 * @example mintClientSecret(secretKey(token), { expires_after: { seconds: 60 } });
 */
export function mintClientSecret(
  key: Buffer,
  body: unknown,
  now = Date.now(),
): MintedSecret | { error: string; param: string | null } {
  const parsed = MintRequest.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = issue.path.join('.') || null;
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
    const where = keys.length > 0 ? keys.map((k) => (param ? `${param}.${k}` : k)) : [param];
    const why =
      issue.code === 'unrecognized_keys' && param === 'session'
        ? 'Troupe keeps no session settings in a client secret (only `type` and `model`); send them with session.update once connected'
        : issue.message;
    return { error: `${where.join(', ') || 'the body'}: ${why}.`, param: where[0] ?? null };
  }
  const seconds = parsed.data.expires_after?.seconds ?? CLIENT_SECRET_DEFAULT_S;
  const expiresAt = Math.floor(now / 1000) + seconds;
  const model = parsed.data.session?.model;
  const payload = Buffer.from(
    JSON.stringify({
      e: expiresAt,
      ...(model ? { m: model } : {}),
      n: randomBytes(9).toString('base64url'),
    }),
  ).toString('base64url');
  return {
    value: `${CLIENT_SECRET_PREFIX}${payload}.${sign(key, payload)}`,
    expires_at: expiresAt,
    session: { type: 'realtime', object: 'realtime.session', model: model ?? null },
  };
}

/** Checks a presented `ek_…` key: its signature, then its expiry. */
export function checkClientSecret(key: Buffer, value: string, now = Date.now()): SecretCheck {
  const body = value.slice(CLIENT_SECRET_PREFIX.length);
  const dot = body.indexOf('.');
  if (!value.startsWith(CLIENT_SECRET_PREFIX) || dot <= 0) return { ok: false, why: 'invalid' };
  const payload = body.slice(0, dot);
  const given = Buffer.from(body.slice(dot + 1));
  const expected = Buffer.from(sign(key, payload));
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, why: 'invalid' };
  }
  let claims: { e?: unknown; m?: unknown };
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof claims;
  } catch {
    return { ok: false, why: 'invalid' };
  }
  if (typeof claims.e !== 'number') return { ok: false, why: 'invalid' };
  if (claims.e * 1000 <= now) return { ok: false, why: 'expired', expiredAt: claims.e };
  return typeof claims.m === 'string' ? { ok: true, model: claims.m } : { ok: true };
}

/** The most a mint request's body may hold. */
const MAX_BODY_BYTES = 16 * 1024;

/** The answer to `POST /v1/realtime/client_secrets`: its status and JSON body. */
export interface SecretAnswer {
  status: number;
  body:
    | MintedSecret
    | { error: { message: string; type: string; code: string | null; param: string | null } };
}

/**
 * Answers a mint request: only with the server's token (a key cannot mint
 * another), and a body of OpenAI's shape.
 */
export async function answerMint(
  req: IncomingMessage,
  authToken: string | undefined,
): Promise<SecretAnswer> {
  const fail = (
    status: number,
    code: string | null,
    message: string,
    param: string | null = null,
  ) =>
    ({ status, body: { error: { message, type: 'invalid_request_error', code, param } } }) as const;
  if (authToken === undefined) {
    return fail(
      400,
      'no_auth_token',
      'This server has no AUTH_TOKEN, so it checks no keys: a page connects with any key (the Agents SDK takes any ek_… string in a browser). Set AUTH_TOKEN to mint client secrets.',
    );
  }
  const bearer = bearerToken(req);
  if (bearer === undefined || !sameSecret(bearer, authToken)) {
    return fail(
      401,
      bearer === undefined ? 'missing_api_key' : 'invalid_api_key',
      "Client secrets are minted with the server's token (AUTH_TOKEN) as `Authorization: Bearer <token>`, by your backend, never by a page.",
    );
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > MAX_BODY_BYTES) {
      return fail(413, 'body_too_large', `The body is over ${MAX_BODY_BYTES} bytes.`);
    }
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  let body: unknown;
  try {
    body = text.trim() === '' ? undefined : JSON.parse(text);
  } catch {
    return fail(400, 'invalid_json', 'The body is not JSON.');
  }
  const minted = mintClientSecret(secretKey(authToken), body);
  if ('error' in minted) return fail(400, 'invalid_value', minted.error, minted.param);
  return { status: 200, body: minted };
}

/** The token of an `Authorization: Bearer …` header (the scheme in any case, RFC 9110 §11.1). */
export function bearerToken(req: IncomingMessage): string | undefined {
  return /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
}

/** Whether two secrets are the same, in time that does not tell where they differ. */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function sign(key: Buffer, payload: string): string {
  return createHmac('sha256', key).update(payload).digest('base64url');
}
