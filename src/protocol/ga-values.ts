/**
 * Schemas of the GA Realtime values a client may set that Troupe takes as
 * typed values, following the `openai` package's type definitions
 * (`resources/realtime/realtime.d.ts`): turn detection (`server_vad` and
 * `semantic_vad`), transcription, noise reduction, speed, truncation,
 * `include`, `prompt`, `tracing`, `reasoning`, and `function_call` items.
 * Where Troupe does the nearest thing rather than exactly what a value asks,
 * the mapping is here and documented in docs/protocol.md.
 */
import { z } from 'zod';
import type {
  NoiseReduction,
  PromptReference,
  Reasoning,
  TracingSetting,
  TranscriptionSettings,
  Truncation,
  TurnDetection,
} from '../session/events.js';

/** `semantic_vad` eagerness levels, as the GA API names them. */
export const SEMANTIC_VAD_EAGERNESS = ['low', 'medium', 'high', 'auto'] as const;

/**
 * The silence window Troupe's server VAD uses for each `semantic_vad`
 * eagerness (Troupe has no semantic end-of-turn model): `low` lets the user
 * pause longer, `high` answers sooner; `auto` is `medium`, as in the GA API.
 */
export const SEMANTIC_VAD_SILENCE_MS: Readonly<
  Record<(typeof SEMANTIC_VAD_EAGERNESS)[number], number>
> = {
  low: 1200,
  medium: 700,
  auto: 700,
  high: 350,
};

/** Fields only `server_vad` takes, which a `semantic_vad` object must not carry. */
const SERVER_VAD_ONLY = [
  'threshold',
  'prefix_padding_ms',
  'silence_duration_ms',
  'idle_timeout_ms',
] as const;

const serverVad = z.strictObject({
  type: z.literal('server_vad'),
  threshold: z.number().min(0).max(1).optional(),
  prefix_padding_ms: z.number().int().min(0).max(10_000).optional(),
  silence_duration_ms: z.number().int().min(0).max(10_000).optional(),
  create_response: z.boolean().optional(),
  interrupt_response: z.boolean().optional(),
  // GA: 5 000–30 000 ms of silence after a response before the server says so; null = off.
  idle_timeout_ms: z.number().int().min(5_000).max(30_000).nullable().optional(),
});

const semanticVad = z
  .object({
    type: z.literal('semantic_vad'),
    eagerness: z.enum(SEMANTIC_VAD_EAGERNESS).optional(),
    create_response: z.boolean().optional(),
    interrupt_response: z.boolean().optional(),
  })
  .catchall(z.unknown())
  .superRefine((v, ctx) => {
    for (const key of Object.keys(v)) {
      if (['type', 'eagerness', 'create_response', 'interrupt_response'].includes(key)) continue;
      const serverOnly = (SERVER_VAD_ONLY as readonly string[]).includes(key);
      ctx.addIssue({
        code: 'custom',
        path: [key],
        message: serverOnly
          ? `${key} is a server_vad setting; semantic_vad takes eagerness (${SEMANTIC_VAD_EAGERNESS.join(', ')}), create_response and interrupt_response — or use type "server_vad"`
          : `unknown semantic_vad setting; semantic_vad takes eagerness, create_response and interrupt_response`,
      });
    }
  });

/**
 * `audio.input.turn_detection` (or beta `turn_detection`): `server_vad` as
 * given; `semantic_vad` becomes the server VAD with the silence window of its
 * eagerness ({@link SEMANTIC_VAD_SILENCE_MS}) — what Troupe runs, and so what
 * `session.updated` echoes — with `eagerness` kept to say it was asked for;
 * `null` = the client commits turns.
 */
export const turnDetectionSchema = z
  .discriminatedUnion('type', [serverVad, semanticVad], {
    error: 'expected one of "server_vad", "semantic_vad" (or null to commit turns yourself)',
  })
  .transform((t): TurnDetection => {
    if (t.type === 'server_vad') return t;
    const eagerness = t.eagerness ?? 'auto';
    return {
      type: 'server_vad',
      eagerness,
      silence_duration_ms: SEMANTIC_VAD_SILENCE_MS[eagerness],
      ...(t.create_response !== undefined ? { create_response: t.create_response } : {}),
      ...(t.interrupt_response !== undefined ? { interrupt_response: t.interrupt_response } : {}),
    };
  })
  .nullable();

/** `audio.input.transcription` (beta `input_audio_transcription`); `null` turns it off. */
export const transcriptionSchema = z
  .strictObject({
    model: z.string().min(1).max(128).optional(),
    language: z.string().min(1).max(32).optional(),
    prompt: z.string().max(10_000).optional(),
    delay: z.enum(['minimal', 'low', 'medium', 'high', 'xhigh']).optional(),
  })
  .transform((t): TranscriptionSettings => t)
  .nullable();

/** `audio.input.noise_reduction` (beta `input_audio_noise_reduction`); `null` = none. */
export const noiseReductionSchema = z
  .strictObject({
    type: z.enum(['near_field', 'far_field']).optional(),
  })
  .transform((n): NoiseReduction => n)
  .nullable();

/** `audio.output.speed` (beta `speed`): GA takes 0.25 to 1.5, 1 = normal. */
export const speedSchema = z.number().min(0.25).max(1.5);

/** `truncation`: how the conversation is cut when it outgrows the context. */
export const truncationSchema = z.union([
  z.enum(['auto', 'disabled']),
  z
    .strictObject({
      type: z.literal('retention_ratio'),
      retention_ratio: z.number().min(0).max(1),
      token_limits: z
        .strictObject({ post_instructions: z.number().int().min(0).optional() })
        .optional(),
    })
    .transform((t): Truncation => t),
]);

/** `include`: extra fields the client wants in events. */
export const includeSchema = z.array(z.enum(['item.input_audio_transcription.logprobs'])).max(8);

/** `prompt`: a stored prompt template by id; `null` clears it. */
export const promptSchema = z
  .strictObject({
    id: z.string().min(1).max(256),
    version: z.string().max(64).nullable().optional(),
    variables: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .transform((p): PromptReference => p)
  .nullable();

/** `tracing`: `"auto"`, a tracing configuration, or `null` (off). */
export const tracingSchema = z
  .union([
    z.literal('auto', {
      error: 'expected "auto", an object {workflow_name, group_id, metadata}, or null (off)',
    }),
    z
      .strictObject({
        workflow_name: z.string().max(256).optional(),
        group_id: z.string().max(256).optional(),
        metadata: z.unknown().optional(),
      })
      .transform((t): TracingSetting => t),
  ])
  .nullable();

/** `reasoning`: the effort a reasoning model spends. */
export const reasoningSchema = z
  .strictObject({
    effort: z.enum(['minimal', 'low', 'medium', 'high', 'xhigh']).optional(),
  })
  .transform((r): Reasoning => r);
