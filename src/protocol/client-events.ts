/**
 * Zod schemas of every client event, GA names and shapes with the beta
 * aliases mapped onto them. {@link parseClientEvent} turns a frame into a
 * {@link ClientEvent} or a {@link ProtocolError} that says what is wrong.
 * The schemas of the larger parts are beside it: `session-schema.ts`,
 * `response-schema.ts`, `item-schemas.ts`, `field-schemas.ts`; the error
 * wording is in `issue-description.ts`.
 */
import { z } from 'zod';
import { ProtocolError } from '../errors.js';
import type { ClientEvent, ClientEventType } from '../session/events.js';
import { eventId, nullAsUnset } from './field-schemas.js';
import { describeIssue } from './issue-description.js';
import { item, itemId } from './item-schemas.js';
import { responseSchema } from './response-schema.js';
import type { Dialect } from './server-events.js';
import { sessionSchema } from './session-schema.js';
import { IGNORED_EVENT_CODE, unmuteSessionSchema } from './unmute.js';

/** One schema per client event type. */
const SCHEMAS = {
  'session.update': z.strictObject({
    type: z.literal('session.update'),
    event_id: eventId,
    session: sessionSchema,
  }),
  'conversation.item.create': z.strictObject({
    type: z.literal('conversation.item.create'),
    event_id: eventId,
    previous_item_id: z.string().nullable().optional(),
    item,
  }),
  'conversation.item.retrieve': z.strictObject({
    type: z.literal('conversation.item.retrieve'),
    event_id: eventId,
    item_id: itemId,
  }),
  'conversation.item.delete': z.strictObject({
    type: z.literal('conversation.item.delete'),
    event_id: eventId,
    item_id: itemId,
  }),
  'conversation.item.truncate': z.strictObject({
    type: z.literal('conversation.item.truncate'),
    event_id: eventId,
    item_id: itemId,
    content_index: z.number().int().min(0),
    audio_end_ms: z.number().int().min(0),
  }),
  'response.create': z.strictObject({
    type: z.literal('response.create'),
    event_id: eventId,
    response: nullAsUnset(responseSchema),
  }),
  'response.cancel': z.strictObject({
    type: z.literal('response.cancel'),
    event_id: eventId,
    response_id: nullAsUnset(z.string()),
  }),
  'input_audio_buffer.append': z.strictObject({
    type: z.literal('input_audio_buffer.append'),
    event_id: eventId,
    audio: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, { error: 'expected base64 audio' }),
  }),
  'input_audio_buffer.commit': z.strictObject({
    type: z.literal('input_audio_buffer.commit'),
    event_id: eventId,
  }),
  'input_audio_buffer.clear': z.strictObject({
    type: z.literal('input_audio_buffer.clear'),
    event_id: eventId,
  }),
} satisfies Record<ClientEventType, z.ZodType>;

/** Every client event type Troupe understands. */
export const CLIENT_EVENT_TYPES = Object.keys(SCHEMAS) as ClientEventType[];

/** The unmute dialect's schemas: Unmute's own `session.update`, the rest as usual. */
const UNMUTE_SCHEMAS: Record<ClientEventType, z.ZodType> = {
  ...SCHEMAS,
  'session.update': z.strictObject({
    type: z.literal('session.update'),
    event_id: eventId,
    session: unmuteSessionSchema,
  }),
};

/**
 * Deepest nesting of objects and arrays in a client event, the event itself
 * being level 1. Real events nest a few levels, a tool's `parameters` at
 * most 36 (their own 32 under the event's 4); a value nested thousands deep
 * would be stored, then overflow the stack when echoed or saved.
 */
export const MAX_EVENT_DEPTH = 64;

/** Unmute's event carrying raw PCM (float32 or int16) instead of Ogg/Opus. */
const UNMUTE_APPEND_PCM = 'unmute.input_audio_buffer.append_pcm';

/**
 * Parses one text frame of a connection speaking `dialect`. Never throws: a
 * bad frame becomes a {@link ProtocolError} naming the event, the field and
 * what was expected.
 *
 * @example
 * const parsed = parseClientEvent('{"type":"response.create"}');
 * if (parsed.ok) session.handle(parsed.event); else send(errorEvent(parsed.error));
 */
