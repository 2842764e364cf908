/**
 * Which voice an engine speaks with, when a client or a character names one.
 *
 * Clients of the Realtime protocol name OpenAI's voices (`alloy`, `marin`…),
 * and characters name one per engine. Each engine here has a table from
 * OpenAI's names to a voice of its own that sounds alike (gender, accent),
 * so a client's `session.update {voice: "coral"}` works on every engine, and
 * a voice an engine does not have falls back — with a warning the session
 * sends in `session.updated` — rather than failing the reply.
 */
import { parseFliteVoice } from './tts/flite.js';

/** OpenAI's voice names, in the order OpenAI lists them (Realtime first, then the TTS-only ones). */
export const OPENAI_VOICES = Object.freeze([
  'alloy',
  'ash',
  'ballad',
  'coral',
  'echo',
  'sage',
  'shimmer',
  'verse',
  'marin',
  'cedar',
  'nova',
  'fable',
  'onyx',
] as const);

/** One of {@link OPENAI_VOICES}. */
export type OpenAiVoice = (typeof OPENAI_VOICES)[number];

/**
 * The engines (and voice families of OpenAI-compatible servers) with a table:
 * `openai` (OpenAI itself), `kokoro` (Kokoro-FastAPI, speaches' Kokoro),
 * `piper` (speaches' Piper voices), `flite`, `espeak`, `kyutai`.
 */
export type VoiceEngine = 'openai' | 'kokoro' | 'piper' | 'flite' | 'espeak' | 'kyutai';

/** OpenAI's name → the engine's nearest voice. */
export const VOICE_TABLES: Readonly<Record<VoiceEngine, Readonly<Record<OpenAiVoice, string>>>> =
  Object.freeze({
    openai: Object.freeze(Object.fromEntries(OPENAI_VOICES.map((v) => [v, v]))) as Record<
      OpenAiVoice,
      string
    >,
    kokoro: Object.freeze({
      alloy: 'af_alloy',
      ash: 'am_adam',
      ballad: 'bm_george',
      coral: 'af_heart',
      echo: 'am_echo',
      sage: 'af_sarah',
      shimmer: 'af_bella',
      verse: 'am_michael',
      marin: 'af_river',
      cedar: 'am_liam',
      nova: 'af_nova',
      fable: 'bm_fable',
      onyx: 'am_onyx',
    }),
    piper: Object.freeze({
      alloy: 'en_US-amy-medium',
      ash: 'en_US-ryan-medium',
      ballad: 'en_GB-alan-medium',
      coral: 'en_US-lessac-medium',
      echo: 'en_US-joe-medium',
      sage: 'en_US-kristin-medium',
      shimmer: 'en_US-amy-medium',
      verse: 'en_US-ryan-medium',
      marin: 'en_US-lessac-medium',
      cedar: 'en_US-joe-medium',
      nova: 'en_US-amy-medium',
      fable: 'en_GB-alan-medium',
      onyx: 'en_US-ryan-medium',
    }),
    flite: Object.freeze({
      alloy: 'slt',
      ash: 'rms',
      ballad: 'awb',
      coral: 'slt',
      echo: 'rms',
      sage: 'slt:0.95',
      shimmer: 'slt',
      verse: 'awb',
      marin: 'slt',
      cedar: 'rms:0.95',
      nova: 'slt',
      fable: 'awb',
      onyx: 'kal',
    }),
    espeak: Object.freeze({
      alloy: 'en-us',
      ash: 'en-us',
      ballad: 'en-gb',
      coral: 'en-us',
      echo: 'en-us',
      sage: 'en-us',
      shimmer: 'en-us',
      verse: 'en-gb',
      marin: 'en-us',
      cedar: 'en-us',
      nova: 'en-us',
      fable: 'en-gb-scotland',
      onyx: 'en-us',
    }),
    // Kyutai's voices are files on the server (its voice repository); with
    // no names to map to, OpenAI's fall back to the server's default.
    kyutai: Object.freeze({}) as Record<OpenAiVoice, string>,
  });

