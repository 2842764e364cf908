/**
 * Frame-level voice activity detection: the WebRTC VAD (libfvad compiled to a
 * 15 KB WASM module by `@ozymandiasthegreat/vad`). It answers "is there speech
 * in these 10 ms?" for 16 kHz PCM16; {@link TurnDetector} builds turns on top.
 */
import VADBuilder from '@ozymandiasthegreat/vad';
import type { VAD } from '@ozymandiasthegreat/vad';
import { AudioFormatError, ConfigError, SpeechProviderError } from '../errors.js';

/** The sample rate every {@link FrameVad} takes, in Hz. */
export const VAD_SAMPLE_RATE = 16_000;
/**
 * Length of one VAD frame, in ms. libfvad accepts 10, 20 or 30 ms; 10 ms gives
 * the finest clock for turn start/stop times and still runs far faster than
 * real time.
 */
export const VAD_FRAME_MS = 10;
/** Samples in one VAD frame at {@link VAD_SAMPLE_RATE} (160). */
export const VAD_FRAME_SAMPLES = (VAD_SAMPLE_RATE * VAD_FRAME_MS) / 1000;

/** The provider name used in errors. */
const VAD_PROVIDER = 'webrtc-vad';
/** libfvad's return value for a frame with voice. */
const FVAD_VOICE = 1;
/** libfvad's return value for a frame it could not process. */
const FVAD_ERROR = -1;

/**
 * WebRTC VAD aggressiveness: 0 (quality, most permissive) … 3 (very
 * aggressive, fewest false positives, may miss quiet speech).
 */
export type VadMode = 0 | 1 | 2 | 3;

/**
 * How long a detector keeps answering "speech" after the sound has stopped,
 * in frames. The WebRTC VAD adds this "hangover" on purpose (to bridge short
 * gaps inside words); turn detection needs it to tell a click from speech and
 * to place the end of speech where the sound really ended.
 */
export interface VadHangover {
  /** Frames of hangover after a run of at most {@link shortRunMax} real speech frames. */
  readonly short: number;
  /** Frames of hangover after a longer run. */
  readonly long: number;
  /** The longest run, in frames, that still gets the {@link short} hangover. */
  readonly shortRunMax: number;
}

/**
 * The WebRTC VAD's hangover for 10 ms frames, by mode. From libfvad's
 * `vad_core.c` (`kOverHangMax1*`/`kOverHangMax2*`, index 0 = 10 ms, and
 * `kMaxSpeechFrames` = 6); the tests check these against the real engine.
 */
export const WEBRTC_VAD_HANGOVER: Readonly<Record<VadMode, VadHangover>> = Object.freeze({
  0: { short: 8, long: 14, shortRunMax: 6 },
  1: { short: 8, long: 14, shortRunMax: 6 },
  2: { short: 6, long: 9, shortRunMax: 6 },
  3: { short: 6, long: 9, shortRunMax: 6 },
});

/** One stream's voice detector; it keeps a noise model, so use one per audio stream. */
export interface FrameVad {
  /** The aggressiveness it was created with. */
  readonly mode: VadMode;
  /** Its hangover, when it has one (fakes may leave it out: none). */
  readonly hangover?: VadHangover;
  /**
   * Whether one frame of exactly {@link VAD_FRAME_SAMPLES} samples at
   * {@link VAD_SAMPLE_RATE} holds speech. Throws `AudioFormatError` on any other
   * length.
   */
  isSpeech(frame: Int16Array): boolean;
  /** Releases the WASM memory; later calls throw. Calling it twice is harmless. */
  free(): void;
}

/** The loaded WASM module: a factory of per-stream detectors. */
export interface VadEngine {
  /**
   * A new detector with its own state.
   *
   * @example
   * const vad = (await loadVad()).create(2);
   * const speech = vad.isSpeech(frame160);
   * vad.free();
   */
  create(mode: VadMode): FrameVad;
}

/** Whether `value` is a {@link VadEngine} rather than a {@link FrameVad}. */
export function isVadEngine(value: FrameVad | VadEngine): value is VadEngine {
  return typeof (value as Partial<VadEngine>).create === 'function';
}

/** The VAD class the package builds; `typeof VAD` from its typings. */
type VadClass = typeof VAD;

