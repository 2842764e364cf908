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

/** `response.create.response`, as {@link ResponseOptions}. */
export const responseSchema = z
  .strictObject({
    instructions: z.string().optional(),
    output_modalities: modalities.optional(),
    modalities: modalities.optional(),
    tool_choice: toolChoice.optional(),
    temperature: temperature.optional(),
    max_output_tokens: maxTokens.optional(),
    max_response_output_tokens: maxTokens.optional(),
    metadata: z
      .record(z.string(), z.string())
      .superRefine((m, ctx) => {
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
      })
      .optional(),
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
    // Beta name of audio.output.format.
    output_audio_format: audioFormat.optional(),
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
