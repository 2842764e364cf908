/**
 * A session's metadata: the JSON object a client gives a character's prompt
 * generator (`ctx.metadata`), on the URL (`?metadata=`) or later in
 * `session.update` (`session.troupe.metadata`). The same limits both ways.
 */
import { z } from 'zod';
import { ProtocolError } from '../errors.js';
import { jsonDepth } from './field-schemas.js';

/** Most keys a session's metadata may have. */
export const MAX_SESSION_METADATA_KEYS = 16;
/** Longest key of a session's metadata, in characters. */
export const MAX_SESSION_METADATA_KEY_CHARS = 64;
/** Largest session metadata, as compact JSON in UTF-8 bytes. */
export const MAX_SESSION_METADATA_BYTES = 4_096;
/** Deepest a session's metadata may nest (the object itself is level 1). */
export const MAX_SESSION_METADATA_DEPTH = 8;

/**
 * What is wrong with `value` as a session's metadata (`expected …`), or
 * undefined when it is a JSON object within the limits.
 *
 * @example metadataProblem({ userName: 'Ada' }) // undefined
 */
export function metadataProblem(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return 'expected a JSON object (for example {"userName":"Ada"})';
  }
  const keys = Object.keys(value);
  if (keys.length > MAX_SESSION_METADATA_KEYS) {
    return `expected at most ${MAX_SESSION_METADATA_KEYS} keys (it has ${keys.length})`;
  }
  const badKey = keys.find((k) => k.length === 0 || k.length > MAX_SESSION_METADATA_KEY_CHARS);
  if (badKey !== undefined) {
    return `expected keys of 1 to ${MAX_SESSION_METADATA_KEY_CHARS} characters (one has ${badKey.length})`;
  }
  if (jsonDepth(value, MAX_SESSION_METADATA_DEPTH + 1) > MAX_SESSION_METADATA_DEPTH) {
    return `expected objects and arrays nested at most ${MAX_SESSION_METADATA_DEPTH} levels deep`;
  }
  const bytes = Buffer.byteLength(JSON.stringify(value));
  if (bytes > MAX_SESSION_METADATA_BYTES) {
    return `expected at most ${MAX_SESSION_METADATA_BYTES} bytes as JSON (it has ${bytes})`;
  }
  return undefined;
}

/** `session.troupe.metadata` of `session.update`. */
export const sessionMetadataSchema = z.unknown().transform((value, ctx) => {
  const problem = metadataProblem(value);
  if (problem === undefined) return value as Record<string, unknown>;
  ctx.addIssue({ code: 'custom', message: problem });
  return z.NEVER;
});

/**
 * `?metadata=`: the session's metadata as URL-encoded JSON. Undefined when
 * absent; a {@link ProtocolError} naming the parameter when it is not JSON or
 * not within the limits. The message never repeats the value (it may carry
 * personal data, and errors are counted and may be logged).
 *
 * @example metadataParam(new URL('ws://h/v1/realtime?metadata=%7B%22userName%22%3A%22Ada%22%7D'))
 */
export function metadataParam(url: URL): Record<string, unknown> | ProtocolError | undefined {
  const raw = url.searchParams.get('metadata');
  if (raw === null) return undefined;
  const fail = (why: string): ProtocolError =>
    new ProtocolError(
      'invalid_metadata',
      `?metadata=: ${why}. Send a URL-encoded JSON object within the limits, e.g. ?metadata=${encodeURIComponent('{"userName":"Ada"}')}.`,
      { param: 'metadata' },
    );
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return fail('expected JSON, and it does not parse');
  }
  const problem = metadataProblem(value);
  return problem === undefined ? (value as Record<string, unknown>) : fail(problem);
}
