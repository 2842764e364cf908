/**
 * Troupe web client, audio plumbing: the microphone (capture → 24 kHz PCM16
 * batches) and the speaker (gapless playback with a per-item count of what
 * was played). No DOM and no protocol here; app.js wires both to the socket
 * and the page.
 *
 * Both run an AudioWorklet at 24 kHz, the server's `audio/pcm` rate, so
 * Chromium and Safari resample the microphone natively and the reply plays
 * as it comes. Each has its own AudioContext: turning the microphone off
 * must not cut a reply that is still playing.
 */
/* global navigator, AudioContext, AudioWorkletNode, DOMException, atob, btoa */

/** The server's PCM rate (`{type: "audio/pcm", rate: 24000}` both ways). */
export const PCM_RATE_HZ = 24_000;
/** Samples of 24 kHz audio per millisecond. */
export const SAMPLES_PER_MS = PCM_RATE_HZ / 1000;
/** Microphone audio per `input_audio_buffer.append`. */
export const MIC_BATCH_MS = 40;

/** Characters per `String.fromCharCode` call when encoding (stays under engines' argument limits). */
const BASE64_CHUNK_BYTES = 0x8000;

/** A voice failure people can act on: `code` labels it in the error area. */
export class VoiceError extends Error {
  /**
   * @param {string} code stable label, e.g. `mic_denied`
   * @param {string} message what failed, why, and what to do
   */
  constructor(code, message) {
    super(message);
    this.name = 'VoiceError';
    this.code = code;
  }
}

// ---------------------------------------------------------------- base64

/**
 * Bytes → base64 (the wire form of audio).
 *
 * @example bytesToBase64(new Uint8Array([1, 2, 3])) // 'AQID'
 */
export function bytesToBase64(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += BASE64_CHUNK_BYTES) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + BASE64_CHUNK_BYTES));
  }
  return btoa(binary);
}

/**
 * Decodes base64 PCM16 little-endian deltas into samples. A delta may end in
 * the middle of a sample (the server splits audio wherever it likes), so the
 * odd byte is kept and joined to the next delta of the same stream.
 *
 * @example
 * const decoder = new Pcm16Decoder();
 * const samples = decoder.decode(event.delta); // Int16Array
 */
export class Pcm16Decoder {
  /** The low byte of a sample whose high byte is in the next delta, or -1. */
  #carry = -1;

  /** @throws {VoiceError} when `base64` is not base64. */
  decode(base64) {
    let binary;
    try {
      binary = atob(base64);
    } catch {
      throw new VoiceError(
        'bad_audio',
        'The server sent audio that is not base64; the reply cannot be played.',
      );
    }
    const start = this.#carry >= 0 ? -1 : 0;
    const total = binary.length - start;
    const samples = new Int16Array(total >> 1);
    const byteAt = (i) => (i < 0 ? this.#carry : binary.charCodeAt(i));
    for (let s = 0; s < samples.length; s++) {
      const i = start + s * 2;
      // Little-endian, sign-extended: the high byte carries the sign.
      samples[s] = ((byteAt(i + 1) << 24) >> 16) | byteAt(i);
    }
    this.#carry = total % 2 === 1 ? binary.charCodeAt(binary.length - 1) : -1;
    return samples;
  }
}

// ---------------------------------------------------------------- microphone

/** Mono, with the browser's echo cancelling and noise suppression: what the server's VAD and STT hear best. */
const MIC_CONSTRAINTS = {
  audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true },
};

/** A getUserMedia failure as something people can act on. */
function micError(error) {
  const name = error instanceof DOMException || error instanceof Error ? error.name : '';
  switch (name) {
    case 'NotAllowedError':
    case 'SecurityError':
      return new VoiceError(
        'mic_denied',
        'Microphone access was refused. Allow the microphone for this site (the icon in the address bar or the browser settings), then press the mic button again.',
      );
    case 'NotFoundError':
    case 'OverconstrainedError':
      return new VoiceError(
        'mic_not_found',
        'No microphone was found. Connect one (and check that the system sees it), then press the mic button again.',
      );
    case 'NotReadableError':
    case 'AbortError':
      return new VoiceError(
        'mic_unavailable',
        'The microphone could not be opened; another application may be using it. Close that application, then press the mic button again.',
      );
    default:
      return new VoiceError(
        'mic_failed',
        `The microphone could not be started (${name || 'error'}: ${error?.message ?? error}). Reload the page and try again.`,
      );
  }
}

