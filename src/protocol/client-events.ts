/**
 * Zod schemas of every client event, GA names and shapes with the beta
 * aliases mapped onto them. {@link parseClientEvent} turns a frame into a
 * {@link ClientEvent} or a {@link ProtocolError} that says what is wrong.
 */
import { z } from 'zod';
import { ProtocolError } from '../errors.js';
import { formatPath, preview, valueAt } from '../tools/preview.js';
import type {
  AudioFormat,
  ClientEvent,
  ClientTool,
  ClientEventType,
  ContentPart,
  InputItem,
  ResponseOptions,
  SessionUpdate,
} from '../session/events.js';
import type { Dialect } from './server-events.js';
import {
  includeSchema,
  noiseReductionSchema,
  promptSchema,
  reasoningSchema,
  speedSchema,
  tracingSchema,
  transcriptionSchema,
  truncationSchema,
  turnDetectionSchema,
} from './ga-values.js';
import { IGNORED_EVENT_CODE, unmuteSessionSchema } from './unmute.js';

const eventId = z.string().max(256).optional();

const toolChoice = z.union([
  z.enum(['auto', 'none', 'required']),
  z.strictObject({ type: z.literal('function'), name: z.string().min(1) }),
]);

/** Function names as OpenAI takes them. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Deepest nesting of a client tool's `parameters` schema (OpenAI allows 5 levels of objects). */
export const MAX_TOOL_SCHEMA_DEPTH = 32;
/** Largest client tool `parameters` schema, as JSON. */
export const MAX_TOOL_SCHEMA_BYTES = 64 * 1024;

const clientTool = z.strictObject({
  type: z.literal('function'),
  name: z.string().regex(TOOL_NAME, {
    error: 'expected a function name of 1–64 letters, digits, _ or -',
  }),
  description: z.string().default(''),
  parameters: z
    .record(z.string(), z.unknown())
    // Checked before anything walks it: a schema nested thousands deep would
    // overflow the stack of every later turn.
    .superRefine((p, ctx) => {
      // Depth first: JSON.stringify itself overflows on a deep enough value.
      if (jsonDepth(p) > MAX_TOOL_SCHEMA_DEPTH) {
        ctx.addIssue({
          code: 'custom',
          message: `expected a JSON Schema nested at most ${MAX_TOOL_SCHEMA_DEPTH} levels deep`,
        });
      } else if (Buffer.byteLength(JSON.stringify(p)) > MAX_TOOL_SCHEMA_BYTES) {
        ctx.addIssue({
          code: 'custom',
          message: `expected a JSON Schema of at most ${MAX_TOOL_SCHEMA_BYTES} bytes`,
        });
      }
    })
    .default({ type: 'object', properties: {} }),
  strict: z.boolean().optional(),
});

/**
 * A tool of `session.tools` / `response.tools`: a function the client runs.
 * GA's `mcp` tools (a remote MCP server the API would call) are refused by
 * name: Troupe's own server-side tools are the character's.
 */
const toolEntry = z
  .discriminatedUnion(
    'type',
    [
      clientTool,
      z.looseObject({ type: z.literal('mcp') }).superRefine((_, ctx) =>
        ctx.addIssue({
          code: 'custom',
          path: ['type'],
          message:
            'MCP server tools are not offered: Troupe calls no remote MCP servers (its server-side tools are the character\'s); offer a "function" tool and run it yourself',
        }),
      ),
    ],
    { error: 'expected one of "function", "mcp"' },
  )
  // The mcp branch never passes its check: what gets here is a function tool.
  .transform((t): ClientTool => t as ClientTool);

/** A voice: a name, or GA's `{id}` of a custom voice. */
const voiceSchema = z.union([
  z.string().max(256),
  z.strictObject({ id: z.string().min(1).max(256) }).transform((v) => v.id),
]);

/** How deeply a parsed JSON value nests (without recursion: it may be very deep). */
export function jsonDepth(value: unknown, stopAt = MAX_TOOL_SCHEMA_DEPTH + 1): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const d = depth + 1;
    if (d > deepest) deepest = d;
    if (deepest >= stopAt) return deepest;
    for (const child of Object.values(v)) stack.push([child, d]);
  }
  return deepest;
}