export function parseClientEvent(
  frame: string,
  dialect: Dialect = 'openai',
): { ok: true; event: ClientEvent } | { ok: false; error: ProtocolError } {
  let raw: unknown;
  try {
    raw = JSON.parse(frame);
  } catch (err) {
    return fail('invalid_json', `The frame is not valid JSON: ${(err as Error).message}.`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return fail('invalid_event', 'An event must be a JSON object with a "type".');
  }
  const obj = raw as Record<string, unknown>;
  const id = typeof obj.event_id === 'string' ? obj.event_id : null;
  // Before anything else walks it: every later walk may be recursive.
  if (nestsDeeperThan(obj, MAX_EVENT_DEPTH)) {
    const what = `objects and arrays nested more than ${MAX_EVENT_DEPTH} levels deep, so nothing of it was applied; send flatter values.`;
    const message =
      typeof obj.type === 'string'
        ? `${obj.type.slice(0, 100)}: the event has ${what}`
        : `The event has ${what}`;
    return fail('invalid_event', message, null, id);
  }
  if (obj.type === undefined) {
    return fail('missing_required_parameter', 'The event has no "type".', 'type', id);
  }
  if (typeof obj.type !== 'string') {
    const kind = obj.type === null ? 'null' : Array.isArray(obj.type) ? 'array' : typeof obj.type;
    const given = kind === 'null' ? kind : `${/^[aeiou]/.test(kind) ? 'an' : 'a'} ${kind}`;
    return fail('invalid_value', `The event's "type" must be a string, not ${given}.`, 'type', id);
  }
  const schemas = dialect === 'unmute' ? UNMUTE_SCHEMAS : SCHEMAS;
  // Own keys only: "constructor" or "toString" must not find Object.prototype's.
  const schema = Object.hasOwn(schemas, obj.type)
    ? (schemas as Record<string, z.ZodType<ClientEvent>>)[obj.type]
    : undefined;
  if (schema === undefined) {
    if (dialect === 'unmute') {
      const unmute = unmuteOnlyEvent(obj.type, id);
      if (unmute) return unmute;
    }
    return fail(
      'unknown_event_type',
      `Unknown event type "${obj.type.slice(0, 100)}"; expected one of ${CLIENT_EVENT_TYPES.join(', ')}.`,
      'type',
      id,
    );
  }
  const parsed = schema.safeParse(obj);
  if (parsed.success) return { ok: true, event: parsed.data };
  const { code, param, message } = describeIssue(parsed.error.issues[0]!, obj);
  return fail(code, `${obj.type}: ${message}`, param, id);
}

/** Events Unmute's frontend or backend speaks that Troupe does not take, each with its reason. */
function unmuteOnlyEvent(
  type: string,
  id: string | null,
): { ok: false; error: ProtocolError } | undefined {
  const name = type.slice(0, 100);
  if (type.startsWith('bridge.')) {
    // Unmute's frontend sends these around pauses and restarts; nothing to do here.
    return fail(
      IGNORED_EVENT_CODE,
      `${name}: Troupe runs no session bridge, so this event was ignored; to pause, close the socket, and to start over, reconnect.`,
      'type',
      id,
    );
  }
  if (type === UNMUTE_APPEND_PCM) {
    return fail(
      'unsupported_event',
      `${name} is not taken: in the unmute dialect, send the microphone as Ogg/Opus pages with input_audio_buffer.append; for raw PCM16 (24 kHz mono), connect with ?dialect=openai.`,
      'type',
      id,
    );
  }
  return undefined;
}

/**
 * The dialect a client's frame reveals, for connections that did not name
 * one: a `session.update` carrying `allow_recording` (only Unmute's frontend
 * sends it) or a `bridge.*` event (which Unmute's frontend sends before its
 * `session.update` when it reconnects) means `unmute`; any other
 * `session.update` means `openai`; other frames say nothing (undefined).
 * Cheap for audio frames: they are not parsed.
 *
 * @example
 * detectDialect('{"type":"session.update","session":{"allow_recording":false}}'); // 'unmute'
 */
export function detectDialect(frame: string): Dialect | undefined {
  // Base64 audio has no dots: only a frame naming one of these types is parsed.
  if (!frame.includes('session.update') && !frame.includes('bridge.')) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(frame);
  } catch {
    return undefined;
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const { type, session } = raw as { type?: unknown; session?: unknown };
  if (typeof type === 'string' && type.startsWith('bridge.')) return 'unmute';
  if (type !== 'session.update') return undefined;
  const unmute =
    session !== null &&
    typeof session === 'object' &&
    !Array.isArray(session) &&
    Object.hasOwn(session, 'allow_recording');
  return unmute ? 'unmute' : 'openai';
}

/**
 * Whether `value` nests objects and arrays more than `limit` levels deep.
 * Iterative, as the value may be nested far deeper than the stack allows;
 * only objects and arrays are visited, so a long string costs nothing.
 */
function nestsDeeperThan(value: object, limit: number): boolean {
  const stack: object[] = [value];
  const depths: number[] = [1];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const depth = depths.pop()!;
    if (depth > limit) return true;
    const children = Array.isArray(node) ? node : Object.values(node);
    for (const child of children) {
      if (child !== null && typeof child === 'object') {
        stack.push(child as object);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

function fail(
  code: string,
  message: string,
  param: string | null = null,
  eventId: string | null = null,
): { ok: false; error: ProtocolError } {
  return { ok: false, error: new ProtocolError(code, message, { param, eventId }) };
}