function abortError() {
  return new DOMException('The microphone start was cancelled.', 'AbortError');
}

/** Whether an error is the cancellation of a start (not something to show). */
export function isAbort(error) {
  return error instanceof DOMException && error.name === 'AbortError';
}

/**
 * The microphone, streaming 24 kHz mono PCM16. Start it with
 * {@link startMicrophone}; `stop()` releases the device at once.
 */
export class MicCapture {
  #context;
  #stream;
  #source;
  #node;
  #stopped = false;

  /** @internal Use {@link startMicrophone}. */
  constructor(context, stream, source, node) {
    this.#context = context;
    this.#stream = stream;
    this.#source = source;
    this.#node = node;
  }

  /** Stops the tracks (the browser's recording light goes off) and the worklet. Idempotent. */
  stop() {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#node.port.postMessage({ type: 'stop' });
    this.#source.disconnect();
    for (const track of this.#stream.getTracks()) track.stop();
    // The last batch was posted before `close` takes effect; closing frees the
    // rendering thread.
    this.#context.close().catch(() => {});
  }
}

/**
 * Opens the microphone and streams it as PCM16 LE batches of
 * {@link MIC_BATCH_MS} ms at {@link PCM_RATE_HZ}. Call it from a click (the
 * AudioContext needs a user gesture).
 *
 * @param {object} options
 * @param {AbortSignal} options.signal cancels the start (then rejects with an AbortError)
 * @param {(pcm: ArrayBuffer) => void} options.onAudio each batch, PCM16 little-endian
 * @param {() => void} [options.onEnded] the device went away (unplugged, revoked)
 * @returns {Promise<MicCapture>}
 * @throws {VoiceError} with a message that says what to do
 * @example
 * const mic = await startMicrophone({ signal, onAudio: (pcm) => send(bytesToBase64(new Uint8Array(pcm))) });
 * mic.stop();
 */
export async function startMicrophone({ signal, onAudio, onEnded }) {
  if (!navigator.mediaDevices?.getUserMedia) {
    throw new VoiceError(
      'mic_unavailable',
      'This page cannot use a microphone: browsers allow it only on https:// pages and on localhost. Open Troupe over https (or on localhost) to talk.',
    );
  }
  if (typeof AudioWorkletNode === 'undefined') {
    throw new VoiceError(
      'audio_unsupported',
      'This browser cannot process audio here (no AudioWorklet). Use a current Chrome, Edge, Firefox or Safari.',
    );
  }
  if (signal.aborted) throw abortError();

  // The context first: it must be created while the click still counts as a
  // gesture, and audio that arrives before the worklet is wired is lost.
  let context = new AudioContext({ sampleRate: PCM_RATE_HZ, latencyHint: 'interactive' });
  let stream;
  try {
    await context.audioWorklet.addModule(new URL('./mic-worklet.js', import.meta.url));
    if (signal.aborted) throw abortError();
    try {
      stream = await navigator.mediaDevices.getUserMedia(MIC_CONSTRAINTS);
    } catch (error) {
      throw micError(error);
    }
    if (signal.aborted) throw abortError();
    let source;
    try {
      source = context.createMediaStreamSource(stream);
    } catch (error) {
      // Firefox refuses a microphone in a context whose rate differs from
      // the device's: capture at the device rate and resample in the worklet.
      if (!(error instanceof DOMException) || error.name !== 'NotSupportedError') throw error;
      await context.close();
      context = new AudioContext({ latencyHint: 'interactive' });
      await context.audioWorklet.addModule(new URL('./mic-worklet.js', import.meta.url));
      if (signal.aborted) throw abortError();
      source = context.createMediaStreamSource(stream);
    }
    const node = new AudioWorkletNode(context, 'troupe-mic', {
      numberOfInputs: 1,
      // No output: the node is pulled by the rendering thread anyway, and the
      // microphone must not play back through the speakers.
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: 'explicit',
      channelInterpretation: 'speakers',
      processorOptions: { targetRate: PCM_RATE_HZ, batchMs: MIC_BATCH_MS },
    });
    node.port.onmessage = (event) => {
      if (event.data instanceof ArrayBuffer) onAudio(event.data);
    };
    source.connect(node);
    await context.resume();
    const capture = new MicCapture(context, stream, source, node);
    for (const track of stream.getAudioTracks()) {
      track.addEventListener('ended', () => onEnded?.(), { once: true });
    }
    return capture;
  } catch (error) {
    for (const track of stream?.getTracks() ?? []) track.stop();
    context.close().catch(() => {});
    if (error instanceof VoiceError || isAbort(error)) throw error;
    throw new VoiceError(
      'audio_failed',
      `Audio processing could not start (${error?.name ?? 'error'}: ${error?.message ?? error}). Reload the page and try again.`,
    );
  }
}

// ---------------------------------------------------------------- speaker

/**
 * Plays reply audio gaplessly and reports what was played. Create it from a
 * click (browsers start audio only after a gesture); `push` may be called at
 * once, audio waits until the worklet is loaded.
 *
 * @example
 * const player = new AudioPlayer({ onProgress: (played, playing) => …, onError: show });
 * player.push('item_1', decoder.decode(event.delta));
 * const { dropped } = await player.interrupt(); // barge-in
 */
export class AudioPlayer {
  #context;
  /** The worklet node, once loaded. */
  #node = null;
  /** Pushes made before the worklet was loaded. */
  #early = [];
  #onProgress;
  #clears = new Map();
  #nextClearId = 1;
  #closed = false;

