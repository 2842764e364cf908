/**
 * The small interfaces sessions use for speech. Audio inside Troupe is mono
 * PCM16 as `Int16Array` at a stated sample rate; codecs and resampling happen
 * at the edges (`audio/`). Providers are handed to sessions, so tests swap in
 * fakes and deployments pick engines by configuration.
 */

import type { SegmentUnit } from './chunker.js';
import type { VoiceEngine } from './voices.js';

/** Whether an engine can be reached, for `/health`. */
export interface ProviderHealth {
  ok: boolean;
  /** Why not, or what was checked. */
  detail?: string;
}

// ── Speech to text ──────────────────────────────────────────────────────────

/** What an STT stream reports while audio flows. */
export type SttEvent =
  /** More text of the current utterance (appended to what came before). */
  | { type: 'text'; text: string; startMs?: number }
  /**
   * The engine's estimate that the user has finished their turn (Kyutai's
   * pause prediction), 0..1. Only from providers with `reportsPauses`.
   */
  | { type: 'pause'; probability: number }
  /** The stream broke; the session reports it and opens a new one on the next speech. */
  | { type: 'error'; error: Error };

/** Options of {@link SttProvider.open}. */
export interface SttOpenOptions {
  /** Closes the stream (session end). */
  signal: AbortSignal;
  onEvent: (event: SttEvent) => void;
  /** BCP-47 hint, when the engine takes one. */
  language?: string;
}

/**
 * One session's recognition stream. Audio goes in at the provider's
 * `sampleRate`; `commit()` ends the current utterance and gives its text.
 */
export interface SttStream {
  /** Adds audio of the current utterance (mono PCM16 at `provider.sampleRate`). */
  write(pcm: Int16Array): void;
  /**
   * Ends the utterance: resolves with its whole text ('' when nothing was
   * heard). The stream stays open for the next utterance. Rejects with an
   * Error naming the provider when the engine fails.
   */
  commit(): Promise<string>;
  /** Drops the audio and text of the current utterance. */
  clear(): void;
  /** Releases the stream; later calls are ignored. */
  close(): void;
}

/** A speech-to-text engine. */
export interface SttProvider {
  /** `pocketsphinx` | `openai` | `kyutai` | a fake's name; a metrics label. */
  readonly name: string;
  /** The rate `write()` takes. */
  readonly sampleRate: number;
  /**
   * The engine wants all audio, silence included (a streaming model), and
   * may report pauses. Otherwise the session sends only speech (VAD-gated,
   * with its prefix padding) or, with manual turns, what was appended.
   */
  readonly continuous: boolean;
  /** Whether the stream sends `pause` events usable for endpointing. */
  readonly reportsPauses: boolean;
  open(options: SttOpenOptions): SttStream;
  health(signal?: AbortSignal): Promise<ProviderHealth>;
  /**
   * Loads what the first utterance would otherwise wait for (a model, a
   * worker). The server calls it at start, in the background; optional.
   */
  warm?(signal?: AbortSignal): Promise<void>;
  /** Frees engines and workers. */
  close(): Promise<void>;
}

// ── Text to speech ──────────────────────────────────────────────────────────

/** What a TTS stream gives out, in order. */
export type TtsEvent =
  /**
   * Audio (mono PCM16 at `provider.sampleRate`). `text` is set on the first
   * chunk of each pushed segment: the segment whose speech starts here.
   */
  | { type: 'audio'; pcm: Int16Array; text?: string }
  /** A word and where its speech starts, in samples from the stream's start (when the engine knows). */
  | { type: 'word'; text: string; startSample: number }
  /** Synthesis failed; the stream is over. */
  | { type: 'error'; error: Error };

/** Options of {@link TtsProvider.open}. */
export interface TtsOpenOptions {
  /** The provider's voice name (the character's `voice[provider.name]`), else its default. */
  voice?: string;
  /**
   * Speaking speed as a multiple of the voice's own (`audio.output.speed`,
   * 0.25–1.5). Engines that cannot change speed ignore it. @defaultValue 1
   */
  speed?: number;
  /** The turn's signal: stops synthesis at once. */
  signal: AbortSignal;
  onEvent: (event: TtsEvent) => void;
}

/** One response's speech: text in as it streams, audio out. */
export interface TtsStream {
  /** Adds a speakable segment, already cleaned: a clause or sentence, or a word (`segmentUnit`). */
  push(text: string): void;
  /** No more text: resolves when all audio has been given out (or the signal fired). */
  end(): Promise<void>;
}

/** A text-to-speech engine. */
export interface TtsProvider {
  /** `espeak` | `openai` | `kyutai` | a fake's name; a metrics label and the key of `character.voice`. */
  readonly name: string;
  /** The rate of the audio it gives out. */
  readonly sampleRate: number;
  /**
   * What `push()` should get: `clause` (a clause or sentence, the default) or
   * `word` (each word as soon as the LLM has written it, for engines that
   * stream words in: Kyutai). The session gives it to its `SpeechChunker`.
   */
  readonly segmentUnit?: SegmentUnit;
  /** Whose voice names it takes, for `resolveVoice` (voices.ts); unset = names are passed as they are. */
  readonly voiceEngine?: VoiceEngine;
  /**
   * The voice it speaks with when a stream names none (its configured voice,
   * else its own default), as sessions show it; unset when the engine's
   * server picks without saying which (Kyutai without a configured voice).
   */
  readonly defaultVoice?: string | undefined;
  open(options: TtsOpenOptions): TtsStream;
  health(signal?: AbortSignal): Promise<ProviderHealth>;
  /** Starts what the first reply would otherwise wait for; optional (see {@link SttProvider.warm}). */
  warm?(signal?: AbortSignal): Promise<void>;
  /** Frees engines and workers. */
  close(): Promise<void>;
}
