/**
 * Server-side turn detection over 16 kHz PCM16, with the semantics of the
 * OpenAI Realtime `turn_detection: { type: "server_vad", threshold,
 * prefix_padding_ms, silence_duration_ms }` setting, built on the WebRTC VAD.
 */
import { AudioFormatError, ConfigError } from '../errors.js';
import type { FrameVad, VadEngine, VadHangover, VadMode } from './vad.js';
import { VAD_FRAME_MS, VAD_FRAME_SAMPLES, VAD_SAMPLE_RATE, isVadEngine } from './vad.js';

/** Default `threshold` (OpenAI's default): WebRTC VAD mode 2. */
export const DEFAULT_VAD_THRESHOLD = 0.5;
/** Default audio kept before the start of speech, in ms (OpenAI's default). */
export const DEFAULT_PREFIX_PADDING_MS = 300;
/** Default non-speech that ends a turn, in ms (OpenAI's default). */
export const DEFAULT_SILENCE_DURATION_MS = 500;
/** Default shortest sound that can start a turn, in ms: shorter clicks and knocks never do. */
export const DEFAULT_MIN_SPEECH_MS = 100;

/** Samples per ms at {@link VAD_SAMPLE_RATE}. */
const SAMPLES_PER_MS = VAD_SAMPLE_RATE / 1000;
/** A detector without hangover (fakes, engines that report raw decisions). */
const NO_HANGOVER: VadHangover = { short: 0, long: 0, shortRunMax: Infinity };

/** Settings of a {@link TurnDetector}; every field may also be changed live with `update()`. */
export interface TurnDetectorOptions {
  /**
   * How sure the detector must be that a sound is speech, 0..1. Higher needs
   * louder, clearer speech and lets less noise through. It picks the WebRTC
   * VAD aggressiveness: [0, 0.25) → mode 0, [0.25, 0.5) → 1, [0.5, 0.75) → 2,
   * [0.75, 1] → 3. It applies only when the detector was given a
   * {@link VadEngine} (it then owns its VAD); a {@link FrameVad} keeps its own mode.
   * @defaultValue 0.5
   */
  threshold?: number;
  /** Audio before the start of speech handed out with `speech_started`, in ms. @defaultValue 300 */
  prefixPaddingMs?: number;
  /** Non-speech after the end of speech that ends the turn, in ms. @defaultValue 500 */
  silenceDurationMs?: number;
  /**
   * Sound shorter than this never starts a turn, in ms. Because the WebRTC VAD
   * keeps saying "speech" for its hangover (90 ms in modes 2–3, 140 ms in
   * modes 0–1) after any sound, a run of speech frames proves `minSpeechMs` of
   * sound only once it is `minSpeechMs` + hangover long: that is when
   * `speech_started` fires (its `audioStartMs` still points at the real start).
   * @defaultValue 100
   */
  minSpeechMs?: number;
}

/** What {@link TurnDetector.push} reports. */
export type TurnDetectorEvent =
  | {
      type: 'speech_started';
      /** Where speech began on the audio clock, in ms (without the padding). */
      audioStartMs: number;
      /**
       * Where `preroll` begins on the audio clock, in ms: `audioStartMs` minus
       * the padding that was available. OpenAI's wire `audio_start_ms` counts
       * from here (it includes the prefix padding).
       */
      prerollStartMs: number;
      /**
       * The audio from `prerollStartMs` through the end of the `push()` that
       * returned this event: padding, the speech that confirmed the turn, and
       * the rest of that push. Feed it, then every later push, to a recogniser
       * and it hears the whole utterance with its padding, whatever the chunk size.
       */
      preroll: Int16Array;
    }
  | {
      type: 'speech_stopped';
      /** Where speech ended on the audio clock, in ms (the VAD's hangover removed). */
      audioEndMs: number;
    };

interface ResolvedOptions {
  threshold: number;
  prefixPaddingMs: number;
  silenceDurationMs: number;
  minSpeechMs: number;
}

/** The WebRTC VAD mode a `threshold` maps to (see {@link TurnDetectorOptions.threshold}). */
export function thresholdToVadMode(threshold: number): VadMode {
  if (threshold < 0.25) return 0;
  if (threshold < 0.5) return 1;
  if (threshold < 0.75) return 2;
  return 3;
}

function checkMs(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ConfigError(
      `Turn detection option ${name} is invalid (${String(value)}): it must be a ` +
        'finite number of milliseconds, 0 or more; fix the turn_detection settings.',
    );
  }
  return value;
}