  /**
   * @param {object} options
   * @param {(played: Array<[string, number]>, playing: boolean) => void} options.onProgress
   *   samples played per item since the last call, and whether audio is still queued
   * @param {(error: VoiceError) => void} options.onError the speaker could not start
   */
  constructor({ onProgress, onError }) {
    this.#onProgress = onProgress;
    this.#context = new AudioContext({ sampleRate: PCM_RATE_HZ, latencyHint: 'interactive' });
    this.#start().catch((error) => {
      this.#closed = true;
      onError(
        new VoiceError(
          'speaker_failed',
          `Replies cannot be played (${error?.name ?? 'error'}: ${error?.message ?? error}); their text still shows. Reload the page to try again.`,
        ),
      );
    });
  }

  async #start() {
    await this.#context.audioWorklet.addModule(new URL('./player-worklet.js', import.meta.url));
    if (this.#closed) return;
    const node = new AudioWorkletNode(this.#context, 'troupe-player', {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
    });
    node.port.onmessage = (event) => this.#onMessage(event.data);
    node.connect(this.#context.destination);
    this.#node = node;
    for (const message of this.#early) this.#post(message);
    this.#early = [];
    await this.#context.resume();
  }

  #onMessage(message) {
    if (message?.type === 'progress') {
      this.#onProgress(message.played, message.playing);
    } else if (message?.type === 'cleared') {
      this.#onProgress(message.played, false);
      this.#clears.get(message.id)?.(new Map(message.dropped));
      this.#clears.delete(message.id);
    }
  }

  #post(message, transfer) {
    if (this.#node) this.#node.port.postMessage(message, transfer ?? []);
    else this.#early.push(message);
  }

  /** Queues an item's samples after everything already queued. */
  push(itemId, samples) {
    if (this.#closed || samples.length === 0) return;
    // A context created before a gesture starts suspended; any later push may
    // be the first chance to start it.
    if (this.#context.state === 'suspended') this.#context.resume().catch(() => {});
    this.#post({ type: 'push', itemId, samples }, [samples.buffer]);
  }

  /**
   * Stops at once and drops the queue. Resolves after the worklet has
   * reported the samples it played up to the cut (through `onProgress`), with
   * the samples dropped per item.
   *
   * @returns {Promise<{dropped: Map<string, number>}>}
   */
  interrupt() {
    if (this.#closed) return Promise.resolve({ dropped: new Map() });
    if (!this.#node) {
      const dropped = new Map();
      for (const m of this.#early)
        dropped.set(m.itemId, (dropped.get(m.itemId) ?? 0) + m.samples.length);
      this.#early = [];
      return Promise.resolve({ dropped });
    }
    const id = this.#nextClearId++;
    return new Promise((resolve) => {
      this.#clears.set(id, (dropped) => resolve({ dropped }));
      this.#post({ type: 'clear', id });
    });
  }

  /** Stops playing and frees the audio thread. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#node?.port.postMessage({ type: 'close' });
    this.#context.close().catch(() => {});
    for (const resolve of this.#clears.values()) resolve(new Map());
    this.#clears.clear();
  }
}