const modalities = z
  .array(z.enum(['text', 'audio']))
  .min(1, { error: 'expected ["text"] or ["audio"]' })
  .max(2);

const maxTokens = z.union([z.number().int().min(1).max(1_000_000), z.literal('inf')]);
const temperature = z.number().min(0).max(2);

/** Beta strings and GA objects, as one {@link AudioFormat}. */
const audioFormat = z.union([
  z.enum(['pcm16', 'g711_ulaw', 'g711_alaw', 'ogg_opus']).transform(
    (f): AudioFormat =>
      ({
        pcm16: { type: 'audio/pcm', rate: 24000 },
        g711_ulaw: { type: 'audio/pcmu' },
        g711_alaw: { type: 'audio/pcma' },
        ogg_opus: { type: 'audio/ogg', rate: 24000 },
      })[f] as AudioFormat,
  ),
  z.strictObject({
    type: z.enum(['audio/pcm', 'audio/pcmu', 'audio/pcma', 'audio/ogg']),
    rate: z.number().int().positive().optional(),
  }),
]);

const turnDetection = turnDetectionSchema;

/** GA settings taken as typed values (see ga-values.ts), and read-only fields a client may echo back. */
const accepted = {
  model: z.string().max(256).optional(),
  tracing: tracingSchema.optional(),
  include: includeSchema.optional(),
  prompt: promptSchema.optional(),
  truncation: truncationSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  reasoning: reasoningSchema.optional(),
  // Beta names.
  input_audio_transcription: transcriptionSchema.optional(),
  input_audio_noise_reduction: noiseReductionSchema.optional(),
  speed: speedSchema.optional(),
  // Read-only fields of session.created that clients send back unchanged.
  id: z.string().optional(),
  object: z.string().optional(),
  expires_at: z.unknown().optional(),
  client_secret: z.unknown().optional(),
};

const sessionSchema = z
  .strictObject({
    type: z
      .literal('realtime', {
        error: 'expected "realtime" (transcription sessions are not offered)',
      })
      .optional(),
    character: z.string().min(1).optional(),
    instructions: z.string().optional(),
    voice: z.string().optional(),
    tools: z.array(toolEntry).max(128).optional(),
    tool_choice: toolChoice.optional(),
    output_modalities: modalities.optional(),
    audio: z
      .strictObject({
        input: z
          .strictObject({
            format: audioFormat.optional(),
            turn_detection: turnDetection.optional(),
            transcription: transcriptionSchema.optional(),
            noise_reduction: noiseReductionSchema.optional(),
          })
          .optional(),
        output: z
          .strictObject({
            format: audioFormat.optional(),
            voice: voiceSchema.optional(),
            speed: speedSchema.optional(),
          })
          .optional(),
      })
      .optional(),
    temperature: temperature.optional(),
    max_output_tokens: maxTokens.optional(),
    allow_recording: z.boolean().optional(),
    // Troupe's own settings; what session.created shows besides is read-only and sent back unchanged.
    troupe: z
      .strictObject({
        greeting: z.boolean().optional(),
        character: z.unknown().optional(),
        voice_warning: z.unknown().optional(),
        resume_token: z.unknown().optional(),
      })
      .optional(),
    // Beta names.
    modalities: modalities.optional(),
    input_audio_format: audioFormat.optional(),
    output_audio_format: audioFormat.optional(),
    turn_detection: turnDetection.optional(),
    max_response_output_tokens: maxTokens.optional(),
    ...accepted,
  })
  .transform((s): SessionUpdate => {
    const out: SessionUpdate = {};
    if (s.character !== undefined) out.character = s.character;
    if (s.instructions !== undefined) out.instructions = s.instructions;
    if (s.troupe?.greeting !== undefined) out.greeting = s.troupe.greeting;
    const voice = s.audio?.output?.voice ?? s.voice;
    if (voice !== undefined) out.voice = voice;
    if (s.tools !== undefined) out.tools = s.tools;
    if (s.tool_choice !== undefined) out.tool_choice = s.tool_choice;
    const mods = s.output_modalities ?? s.modalities;
    if (mods !== undefined) out.output_modalities = mods;
    const input = s.audio?.input?.format ?? s.input_audio_format;
    if (input !== undefined) out.input_audio_format = input;
    const output = s.audio?.output?.format ?? s.output_audio_format;
    if (output !== undefined) out.output_audio_format = output;
    const td =
      s.audio?.input?.turn_detection !== undefined
        ? s.audio.input.turn_detection
        : s.turn_detection;
    if (td !== undefined) out.turn_detection = td;
    if (s.temperature !== undefined) out.temperature = s.temperature;
    const max = s.max_output_tokens ?? s.max_response_output_tokens;
    if (max !== undefined) out.max_output_tokens = max;
    if (s.allow_recording !== undefined) out.allow_recording = s.allow_recording;
    takeGaSettings(s, out);
    return out;
  });

