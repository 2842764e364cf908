/**
 * The chat client's voice: the bookkeeping of a voice session (barge-in,
 * when a spoken turn is over), and the parts it uses, exported from here:
 * finding a player and a recorder on PATH (voice-commands.ts), playing the
 * character's speech as it arrives and knowing how much of it was heard, or
 * writing it to a WAV file (voice-player.ts), saying a WAV file in real time
 * and streaming the microphone (voice-input.ts).
 *
 * Audio on the wire is base64 PCM16 LE mono at 24 kHz both ways, so players
 * and recorders are asked for exactly that and no conversion happens here
 * except resampling a `--wav` file (src/voice/audio/resample.ts).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { Pcm16Decoder } from '../voice/audio/pcm.js';
import { AUDIO_EVENT_ID_PREFIX, type ServerEvent } from './chat-render.js';

import type { AudioPlayer, VoiceOutFile } from './voice-player.js';

export { AUDIO_EVENT_ID_PREFIX };
export {
  AUDIO_CHUNK_MS,
  PLAYER_DRAIN_GRACE_MS,
  TRAILING_SILENCE_MS,
  VOICE_SAMPLE_RATE_HZ,
} from './voice-format.js';
export {
  NO_PLAYER_MESSAGE,
  NO_RECORDER_MESSAGE,
  PLAYERS,
  RECORDERS,
  chooseRecorder,
  choosePlayer,
  findCommand,
} from './voice-commands.js';
export type { AudioCommand, AudioCommandSpec } from './voice-commands.js';
export { AudioPlayer, PlaybackClock, VoiceOutFile } from './voice-player.js';
export type { AudioPlayerOptions, PlayedItem } from './voice-player.js';
export { MicRecorder, loadSpeechFile, sendInRealTime, speechChunks } from './voice-input.js';
export type { MicRecorderOptions, SpeechFile } from './voice-input.js';

/** Options of {@link VoiceSession}. */
export interface VoiceSessionOptions {
  /** Sends a client event (the connection adds the `event_id`). */
  send: (event: Record<string, unknown>) => void;
  /** Plays the character's speech; none when nothing can play. */
  player?: AudioPlayer;
  /** Keeps the character's speech (`--voice-out`). */
  out?: VoiceOutFile;
  /** The server refused the client's audio (`audio_not_supported`, bad audio): stop sending it. */
  onAudioRefused?: () => void;
}

/** Server events that carry the character's audio (GA and beta names). */
const AUDIO_DELTA_TYPES = new Set(['response.output_audio.delta', 'response.audio.delta']);

/**
 * Follows a voice conversation from the server's events: plays and keeps the
 * character's audio, stops it when the user barges in (or cancels) and tells
 * the server how much was heard, and knows when a spoken turn is fully
 * answered (for `--wav`).
 *
 * @example
 * ```ts
 * const voice = new VoiceSession({ send: conn.send, player, out });
 * conn.onEvent((event) => voice.handle(event));
 * await voice.settled(signal); // every utterance heard, transcribed and answered
 * ```
 */
export class VoiceSession {
  readonly #options: VoiceSessionOptions;
  readonly #decoder = new Pcm16Decoder();
  #responding = false;
  /** Audio of the response in flight is dropped: the user interrupted it. */
  #dropping = false;
  #speaking = false;
  #utterances = 0;
  #withWords = 0;
  #responses = 0;
  /** Utterances ended (stopped or committed) whose transcript has not come yet. */
  #transcribing = new Set<string>();
  /** Utterances with words whose response has not started yet. */
  #answersDue = 0;
  #audioRefused = false;
  #waiters = new Set<() => void>();

  constructor(options: VoiceSessionOptions) {
    this.#options = options;
  }

  /** Whether the server has heard the user start speaking at least once. */
  get heardSpeech(): boolean {
    return this.#utterances > 0;
  }

  /** Utterances the server turned into words (each gets an answer). */
  get utterancesWithWords(): number {
    return this.#withWords;
  }

  /** Responses that finished since the session began. */
  get responses(): number {
    return this.#responses;
  }

  /** Whether the user is speaking, as far as the server's VAD knows. */
  get speaking(): boolean {
    return this.#speaking;
  }

  /** Whether a response is in flight (between `response.created` and `response.done`). */
  get responding(): boolean {
    return this.#responding;
  }

  /** Whether the server refused the client's audio. */
  get audioRefused(): boolean {
    return this.#audioRefused;
  }

  /** Whether the character's speech is still playing. */
  get playing(): boolean {
    return this.#options.player?.playing ?? false;
  }