/** What {@link resolveVoice} decided. */
export interface ResolvedVoice {
  /** The engine's voice; undefined = the provider's default (`TTS_VOICE` or its own). */
  voice: string | undefined;
  /** Set when a named voice could not be used: say so to the client. */
  warning?: string;
}

/** Whether `name` looks like a voice of the engine (its own name, not OpenAI's). */
function isNative(engine: VoiceEngine, name: string): boolean {
  switch (engine) {
    case 'openai':
      return false; // only the names of the table
    case 'kokoro':
      return /^[a-z][a-z]_[a-z]+$/u.test(name);
    case 'piper':
      return /^[a-z]{2,3}_[A-Z]{2}-[\w-]+$/u.test(name);
    case 'flite':
      return parseFliteVoice(name) !== undefined;
    case 'espeak':
      // eSpeak resolves language codes and identifiers itself (and says when it has none).
      return /^[a-z]{2,3}([-/][\w+-]+)*$/iu.test(name);
    case 'kyutai':
      return name.includes('/') || name.endsWith('.wav');
    default:
      return false;
  }
}

/** The engine's voice for `name`, or undefined when the engine has none by that name. */
function lookUp(engine: VoiceEngine, name: string): string | undefined {
  const mapped = (VOICE_TABLES[engine] as Record<string, string>)[name.toLowerCase()];
  if (mapped !== undefined) return mapped;
  return isNative(engine, name) ? name : undefined;
}

/**
 * Picks the voice to speak with: the client's (`session.update {voice}`),
 * else the character's for this engine, else the provider's default. An
 * OpenAI name is mapped to the engine's nearest voice; a name the engine
 * cannot have falls back to the next choice, with a warning.
 *
 * @example
 * resolveVoice('kokoro', 'nova', undefined); // { voice: 'af_nova' }
 * resolveVoice('flite', 'rms:0.9', undefined); // { voice: 'rms:0.9' }
 * resolveVoice('openai', 'klingon', 'alloy');
 * // { voice: 'alloy', warning: 'Voice "klingon" is not one the openai engine has; using "alloy".' }
 */
export function resolveVoice(
  engine: VoiceEngine,
  requested: string | undefined,
  characterVoice: string | undefined,
): ResolvedVoice {
  const character =
    characterVoice === undefined || characterVoice.trim() === ''
      ? undefined
      : lookUp(engine, characterVoice.trim());
  const characterNote =
    characterVoice !== undefined && characterVoice.trim() !== '' && character === undefined
      ? `The character's voice "${characterVoice}" is not one the ${engine} engine has`
      : undefined;
  const fallback = character ?? undefined;
  const fallbackName = fallback === undefined ? "the engine's default" : `"${fallback}"`;
  if (requested !== undefined && requested.trim() !== '') {
    const voice = lookUp(engine, requested.trim());
    if (voice !== undefined) return { voice };
    return {
      voice: fallback,
      warning: `Voice "${requested}" is not one the ${engine} engine has; using ${fallbackName}.`,
    };
  }
  if (characterNote !== undefined) {
    return { voice: undefined, warning: `${characterNote}; using the engine's default.` };
  }
  return { voice: character };
}

/**
 * The voice family of a TTS provider, for {@link resolveVoice}: the engine's
 * own name, or for the `openai` provider the family its server speaks
 * (`TTS_VOICE_SET`).
 *
 * @example voiceEngineOf('openai', 'kokoro') // 'kokoro'
 */
export function voiceEngineOf(provider: string, voiceSet?: string): VoiceEngine | undefined {
  if (provider === 'openai') {
    return voiceSet === 'kokoro' || voiceSet === 'piper' ? voiceSet : 'openai';
  }
  return provider === 'flite' || provider === 'espeak' || provider === 'kyutai'
    ? provider
    : undefined;
}