/** The GA settings of a parsed `session.update.session` (GA names first, then beta's). */
function takeGaSettings(
  s: {
    model?: string | undefined;
    audio?:
      | {
          input?: { transcription?: unknown; noise_reduction?: unknown } | undefined;
          output?: { speed?: number | undefined } | undefined;
        }
      | undefined;
    input_audio_transcription?: SessionUpdate['input_audio_transcription'] | undefined;
    input_audio_noise_reduction?: SessionUpdate['input_audio_noise_reduction'] | undefined;
    speed?: number | undefined;
  } & Pick<
    SessionUpdate,
    'truncation' | 'include' | 'prompt' | 'tracing' | 'parallel_tool_calls' | 'reasoning'
  >,
  out: SessionUpdate,
): void {
  if (s.model !== undefined) out.model = s.model;
  const input = s.audio?.input;
  const transcription =
    input?.transcription !== undefined
      ? (input.transcription as SessionUpdate['input_audio_transcription'])
      : s.input_audio_transcription;
  if (transcription !== undefined) out.input_audio_transcription = transcription;
  const noise =
    input?.noise_reduction !== undefined
      ? (input.noise_reduction as SessionUpdate['input_audio_noise_reduction'])
      : s.input_audio_noise_reduction;
  if (noise !== undefined) out.input_audio_noise_reduction = noise;
  const speed = s.audio?.output?.speed ?? s.speed;
  if (speed !== undefined) out.output_audio_speed = speed;
  for (const key of [
    'truncation',
    'include',
    'prompt',
    'tracing',
    'parallel_tool_calls',
    'reasoning',
  ] as const) {
    if (s[key] !== undefined) (out as Record<string, unknown>)[key] = s[key];
  }
}

const text = z.string();

/** Content parts; beta's `text` (assistant) becomes `output_text`. */
const contentPart = z.union([
  z.strictObject({ type: z.literal('input_text'), text }),
  z.strictObject({
    type: z.literal('input_image'),
    image_url: z
      .string()
      .refine((u) => /^(data:image\/[a-z0-9.+-]+;base64,|https?:\/\/)/i.test(u), {
        error: 'expected a data:image/…;base64 URL or an http(s) URL',
      }),
    detail: z.enum(['auto', 'low', 'high']).optional(),
  }),
  z.strictObject({
    type: z.literal('input_audio'),
    audio: z.string().optional(),
    transcript: z.string().nullable().optional(),
  }),
  z
    .strictObject({ type: z.enum(['output_text', 'text']), text })
    .transform((p): ContentPart => ({ type: 'output_text', text: p.text })),
  z
    .strictObject({
      type: z.enum(['output_audio', 'audio']),
      audio: z.string().optional(),
      transcript: z.string().nullable().optional(),
    })
    .transform((p): ContentPart => ({ ...p, type: 'output_audio' })),
]);

const itemId = z.string().min(1).max(64);

const messageItem = z.strictObject({
  type: z.literal('message'),
  id: itemId.optional(),
  object: z.literal('realtime.item').optional(),
  status: z.string().optional(),
  role: z.enum(['user', 'assistant', 'system']),
  content: z.array(contentPart).min(1, { error: 'expected at least one content part' }),
});

