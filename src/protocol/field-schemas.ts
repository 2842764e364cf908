/**
 * Field schemas that several client events share: the event id, tools and
 * tool choice, voice, modalities, token limit, temperature and audio format
 * (beta strings and GA objects both taken).
 */
import { z } from 'zod';
import type { AudioFormat, ClientTool } from '../session/events.js';
import { FORMAT_OF_ENCODING } from '../session/voice-settings.js';
import { toolSchemaProblem } from './tool-parameters.js';

/**
 * An optional field that takes `null` as not set, as OpenAI's API does:
 * clients built on typed models send null for a field they set to none
 * (LiveKit's `response.create {response: {instructions: null}}`). Only for
 * fields whose null means nothing of its own (not `turn_detection`, where
 * null turns the server VAD off).
 *
 * @example z.strictObject({ instructions: nullAsUnset(z.string()) }).parse({ instructions: null }) // { instructions: undefined }
 */
export function nullAsUnset<T extends z.ZodType>(schema: T) {
  return schema.nullish().transform((v) => v ?? undefined);
}

/** An event's optional `event_id` (null: none, as typed clients send it). */
export const eventId = nullAsUnset(z.string().max(256));

/** `tool_choice`: a mode, or one function by name. */
export const toolChoice = z.union([
  z.enum(['auto', 'none', 'required']),
  z.strictObject({ type: z.literal('function'), name: z.string().min(1) }),
]);

/** Function names as OpenAI takes them. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Deepest nesting of a client tool's `parameters` schema (OpenAI allows 5 levels of objects). */
export const MAX_TOOL_SCHEMA_DEPTH = 32;
/** Largest client tool `parameters` schema, as JSON. */
export const MAX_TOOL_SCHEMA_BYTES = 64 * 1024;

/** A function name as OpenAI takes it. */
export const functionName = z.string().regex(TOOL_NAME, {
  error: 'expected a function name of 1–64 letters, digits, _ or -',
});

const clientTool = z
  .strictObject({
    type: z.literal('function'),
    name: functionName,
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
  })
  // Runs once the shape is right: a schema a strict LLM refuses would fail every later turn.
  .superRefine((t, ctx) => {
    const problem = toolSchemaProblem(t.parameters);
    if (problem === undefined) return;
    ctx.addIssue({
      code: 'custom',
      path: ['parameters'],
      message: `expected a JSON Schema for function "${t.name}"; ${problem}`,
    });
  });

/**
 * A tool of `session.tools` / `response.tools`: a function the client runs.
 * GA's `mcp` tools (a remote MCP server the API would call) are refused by
 * name: Troupe's own server-side tools are the character's.
 */
export const toolEntry = z
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
export const voiceSchema = z.union([
  z.string().max(256),
  z.strictObject({ id: z.string().min(1).max(256) }).transform((v) => v.id),
]);

/** Settings a session and a response take under a GA and a beta name. */
export const BETA_NAMES: ReadonlyArray<readonly [ga: string, beta: string]> = [
  ['output_modalities', 'modalities'],
  ['max_output_tokens', 'max_response_output_tokens'],
  ['audio.output.voice', 'voice'],
];

/**
 * A check that a value given under both its GA and its beta name is the same
 * under both: otherwise one would be dropped without a word.
 */
export function sameUnderBothNames(pairs: ReadonlyArray<readonly [ga: string, beta: string]>) {
  return (value: Record<string, unknown>, ctx: z.core.$RefinementCtx): void => {
    for (const [ga, beta] of pairs) {
      const gaValue = ga
        .split('.')
        .reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], value);
      const betaValue = value[beta];
      if (gaValue === undefined || betaValue === undefined) continue;
      if (JSON.stringify(gaValue) === JSON.stringify(betaValue)) continue;
      ctx.addIssue({
        code: 'custom',
        path: [beta],
        message: `expected the value of ${ga} (its GA name), ${JSON.stringify(gaValue)}, or only one of the two`,
      });
    }
  };
}

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

/** `output_modalities` (beta: `modalities`). */
export const modalities = z
  .array(z.enum(['text', 'audio']))
  .min(1, { error: 'expected ["text"] or ["audio"]' })
  .max(2);

/** Largest token limit a client may set. */
export const MAX_TOKENS_LIMIT = 1_000_000;
const MAX_TOKENS_ERROR = `expected a whole number from 1 to ${MAX_TOKENS_LIMIT}, or "inf"`;
/** A token limit, or "inf". */
export const maxTokens = z
  .union([z.number(), z.literal('inf', { error: MAX_TOKENS_ERROR })])
  .superRefine((v, ctx) => {
    if (v === 'inf' || (Number.isInteger(v) && v >= 1 && v <= MAX_TOKENS_LIMIT)) return;
    ctx.addIssue({ code: 'custom', message: MAX_TOKENS_ERROR });
  });
const TEMPERATURE_ERROR = 'expected a number from 0 to 2';
/** Sampling temperature. */
export const temperature = z
  .number({ error: TEMPERATURE_ERROR })
  .min(0, { error: TEMPERATURE_ERROR })
  .max(2, { error: TEMPERATURE_ERROR });

/** Beta strings and GA objects, as one {@link AudioFormat}. */
export const audioFormat = z.union([
  // The beta names are the encodings' own.
  z
    .enum(['pcm16', 'g711_ulaw', 'g711_alaw', 'ogg_opus'])
    .transform((f): AudioFormat => ({ ...FORMAT_OF_ENCODING[f] })),
  z.strictObject({
    type: z.enum(['audio/pcm', 'audio/pcmu', 'audio/pcma', 'audio/ogg']),
    rate: z.number().int().positive().optional(),
  }),
]);