function resolve(base: ResolvedOptions, options: TurnDetectorOptions): ResolvedOptions {
  const next = { ...base };
  if (options.threshold !== undefined) {
    const t = options.threshold;
    if (typeof t !== 'number' || !(t >= 0 && t <= 1)) {
      throw new ConfigError(
        `Turn detection option threshold is invalid (${String(t)}): it must be a ` +
          'number from 0 to 1 (higher needs clearer speech); 0.5 suits most microphones.',
      );
    }
    next.threshold = t;
  }
  if (options.prefixPaddingMs !== undefined) {
    next.prefixPaddingMs = checkMs('prefixPaddingMs', options.prefixPaddingMs);
  }
  if (options.silenceDurationMs !== undefined) {
    next.silenceDurationMs = checkMs('silenceDurationMs', options.silenceDurationMs);
  }
  if (options.minSpeechMs !== undefined) {
    next.minSpeechMs = checkMs('minSpeechMs', options.minSpeechMs);
  }
  return next;
}

const DEFAULTS: ResolvedOptions = {
  threshold: DEFAULT_VAD_THRESHOLD,
  prefixPaddingMs: DEFAULT_PREFIX_PADDING_MS,
  silenceDurationMs: DEFAULT_SILENCE_DURATION_MS,
  minSpeechMs: DEFAULT_MIN_SPEECH_MS,
};

/**
 * Finds where the user starts and stops speaking in a stream of 16 kHz PCM16,
 * as OpenAI's `server_vad` does. Audio is cut into 10 ms frames (a remainder
 * waits for the next push, so chunk sizes never change the result) and each
 * frame is asked of the VAD:
 *
 * - idle → speaking when a run of speech frames reaches `minSpeechMs` plus
 *   the VAD's long hangover; `audioStartMs` is the first frame of the run.
 * - speaking → idle when `silenceDurationMs` has passed since the end of
 *   speech, which is the end of the last speech frame less the hangover the
 *   VAD added after it.
 *
 * Synchronous and allocation-light: one detector per session runs on every
 * audio frame. The audio clock counts every sample pushed since construction
 * (it keeps running across `reset()`, as the wire's ms do across a buffer clear).
 *
 * @example
 * const detector = new TurnDetector(await loadVad(), { silenceDurationMs: 500 });
 * for (const event of detector.push(pcm16k)) {
 *   if (event.type === 'speech_started') stt.write(event.preroll);
 *   else commitTurn(event.audioEndMs);
 * }
 */
export class TurnDetector {
  #vad: FrameVad;
  /** Set when the detector made its VAD and must free it (and may remake it on a new threshold). */
  #engine: VadEngine | undefined;
  #options: ResolvedOptions;
  #hangover: VadHangover;
  /** Speech frames in a row needed to start a turn. */
  #confirmFrames = 1;

  /** One frame being filled across pushes; standalone, so the VAD never copies it again. */
  #frame = new Int16Array(VAD_FRAME_SAMPLES);
  #frameFill = 0;
  /** Samples pushed since construction: the audio clock. */
  #pushed = 0;

  /** Recent audio for the preroll, a ring indexed by absolute sample number. */
  #ring = new Int16Array(0);
  /** The oldest sample the ring may hand out (moves on `reset()`). */
  #ringFloor = 0;

  #speaking = false;
  /** Absolute sample where the current run of speech frames began. */
  #runStart = 0;
  /** Speech frames in the current run (0 when the last frame was not speech). */
  #runFrames = 0;
  /** Absolute sample where speech ended (hangover removed); -1 while the run goes on. */
  #speechEnd = -1;

  /**
   * @param vad a {@link VadEngine} (the detector makes, owns and frees its VAD;
   *   `threshold` picks the mode) or a {@link FrameVad} (used as given; its
   *   caller frees it). Use one detector per audio stream.
   * @throws ConfigError when an option is out of range.
   */
  constructor(vad: FrameVad | VadEngine, options: TurnDetectorOptions = {}) {
    this.#options = resolve(DEFAULTS, options);
    if (isVadEngine(vad)) {
      this.#engine = vad;
      this.#vad = vad.create(thresholdToVadMode(this.#options.threshold));
    } else {
      this.#vad = vad;
    }
    this.#hangover = this.#vad.hangover ?? NO_HANGOVER;
    this.#configure();
  }