const functionCallOutputItem = z.strictObject({
  type: z.literal('function_call_output'),
  id: itemId.optional(),
  object: z.literal('realtime.item').optional(),
  call_id: z.string().min(1),
  output: z.string(),
  status: z.string().optional(),
});

/** GA: a call the client records as made; `arguments` must be JSON (the model reads it back). */
const functionCallItem = z.strictObject({
  type: z.literal('function_call'),
  id: itemId.optional(),
  object: z.literal('realtime.item').optional(),
  status: z.string().optional(),
  call_id: z.string().min(1).max(128).optional(),
  name: z.string().regex(TOOL_NAME, {
    error: 'expected a function name of 1–64 letters, digits, _ or -',
  }),
  arguments: z.string().refine(isJsonObjectText, { error: 'expected a JSON object as text' }),
});

/** A conversation item by id (GA `item_reference`), in `response.input`. */
const itemReference = z.strictObject({ type: z.literal('item_reference'), id: itemId });

/** Items a response's `input` may hold (GA `response.input`). */
const inputItem = z.discriminatedUnion(
  'type',
  [messageItem, functionCallOutputItem, functionCallItem, itemReference],
  {
    error:
      'expected an item of type "message", "function_call", "function_call_output" or "item_reference"',
  },
);

const item = z.discriminatedUnion('type', [messageItem, functionCallOutputItem, functionCallItem], {
  error: 'expected an item of type "message", "function_call" or "function_call_output"',
});

const responseSchema = z
  .strictObject({
    instructions: z.string().optional(),
    output_modalities: modalities.optional(),
    modalities: modalities.optional(),
    tool_choice: toolChoice.optional(),
    temperature: temperature.optional(),
    max_output_tokens: maxTokens.optional(),
    max_response_output_tokens: maxTokens.optional(),
    metadata: z.record(z.string(), z.string()).optional(),
    conversation: z
      .enum(['auto', 'none'], {
        error:
          'expected "auto" (the session\'s conversation) or "none" (an out-of-band response); a session has one conversation',
      })
      .optional(),
    input: z.array(inputItem).max(1_000).optional(),
    tools: z.array(toolEntry).max(128).optional(),
    voice: voiceSchema.optional(),
    audio: z
      .strictObject({
        output: z
          .strictObject({ format: audioFormat.optional(), voice: voiceSchema.optional() })
          .optional(),
      })
      .optional(),
    prompt: promptSchema.optional(),
    parallel_tool_calls: z.boolean().optional(),
    reasoning: reasoningSchema.optional(),
  })
  .transform((r): ResponseOptions => {
    const out: ResponseOptions = {};
    if (r.instructions !== undefined) out.instructions = r.instructions;
    const mods = r.output_modalities ?? r.modalities;
    if (mods !== undefined) out.output_modalities = mods;
    if (r.tool_choice !== undefined) out.tool_choice = r.tool_choice;
    if (r.temperature !== undefined) out.temperature = r.temperature;
    const max = r.max_output_tokens ?? r.max_response_output_tokens;
    if (max !== undefined) out.max_output_tokens = max;
    if (r.metadata !== undefined) out.metadata = r.metadata;
    if (r.conversation !== undefined) out.conversation = r.conversation;
    if (r.input !== undefined) {
      out.input = r.input.map((i) =>
        i.type === 'item_reference' ? i : (stripItem(i) as InputItem),
      );
    }
    if (r.tools !== undefined) out.tools = r.tools;
    const voice = r.audio?.output?.voice ?? r.voice;
    if (voice !== undefined) out.voice = voice;
    if (r.audio?.output?.format !== undefined) out.output_audio_format = r.audio.output.format;
    if (r.prompt !== undefined) out.prompt = r.prompt;
    if (r.parallel_tool_calls !== undefined) out.parallel_tool_calls = r.parallel_tool_calls;
    if (r.reasoning !== undefined) out.reasoning = r.reasoning;
    return out;
  });

