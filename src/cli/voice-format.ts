/**
 * The chat client's audio format: base64 PCM16 LE mono at 24 kHz both ways,
 * sent in 40 ms chunks.
 */
import { PCM16_SAMPLE_RATE } from '../voice/audio/pcm.js';

/** The wire's sample rate, in Hz: what players play and recorders record. */
export const VOICE_SAMPLE_RATE_HZ = PCM16_SAMPLE_RATE;
/** Audio per `input_audio_buffer.append`, in ms (the Realtime API's usual frame). */
export const AUDIO_CHUNK_MS = 40;
/** Silence sent after a `--wav` file, in ms: longer than the server's VAD pause (500 ms by default), so it ends the turn. */
export const TRAILING_SILENCE_MS = 1_000;
/** How long a player may take to exit after the last audio has played, in ms, before it is killed. */
export const PLAYER_DRAIN_GRACE_MS = 3_000;

/** Bytes of one PCM16 sample. */
export const BYTES_PER_SAMPLE = 2;
/** Samples, and bytes, per chunk sent. */
export const SAMPLES_PER_CHUNK = (VOICE_SAMPLE_RATE_HZ * AUDIO_CHUNK_MS) / 1000;
export const BYTES_PER_CHUNK = SAMPLES_PER_CHUNK * BYTES_PER_SAMPLE;
/** The rate as players' and recorders' arguments take it. */
export const RATE = String(VOICE_SAMPLE_RATE_HZ);