  /** Whether the user is speaking (between `speech_started` and `speech_stopped`). */
  get speaking(): boolean {
    return this.#speaking;
  }

  /**
   * Where the user's latest sound ended, on the audio clock (ms): the end of
   * the newest speech frame with the VAD's hangover taken off; -1 before any
   * speech. While a run goes on, the longest hangover is assumed, so a short
   * sound never reads as long.
   */
  get lastSpeechMs(): number {
    if (this.#runFrames > 0) {
      const runEnd = this.#runStart + this.#runFrames * VAD_FRAME_SAMPLES;
      const end = Math.max(
        this.#runStart + VAD_FRAME_SAMPLES,
        runEnd - this.#hangover.long * VAD_FRAME_SAMPLES,
      );
      return end / SAMPLES_PER_MS;
    }
    return this.#speechEnd < 0 ? -1 : this.#speechEnd / SAMPLES_PER_MS;
  }

  /** The audio clock: ms of audio pushed since the detector was made. */
  get audioMs(): number {
    return this.#pushed / SAMPLES_PER_MS;
  }

  /** The settings in force. */
  get options(): Required<TurnDetectorOptions> {
    return { ...this.#options };
  }

  /**
   * Adds audio (mono PCM16 at 16 kHz, any length) and returns what happened
   * in it, in order.
   *
   * @throws AudioFormatError when `pcm` is not an Int16Array.
   * @example
   * const events = detector.push(new Int16Array(320)); // 20 ms of silence → []
   */
  push(pcm: Int16Array): TurnDetectorEvent[] {
    if (!(pcm instanceof Int16Array)) {
      throw new AudioFormatError(
        `Turn detection got ${pcm === null ? 'null' : typeof pcm} instead of audio: ` +
          'push mono PCM16 at 16 kHz as an Int16Array (decode and resample first).',
      );
    }
    const events: TurnDetectorEvent[] = [];
    const chunkStart = this.#pushed;
    const frame = this.#frame;
    let fill = this.#frameFill;
    // Start samples of the speech_started events of this push, in order.
    let starts: number[] | undefined;
    for (let i = 0; i < pcm.length;) {
      // Copy by hand rather than subarray(): no view object per frame.
      const take = Math.min(VAD_FRAME_SAMPLES - fill, pcm.length - i);
      for (let j = 0; j < take; j++) frame[fill + j] = pcm[i + j]!;
      fill += take;
      i += take;
      if (fill === VAD_FRAME_SAMPLES) {
        fill = 0;
        const event = this.#step(this.#vad.isSpeech(frame), chunkStart + i - VAD_FRAME_SAMPLES);
        if (event !== undefined) {
          if (event.type === 'speech_started') (starts ??= []).push(this.#runStart);
          events.push(event);
        }
      }
    }
    this.#frameFill = fill;
    this.#pushed += pcm.length;
    // Prerolls reach to the end of this push, which only exists now.
    if (starts !== undefined) {
      let k = 0;
      for (const event of events) {
        if (event.type !== 'speech_started') continue;
        const from = this.#prerollStart(starts[k++]!, chunkStart);
        event.prerollStartMs = Math.round(from / SAMPLES_PER_MS);
        event.preroll = this.#preroll(from, chunkStart, pcm);
      }
    }
    this.#remember(pcm);
    return events;
  }

  /**
   * Forgets the turn in progress, the partial frame and the audio kept for the
   * preroll (e.g. after the client cleared its input buffer). The audio clock
   * and the VAD's noise model stay: the room has not changed.
   */
  reset(): void {
    this.#speaking = false;
    this.#runFrames = 0;
    this.#speechEnd = -1;
    this.#frameFill = 0;
    this.#ringFloor = this.#pushed;
  }

  /**
   * Changes settings live; fields left out keep their value. A new threshold
   * that maps to another mode replaces an owned VAD (its noise model restarts).
   *
   * @throws ConfigError when an option is out of range (nothing is changed).
   */
  update(options: TurnDetectorOptions): void {
    const next = resolve(this.#options, options);
    const mode = thresholdToVadMode(next.threshold);
    if (this.#engine !== undefined && mode !== this.#vad.mode) {
      const vad = this.#engine.create(mode);
      this.#vad.free();
      this.#vad = vad;
      this.#hangover = vad.hangover ?? NO_HANGOVER;
    }
    this.#options = next;
    this.#configure();
  }

  /** Frees the VAD the detector made (a {@link FrameVad} handed in is left to its owner). */
  free(): void {
    if (this.#engine !== undefined) this.#vad.free();
  }

  /** Derives frame counts and sizes the ring from the options. */
  #configure(): void {
    const minFrames = Math.ceil(this.#options.minSpeechMs / VAD_FRAME_MS);
    // A click of c frames reads as c + hangover speech frames, so only a run
    // longer than minFrames + the longest hangover proves minFrames of sound.
    this.#confirmFrames = Math.max(1, minFrames + (minFrames > 0 ? this.#hangover.long : 0));
    const padding = Math.round(this.#options.prefixPaddingMs * SAMPLES_PER_MS);
    // Enough for the padding plus the run that confirms speech and a partial frame.
    const capacity = padding + (this.#confirmFrames + 1) * VAD_FRAME_SAMPLES;
    if (capacity !== this.#ring.length) {
      const ring = new Int16Array(capacity);
      const keep = Math.min(capacity, this.#ring.length, this.#pushed - this.#ringFloor);
      for (let s = this.#pushed - keep; s < this.#pushed; s++) {
        ring[s % capacity] = this.#ring[s % this.#ring.length]!;
      }
      this.#ring = ring;
    }
  }

  /** Advances the state machine by one frame starting at absolute sample `start`. */
  #step(speech: boolean, start: number): TurnDetectorEvent | undefined {
    const end = start + VAD_FRAME_SAMPLES;
    if (speech) {
      if (this.#runFrames === 0) this.#runStart = start;
      this.#runFrames++;
      this.#speechEnd = -1;
      if (!this.#speaking && this.#runFrames >= this.#confirmFrames) {
        this.#speaking = true;
        const audioStartMs = Math.round(this.#runStart / SAMPLES_PER_MS);
        return {
          type: 'speech_started',
          audioStartMs,
          prerollStartMs: audioStartMs,
          preroll: new Int16Array(0),
        };
      }
      return undefined;
    }
    if (this.#runFrames > 0) {
      // The run just ended: take off the hangover the VAD added after the sound.
      const runStart = this.#runStart;
      this.#speechEnd = Math.max(
        runStart + VAD_FRAME_SAMPLES,
        start - this.#trim() * VAD_FRAME_SAMPLES,
      );
      this.#runFrames = 0;
    }
    if (
      this.#speaking &&
      this.#speechEnd >= 0 &&
      end - this.#speechEnd >= this.#options.silenceDurationMs * SAMPLES_PER_MS
    ) {
      this.#speaking = false;
      return { type: 'speech_stopped', audioEndMs: Math.round(this.#speechEnd / SAMPLES_PER_MS) };
    }
    return undefined;
  }

  /** Hangover frames at the end of the run that just ended. */
  #trim(): number {
    const { short, long, shortRunMax } = this.#hangover;
    const run = this.#runFrames;
    // A run of r real frames reads as r + short (r ≤ shortRunMax) or r + long.
    if (run - long > shortRunMax) return long;
    return Math.min(short, run - 1);
  }

  /** The first sample of the preroll of speech that began at `startSample`. */
  #prerollStart(startSample: number, chunkStart: number): number {
    const padding = Math.round(this.#options.prefixPaddingMs * SAMPLES_PER_MS);
    const floor = Math.max(this.#ringFloor, chunkStart - this.#ring.length);
    return Math.max(floor, startSample - padding);
  }

  /** Audio from absolute sample `from` through the end of this push (`pcm`, which began at `chunkStart`). */
  #preroll(from: number, chunkStart: number, pcm: Int16Array): Int16Array {
    const out = new Int16Array(this.#pushed - from);
    const ring = this.#ring;
    let o = 0;
    for (let s = from; s < chunkStart; s++) out[o++] = ring[s % ring.length]!;
    out.set(from > chunkStart ? pcm.subarray(from - chunkStart) : pcm, o);
    return out;
  }

  /** Keeps the tail of `pcm` in the ring for later prerolls. */
  #remember(pcm: Int16Array): void {
    const ring = this.#ring;
    const n = ring.length;
    if (n === 0) return;
    const keep = Math.min(n, pcm.length);
    const first = this.#pushed - keep;
    const offset = pcm.length - keep;
    for (let k = 0; k < keep; k++) ring[(first + k) % n] = pcm[offset + k]!;
  }
}