/** An item as the session takes it: without the read-only `object` and `status`. */
function stripItem<T extends { object?: unknown; status?: unknown }>(
  item: T,
): Omit<T, 'object' | 'status'> {
  const { object: _object, status: _status, ...rest } = item;
  return rest;
}

function isJsonObjectText(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value);
  } catch {
    return false;
  }
}

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
    response: responseSchema.optional(),
  }),
  'response.cancel': z.strictObject({
    type: z.literal('response.cancel'),
    event_id: eventId,
    response_id: z.string().optional(),
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
  if (typeof obj.type !== 'string') {
    return fail('missing_required_parameter', 'The event has no "type".', 'type', id);
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

function fail(
  code: string,
  message: string,
  param: string | null = null,
  eventId: string | null = null,
): { ok: false; error: ProtocolError } {
  return { ok: false, error: new ProtocolError(code, message, { param, eventId }) };
}

/** The first zod issue as a wire code, a dotted path and a sentence. */
function describeIssue(
  first: z.core.$ZodIssue,
  input: Record<string, unknown>,
): { code: string; param: string; message: string } {
  const issue = narrowUnion(first, input);
  if (issue.code === 'unrecognized_keys') {
    const param = formatPath([...issue.path, issue.keys[0]!]);
    return {
      code: 'unknown_parameter',
      param,
      message: `${param}: unknown parameter${issue.keys.length > 1 ? ` (also ${issue.keys.slice(1).join(', ')})` : ''}.`,
    };
  }
  const param = formatPath(issue.path);
  const value = valueAt(input, issue.path);
  // Whatever the check (a type, a union's discriminator), nothing there means a missing field.
  if (value === undefined) {
    return {
      code: 'missing_required_parameter',
      param,
      message: `${param}: missing required parameter.`,
    };
  }
  return {
    code: 'invalid_value',
    param,
    message: `${param}: ${issue.message}, got ${preview(value)}.`,
  };
}

/**
 * A union reports "Invalid input" for the whole value; the client needs the
 * field that is wrong in the branch it meant. That branch is the one whose
 * kind (object or not) and `type` match the input; with exactly one such
 * branch, its first issue is reported instead (descending nested unions).
 * When no branch takes the `type`, the issue is the `type`, naming those taken.
 */
function narrowUnion(issue: z.core.$ZodIssue, input: unknown): z.core.$ZodIssue {
  let current = issue;
  while (current.code === 'invalid_union' && current.errors.length > 0) {
    const value = valueAt(input, current.path);
    const isObject = value !== null && typeof value === 'object' && !Array.isArray(value);
    const wrongKind = (e: z.core.$ZodIssue): boolean =>
      e.path.length === 0 &&
      (isObject ? e.code !== 'unrecognized_keys' : e.code === 'invalid_type');
    const wrongType = (e: z.core.$ZodIssue): boolean =>
      isObject && e.path.length === 1 && e.path[0] === 'type' && e.code === 'invalid_value';
    let viable = current.errors.filter((errs) => !errs.some((e) => wrongKind(e) || wrongType(e)));
    if (viable.length > 1) {
      // A value of the right kind that is not the literal of another branch (0 for a
      // token limit that also takes "inf") is about the branch with a real check.
      const checked = viable.filter(
        (errs) => !errs.every((e) => e.path.length === 0 && e.code === 'invalid_value'),
      );
      if (checked.length === 1) viable = checked;
    }
    if (viable.length === 1 && viable[0]!.length > 0) {
      const inner = viable[0]![0]!;
      current = { ...inner, path: [...current.path, ...inner.path] } as z.core.$ZodIssue;
      continue;
    }
    if (viable.length === 0 && isObject) {
      const types = current.errors.flatMap((errs) =>
        errs.flatMap((e) => (wrongType(e) && e.code === 'invalid_value' ? e.values : [])),
      );
      if (types.length > 0) {
        const message = `expected one of ${types.map((t) => JSON.stringify(t)).join(', ')}`;
        const path = [...current.path, 'type'];
        return { code: 'invalid_value', values: types, path, message };
      }
    }
    break;
  }
  return current;
}
