/**
 * The schema of `response.create`'s `response`: the options of one response,
 * GA names first and beta's mapped onto them, parsed into one
 * {@link ResponseOptions}.
 */
import { z } from 'zod';
import type { InputItem, ResponseOptions } from '../session/events.js';
import {
  audioFormat,
  BETA_NAMES,
  maxTokens,
  modalities,
  nullAsUnset,
  sameUnderBothNames,
  temperature,
  toolChoice,
  toolEntry,
  voiceSchema,
} from './field-schemas.js';
import { promptSchema, reasoningSchema } from './ga-values.js';
import { inputItem, stripItem } from './item-schemas.js';

/** Most `response.metadata` pairs, as OpenAI takes them. */
export const MAX_METADATA_PAIRS = 16;
/** Longest `response.metadata` key, in characters. */
export const MAX_METADATA_KEY_CHARS = 64;
/** Longest `response.metadata` value, in characters. */
export const MAX_METADATA_VALUE_CHARS = 512;

/**
 * `response.create.response`, as {@link ResponseOptions}. A field sent as
 * null is not set (`prompt: null` clears the prompt, as GA has it).
 */
export const responseSchema = z
  .strictObject({
    instructions: nullAsUnset(z.string()),
    output_modalities: nullAsUnset(modalities),
    modalities: nullAsUnset(modalities),
    tool_choice: nullAsUnset(toolChoice),
    temperature: nullAsUnset(temperature),
    max_output_tokens: nullAsUnset(maxTokens),
    max_response_output_tokens: nullAsUnset(maxTokens),
    // GA: null = no metadata, as when it is not set.
    metadata: nullAsUnset(
      z.record(z.string(), z.string()).superRefine((m, ctx) => {
        const keys = Object.keys(m);
        if (keys.length > MAX_METADATA_PAIRS) {
          ctx.addIssue({
            code: 'custom',
            message: `expected at most ${MAX_METADATA_PAIRS} key-value pairs`,
          });
          return;
        }
        const longKey = keys.find((k) => k.length > MAX_METADATA_KEY_CHARS);
        if (longKey !== undefined) {
          ctx.addIssue({
            code: 'custom',
            message: `expected keys of at most ${MAX_METADATA_KEY_CHARS} characters (one has ${longKey.length})`,
          });
          return;
        }
        const longValue = keys.find((k) => m[k]!.length > MAX_METADATA_VALUE_CHARS);
        if (longValue !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [longValue],
            message: `expected a value of at most ${MAX_METADATA_VALUE_CHARS} characters`,
          });
        }
      }),
    ),
    conversation: nullAsUnset(
      z.enum(['auto', 'none'], {
        error:
          'expected "auto" (the session\'s conversation) or "none" (an out-of-band response); a session has one conversation',
      }),
    ),
    input: nullAsUnset(z.array(inputItem).max(1_000)),
    tools: nullAsUnset(z.array(toolEntry).max(128)),
    voice: nullAsUnset(voiceSchema),
    audio: nullAsUnset(
      z.strictObject({
        output: nullAsUnset(
          z.strictObject({ format: nullAsUnset(audioFormat), voice: nullAsUnset(voiceSchema) }),
        ),
      }),
    ),
    prompt: promptSchema.optional(),
    parallel_tool_calls: nullAsUnset(z.boolean()),
    reasoning: nullAsUnset(reasoningSchema),
    // Beta name of audio.output.format.
    output_audio_format: nullAsUnset(audioFormat),
  })
  .superRefine(sameUnderBothNames(BETA_NAMES))
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
    const format = r.audio?.output?.format ?? r.output_audio_format;
    if (format !== undefined) out.output_audio_format = format;
    if (r.prompt !== undefined) out.prompt = r.prompt;
    if (r.parallel_tool_calls !== undefined) out.parallel_tool_calls = r.parallel_tool_calls;
    if (r.reasoning !== undefined) out.reasoning = r.reasoning;
    return out;
  });
