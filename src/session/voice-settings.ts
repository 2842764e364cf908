/**
 * What a session needs for speech, handed to it by the server: engines,
 * the VAD, and the settings from config.
 */
import type { SttProvider, TtsProvider } from '../voice/types.js';
import type { VadEngine } from '../voice/vad.js';
import type { VadSettings } from './audio-input.js';
import type { AudioFormat } from './events.js';

/**
 * Audio encodings a session reads and writes: base64 PCM16 LE 24 kHz, G.711
 * μ-law or A-law at 8 kHz (telephony), or Ogg/Opus pages (Unmute).
 */
export type AudioEncoding = 'pcm16' | 'g711_ulaw' | 'g711_alaw' | 'ogg_opus';

/**
 * Each encoding as the GA API's format object (G.711's carries only its
 * type). The encodings' names are the beta API's names for them.
 */
export const FORMAT_OF_ENCODING: Readonly<Record<AudioEncoding, AudioFormat>> = {
  pcm16: { type: 'audio/pcm', rate: 24000 },
  g711_ulaw: { type: 'audio/pcmu' },
  g711_alaw: { type: 'audio/pcma' },
  ogg_opus: { type: 'audio/ogg', rate: 24000 },
};

/** The encoding of each GA format type. */
export const ENCODING_OF_FORMAT: Readonly<Record<AudioFormat['type'], AudioEncoding>> = {
  'audio/pcm': 'pcm16',
  'audio/pcmu': 'g711_ulaw',
  'audio/pcma': 'g711_alaw',
  'audio/ogg': 'ogg_opus',
};

/** The one rate each raw format is taken at (Ogg/Opus says its own rate in its header). */
const FORMAT_RATES: Partial<Record<AudioFormat['type'], number>> = {
  'audio/pcm': 24000,
  'audio/pcmu': 8000,
  'audio/pcma': 8000,
};

/**
 * Why a session's or a response's audio format is refused (a rate the
 * format is not taken at), or undefined when it is taken.
 *
 * @example formatRateProblem({ type: 'audio/pcmu', rate: 16000 }) // 'audio/pcmu is taken at 8000 Hz only, …'
 */
export function formatRateProblem(f: AudioFormat): string | undefined {
  const rate = FORMAT_RATES[f.type];
  if (rate === undefined || f.rate === undefined || f.rate === rate) return undefined;
  return `${f.type} is taken at ${rate} Hz only, got ${f.rate}; resample on the client.`;
}

/** Speech settings from config. */
export interface VoiceSettings {
  /** Server VAD defaults. */
  vad: VadSettings;
  /** User speech shorter than this does not interrupt the character. @defaultValue 300 */
  bargeInMinMs: number;
  /** @defaultValue 0.6 */
  pauseThreshold: number;
  /** Audio sent ahead of the playback clock. @defaultValue 300 */
  audioLeadMs: number;
  /** @defaultValue 60000 */
  maxUtteranceMs: number;
}

/** The speech side of a session; absent = a text-only server. */
export interface SessionVoice {
  stt: SttProvider | null;
  tts: TtsProvider | null;
  vad: VadEngine;
  settings: VoiceSettings;
}