  /**
   * Nothing is pending: the user is not speaking, every utterance is
   * transcribed, and every one with words has been answered.
   */
  get idle(): boolean {
    return (
      !this.#speaking &&
      this.#transcribing.size === 0 &&
      this.#answersDue === 0 &&
      !this.#responding
    );
  }

  /** Handles one server event (all of them pass through; most are ignored). */
  handle(event: ServerEvent): void {
    const type = event.type;
    if (AUDIO_DELTA_TYPES.has(type)) this.#audio(event);
    else if (type === 'response.created') {
      this.#responding = true;
      this.#dropping = false;
      if (this.#answersDue > 0) this.#answersDue--;
    } else if (type === 'response.done') {
      this.#responding = false;
      this.#dropping = false;
      this.#responses++;
      this.#decoder.reset();
    } else if (type === 'input_audio_buffer.speech_started') {
      this.#speaking = true;
      this.#utterances++;
      // The server interrupts its own response; the client stops what is still
      // playing, which may be a response the server finished long ago.
      if (this.playing || this.#responding) this.stopPlayback();
    } else if (type === 'input_audio_buffer.speech_stopped') {
      this.#speaking = false;
      // The server commits the utterance right after this, perhaps in a later
      // read: pending from now on, so the session never looks idle in between.
      if (typeof event.item_id === 'string') this.#transcribing.add(event.item_id);
    } else if (type === 'input_audio_buffer.committed') {
      this.#speaking = false;
      if (typeof event.item_id === 'string') this.#transcribing.add(event.item_id);
    } else if (
      type === 'conversation.item.input_audio_transcription.completed' ||
      type === 'conversation.item.input_audio_transcription.failed'
    ) {
      const known = typeof event.item_id === 'string' && this.#transcribing.delete(event.item_id);
      const words = typeof event.transcript === 'string' && event.transcript.trim() !== '';
      if (known && words && type.endsWith('.completed')) {
        this.#answersDue++;
        this.#withWords++;
      }
    } else if (type === 'error') {
      const error = (event.error ?? {}) as { event_id?: unknown };
      if (typeof error.event_id === 'string' && error.event_id.startsWith(AUDIO_EVENT_ID_PREFIX)) {
        if (!this.#audioRefused) {
          this.#audioRefused = true;
          this.#options.onAudioRefused?.();
        }
      }
    }
    this.#wake();
  }

  #audio(event: ServerEvent): void {
    if (this.#dropping || typeof event.delta !== 'string') return;
    let pcm: Int16Array;
    try {
      pcm = this.#decoder.push(event.delta);
    } catch {
      return; // a broken frame from the server: skip it rather than play noise
    }
    const itemId = typeof event.item_id === 'string' ? event.item_id : '';
    this.#options.player?.write(pcm, itemId);
    this.#options.out?.push(pcm);
  }

  /**
   * Stops the character's speech now (barge-in, Ctrl+C): the player drops
   * its buffer, the rest of the response's audio is ignored, and the server
   * is told how much of each cut item was heard.
   */
  stopPlayback(): void {
    if (this.#responding) this.#dropping = true;
    this.#decoder.reset();
    const cut = this.#options.player?.interrupt() ?? [];
    for (const { itemId, playedMs } of cut) {
      if (itemId === '') continue;
      this.#options.send({
        type: 'conversation.item.truncate',
        item_id: itemId,
        content_index: 0,
        audio_end_ms: Math.floor(playedMs),
      });
    }
  }

  #wake(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  /** Resolves once `ready()` holds after some event (or now); rejects when the signal fires. */
  #until(ready: () => boolean, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (signal.aborted) return finish(signal.reason);
        if (ready()) finish();
      };
      const finish = (reason?: unknown): void => {
        this.#waiters.delete(check);
        signal.removeEventListener('abort', check);
        if (reason === undefined) resolve();
        else reject(reason instanceof Error ? reason : new Error(String(reason)));
      };
      this.#waiters.add(check);
      signal.addEventListener('abort', check, { once: true });
      check();
    });
  }

  /**
   * Resolves when every utterance so far is transcribed and answered (see
   * {@link idle}); rejects when the signal fires (the socket closed, Ctrl+C).
   */
  settled(signal: AbortSignal): Promise<void> {
    return this.#until(() => this.idle, signal);
  }

  /**
   * Resolves when no response is in flight and its speech has played out,
   * e.g. before saying a `--wav` file after a spoken greeting.
   */
  async quiet(signal: AbortSignal): Promise<void> {
    for (;;) {
      await this.#until(() => !this.#responding, signal);
      const player = this.#options.player;
      if (!player?.playing) return;
      // Playback has no events of its own: wait out the audio the clock says is left.
      await delay(Math.max(1, player.remainingMs), undefined, { signal });
    }
  }
}
