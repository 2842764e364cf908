/**
 * What a session needs for speech, handed to it by the server: engines,
 * the VAD, and the settings from config.
 */
import type { SttProvider, TtsProvider } from '../voice/types.js';
import type { VadEngine } from '../voice/vad.js';
import type { VadSettings } from './audio-input.js';

/**
 * Audio encodings a session reads and writes: base64 PCM16 LE 24 kHz, G.711
 * μ-law or A-law at 8 kHz (telephony), or Ogg/Opus pages (Unmute).
 */
export type AudioEncoding = 'pcm16' | 'g711_ulaw' | 'g711_alaw' | 'ogg_opus';

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
