/**
 * The wire protocol of Kyutai's moshi-server streaming STT
 * (`/api/asr-streaming`): msgpack maps tagged by `type`, as its Rust
 * `InMsg`/`OutMsg` enums serialise them. Shared by the provider and the fake
 * server in `src/testing/`.
 */
import { Encoder, decode } from '@msgpack/msgpack';
import { z } from 'zod';

/** Kyutai models hear 24 kHz audio. */
export const KYUTAI_SAMPLE_RATE_HZ = 24_000;
/** One model step: 1920 samples, 80 ms at 24 kHz. */
export const KYUTAI_FRAME_SAMPLES = 1920;
/** Length of one frame. */
export const KYUTAI_FRAME_MS = (KYUTAI_FRAME_SAMPLES / KYUTAI_SAMPLE_RATE_HZ) * 1000;
/** The WebSocket path of streaming STT. */
export const KYUTAI_STT_PATH = '/api/asr-streaming';
/** The HTTP path that says the server is up. */
export const KYUTAI_BUILD_INFO_PATH = '/api/build_info';
/** The header that carries the key. */
export const KYUTAI_API_KEY_HEADER = 'kyutai-api-key';
/** The key moshi-server's example configurations accept. */
export const DEFAULT_KYUTAI_API_KEY = 'public_token';
/** Index in a `Step`'s `prs` of the pause prediction Unmute uses for end of turn. */
export const KYUTAI_PAUSE_PRS_INDEX = 2;

/** What the client sends. */
export type KyutaiSttClientMessage =
  { type: 'Audio'; pcm: number[] } | { type: 'Marker'; id: number };

/** What the server sends. */
export type KyutaiSttServerMessage =
  | { type: 'Ready' }
  | { type: 'Word'; text: string; start_time: number }
  | { type: 'EndWord'; stop_time: number }
  | { type: 'Step'; step_idx: number; prs: number[]; buffered_pcm: number }
  | { type: 'Marker'; id: number }
  | { type: 'Error'; message: string };

/** Zod schemas of server messages, to reject a malformed one with a clear message. */
export const KYUTAI_STT_SERVER_SCHEMAS = {
  Ready: z.object({ type: z.literal('Ready') }),
  Word: z.object({ type: z.literal('Word'), text: z.string(), start_time: z.number() }),
  EndWord: z.object({ type: z.literal('EndWord'), stop_time: z.number() }),
  Step: z.object({
    type: z.literal('Step'),
    step_idx: z.number(),
    prs: z.array(z.number()),
    // Older servers do not send it.
    buffered_pcm: z.number().optional(),
  }),
  Marker: z.object({ type: z.literal('Marker'), id: z.number() }),
  Error: z.object({ type: z.literal('Error'), message: z.string() }),
} as const;

/** Zod schemas of client messages, for the fake server. */
export const KYUTAI_STT_CLIENT_SCHEMAS = {
  Audio: z.object({ type: z.literal('Audio'), pcm: z.array(z.number()) }),
  Marker: z.object({ type: z.literal('Marker'), id: z.number().int() }),
} as const;

// Samples must go out as float32 even when they are whole numbers (0): the server
// reads `Vec<f32>`. Everything else keeps integers as integers (`Marker.id` is an i64).
const audioEncoder = new Encoder({ forceFloat32: true, forceIntegerToFloat: true });
const plainEncoder = new Encoder();

/**
 * Encodes one `Audio` message from float samples in [-1, 1].
 *
 * @example
 * socket.send(encodeKyutaiAudio(new Float32Array(KYUTAI_FRAME_SAMPLES)));
 */
export function encodeKyutaiAudio(pcm: Float32Array): Uint8Array {
  return audioEncoder.encode({ type: 'Audio', pcm: Array.from(pcm) });
}

/** Encodes any other message (both directions). */
export function encodeKyutaiMessage(
  message: KyutaiSttClientMessage | KyutaiSttServerMessage,
): Uint8Array {
  return plainEncoder.encode(message);
}

/** The result of {@link parseKyutaiMessage}. */
export type KyutaiParse<T> =
  | { ok: true; message: T }
  /** Not a type this side knows: skip it (the server may be newer). */
  | { ok: false; unknownType: string }
  | { ok: false; error: string };

/**
 * Decodes and checks one binary frame against `schemas`.
 *
 * @example
 * const parsed = parseKyutaiMessage(bytes, KYUTAI_STT_SERVER_SCHEMAS);
 * if (parsed.ok && parsed.message.type === 'Word') …
 */
export function parseKyutaiMessage<S extends Record<string, z.ZodType>>(
  bytes: Uint8Array,
  schemas: S,
): KyutaiParse<z.infer<S[keyof S]>> {
  let raw: unknown;
  try {
    raw = decode(bytes);
  } catch (err) {
    return { ok: false, error: `not valid msgpack (${(err as Error).message})` };
  }
  const type = (raw as { type?: unknown } | null)?.type;
  if (typeof raw !== 'object' || raw === null || typeof type !== 'string') {
    return { ok: false, error: 'a msgpack value without a string "type"' };
  }
  const schema = schemas[type];
  if (!schema) return { ok: false, unknownType: type };
  const result = schema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0];
    return {
      ok: false,
      error: `a malformed ${type} message (${issue?.path.join('.') || 'message'}: ${issue?.message})`,
    };
  }
  return { ok: true, message: result.data as z.infer<S[keyof S]> };
}
