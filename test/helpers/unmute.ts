/** What Kyutai Unmute's frontend expects, for suites that stand in for it. */
import type { Received } from './realtime-client.js';

/** Every event type Unmute's frontend knows; it warns about any other. */
export const UNMUTE_TYPES = new Set([
  'session.updated',
  'response.created',
  'response.text.delta',
  'response.text.done',
  'response.audio.delta',
  'response.audio.done',
  'conversation.item.input_audio_transcription.delta',
  'input_audio_buffer.speech_started',
  'input_audio_buffer.speech_stopped',
  'unmute.interrupted_by_vad',
  'unmute.response.text.delta.ready',
  'unmute.response.audio.delta.ready',
  'unmute.additional_outputs',
  'error',
]);

/** Event types Unmute's frontend would warn about. */
export const unknownToUnmute = (events: readonly Received[]): string[] =>
  events.map((e) => e.type).filter((t) => !UNMUTE_TYPES.has(t));
