/**
 * The schema of `session.update`'s `session`: GA names and shapes first,
 * beta's names mapped onto them, Troupe's own `troupe` settings, and the
 * read-only fields of `session.created` a client may send back unchanged.
 * It parses into one {@link SessionUpdate}.
 */
import { z } from 'zod';
import type { SessionUpdate } from '../session/events.js';
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
import { sessionMetadataSchema } from './session-metadata.js';

const turnDetection = turnDetectionSchema;

/** GA settings taken as typed values (see ga-values.ts), and read-only fields a client may echo back. */
const accepted = {
  model: nullAsUnset(z.string().max(256)),
  tracing: tracingSchema.optional(),
  include: nullAsUnset(includeSchema),
  prompt: promptSchema.optional(),
  truncation: nullAsUnset(truncationSchema),
  parallel_tool_calls: nullAsUnset(z.boolean()),
  reasoning: nullAsUnset(reasoningSchema),
  // Beta names.
  input_audio_transcription: transcriptionSchema.optional(),
  input_audio_noise_reduction: noiseReductionSchema.optional(),
  speed: nullAsUnset(speedSchema),
  // Read-only fields of session.created that clients send back unchanged.
  id: nullAsUnset(z.string()),
  object: nullAsUnset(z.string()),
  expires_at: z.unknown().optional(),
  client_secret: z.unknown().optional(),
};

/**
 * `session.update.session`, as a {@link SessionUpdate}. A field sent as null
 * is not set, but for those whose null means something: `turn_detection`
 * (off), `transcription`, `noise_reduction` (none), `tracing`, `prompt`.
 */
export const sessionSchema = z
  .strictObject({
    type: nullAsUnset(
      z.literal('realtime', {
        error: 'expected "realtime" (transcription sessions are not offered)',
      }),
    ),
    character: nullAsUnset(z.string().min(1)),
    instructions: nullAsUnset(z.string()),
    voice: nullAsUnset(z.string().max(256)),
    tools: nullAsUnset(z.array(toolEntry).max(128)),
    tool_choice: nullAsUnset(toolChoice),
    output_modalities: nullAsUnset(modalities),
    audio: nullAsUnset(
      z.strictObject({
        input: nullAsUnset(
          z.strictObject({
            format: nullAsUnset(audioFormat),
            // null means something here: no turn detection, no transcription, no noise reduction.
            turn_detection: turnDetection.optional(),
            transcription: transcriptionSchema.optional(),
            noise_reduction: noiseReductionSchema.optional(),
          }),
        ),
        output: nullAsUnset(
          z.strictObject({
            format: nullAsUnset(audioFormat),
            voice: nullAsUnset(voiceSchema),
            speed: nullAsUnset(speedSchema),
          }),
        ),
      }),
    ),
    temperature: nullAsUnset(temperature),
    max_output_tokens: nullAsUnset(maxTokens),
    allow_recording: z.boolean().optional(),
    // Troupe's own settings; what session.created shows besides is read-only and sent back unchanged.
    troupe: z
      .strictObject({
        greeting: z.boolean().optional(),
        metadata: sessionMetadataSchema.optional(),
        character: z.unknown().optional(),
        voice_warning: z.unknown().optional(),
        resume_token: z.unknown().optional(),
      })
      .optional(),
    // Beta names.
    modalities: nullAsUnset(modalities),
    input_audio_format: nullAsUnset(audioFormat),
    output_audio_format: nullAsUnset(audioFormat),
    turn_detection: turnDetection.optional(),
    max_response_output_tokens: nullAsUnset(maxTokens),
    ...accepted,
  })
  .superRefine(sameUnderBothNames(BETA_NAMES))
  .transform((s): SessionUpdate => {
    const out: SessionUpdate = {};
    if (s.character !== undefined) out.character = s.character;
    if (s.instructions !== undefined) out.instructions = s.instructions;
    if (s.troupe?.greeting !== undefined) out.greeting = s.troupe.greeting;
    if (s.troupe?.metadata !== undefined) out.metadata = s.troupe.metadata;
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