class WebRtcFrameVad implements FrameVad {
  readonly mode: VadMode;
  readonly hangover: VadHangover;
  #vad: VAD | null;
  /**
   * The package copies `frame.buffer` whole into WASM memory, so a subarray of
   * a larger buffer would overflow its allocation. Such frames are copied here
   * first; one scratch frame per detector keeps this allocation-free.
   */
  #scratch = new Int16Array(VAD_FRAME_SAMPLES);

  constructor(Vad: VadClass, mode: VadMode) {
    this.mode = mode;
    this.hangover = WEBRTC_VAD_HANGOVER[mode];
    this.#vad = new Vad(mode, VAD_SAMPLE_RATE);
  }

  isSpeech(frame: Int16Array): boolean {
    const vad = this.#vad;
    if (vad === null) {
      throw new SpeechProviderError(
        'stt',
        VAD_PROVIDER,
        'VAD frame check failed: this detector was freed; create a new one with VadEngine.create().',
      );
    }
    if (!(frame instanceof Int16Array) || frame.length !== VAD_FRAME_SAMPLES) {
      throw new AudioFormatError(
        `VAD frame rejected: expected an Int16Array of ${VAD_FRAME_SAMPLES} samples ` +
          `(${VAD_FRAME_MS} ms at ${VAD_SAMPLE_RATE} Hz), got ${describe(frame)}; ` +
          'cut the audio into frames of that length (TurnDetector does this for you).',
      );
    }
    let standalone = frame;
    if (frame.byteOffset !== 0 || frame.buffer.byteLength !== frame.byteLength) {
      this.#scratch.set(frame);
      standalone = this.#scratch;
    }
    const result: number = vad.processFrame(standalone);
    if (result === FVAD_ERROR) {
      throw new SpeechProviderError(
        'stt',
        VAD_PROVIDER,
        'VAD frame check failed: libfvad returned an error for a valid frame; ' +
          'this points to a broken WASM build — reinstall @ozymandiasthegreat/vad.',
      );
    }
    return result === FVAD_VOICE;
  }

  free(): void {
    this.#vad?.destroy();
    this.#vad = null;
  }
}

function describe(frame: unknown): string {
  if (ArrayBuffer.isView(frame)) {
    const length = (frame as unknown as { length?: number }).length;
    return `${frame.constructor.name} of ${length ?? frame.byteLength} elements`;
  }
  return frame === null ? 'null' : typeof frame;
}

/** Checks a mode given at run time (callers in plain JS, or settings from the wire). */
export function assertVadMode(mode: unknown): asserts mode is VadMode {
  if (mode !== 0 && mode !== 1 && mode !== 2 && mode !== 3) {
    throw new ConfigError(
      `VAD mode ${String(mode)} is invalid: the WebRTC VAD takes 0, 1, 2 or 3; ` +
        'pass one of those (2 suits most microphones).',
    );
  }
}

let enginePromise: Promise<VadEngine> | undefined;

async function buildEngine(): Promise<VadEngine> {
  let Vad: VadClass;
  try {
    Vad = await VADBuilder();
  } catch (error) {
    throw new SpeechProviderError(
      'stt',
      VAD_PROVIDER,
      'Loading the WebRTC VAD failed: the WASM module of @ozymandiasthegreat/vad ' +
        'could not be read or compiled; check that the package is installed intact.',
      { cause: error },
    );
  }
  return {
    create(mode: VadMode): FrameVad {
      assertVadMode(mode);
      return new WebRtcFrameVad(Vad, mode);
    },
  };
}

/**
 * Loads the WebRTC VAD WASM module, once per process (later calls share it).
 * The signal only stops this caller's wait; the shared load goes on.
 *
 * @example
 * const engine = await loadVad();
 * const vad = engine.create(2);
 * for (let i = 0; i + VAD_FRAME_SAMPLES <= pcm.length; i += VAD_FRAME_SAMPLES) {
 *   console.log(vad.isSpeech(pcm.subarray(i, i + VAD_FRAME_SAMPLES)));
 * }
 */
export function loadVad(signal?: AbortSignal): Promise<VadEngine> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (enginePromise === undefined) {
    const loading = buildEngine();
    enginePromise = loading;
    // A failed load is not cached: the next caller tries again.
    loading.catch(() => {
      if (enginePromise === loading) enginePromise = undefined;
    });
  }
  const shared = enginePromise;
  if (signal === undefined) return shared;
  return new Promise<VadEngine>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    shared.then(
      (engine) => {
        signal.removeEventListener('abort', onAbort);
        resolve(engine);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
