/**
 * Troupe web client, microphone side: an AudioWorklet processor that turns
 * the microphone's float samples into mono PCM16 little-endian at the
 * server's rate (24 kHz) and posts them in batches (~40 ms), so the page
 * sends a few dozen small frames a second instead of one per render quantum.
 *
 * Runs on the audio rendering thread; loaded by voice.js with
 * `audioWorklet.addModule`. Messages in: `{type: 'stop'}` (ends it).
 * Messages out: an `ArrayBuffer` of PCM16 LE bytes.
 */
/* global AudioWorkletProcessor, registerProcessor, sampleRate */

/** The rate the server takes (`audio/pcm` in the session). */
const DEFAULT_TARGET_RATE_HZ = 24_000;
/** How much audio goes in one message. */
const DEFAULT_BATCH_MS = 40;
/** Bytes per PCM16 sample. */
const BYTES_PER_SAMPLE = 2;

/** Float sample (-1..1, possibly beyond) → int16, clamped. */
function toInt16(sample) {
  const s = sample > 1 ? 1 : sample < -1 ? -1 : sample;
  // Asymmetric scale so both -1 and 1 map onto the int16 range exactly.
  return s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff);
}

class MicProcessor extends AudioWorkletProcessor {
  /** Input samples per output sample (1 when the context already runs at the target rate). */
  #step;
  #batchSamples;
  #batch;
  #view;
  #filled = 0;
  /**
   * Where the next output sample falls, in input samples from the start of
   * the current block; -1..0 means between the previous block's last sample
   * (`#previous`) and this block's first. Only used when resampling.
   */
  #phase = 0;
  #previous = 0;
  #stopped = false;

  constructor(options) {
    super();
    const settings = options?.processorOptions ?? {};
    const targetRate = settings.targetRate ?? DEFAULT_TARGET_RATE_HZ;
    this.#step = sampleRate / targetRate;
    this.#batchSamples = Math.max(
      1,
      Math.round((targetRate * (settings.batchMs ?? DEFAULT_BATCH_MS)) / 1000),
    );
    this.#newBatch();
    this.port.onmessage = (event) => {
      // The page stops listening at the same moment, so a partial batch is
      // not worth posting.
      if (event.data?.type === 'stop') this.#stopped = true;
    };
  }

  process(inputs) {
    if (this.#stopped) return false;
    // Mono: the node downmixes (channelCount 1, explicit). No channel means no
    // source is connected yet, or the track ended; keep the node alive.
    const channel = inputs[0]?.[0];
    if (!channel) return true;
    if (this.#step === 1) {
      for (let i = 0; i < channel.length; i++) this.#put(channel[i]);
    } else {
      this.#resample(channel);
    }
    return true;
  }

  /**
   * Linear interpolation to the target rate. Only browsers that cannot run a
   * microphone into a 24 kHz context (Firefox) take this path; Chromium and
   * Safari resample natively. Good enough for speech recognition, which
   * resamples again to 16 kHz with a proper filter on the server.
   */
  #resample(block) {
    let t = this.#phase;
    const last = block.length - 1;
    while (t < last) {
      const i = Math.floor(t);
      const frac = t - i;
      const a = i < 0 ? this.#previous : block[i];
      const b = block[i + 1];
      this.#put(a + (b - a) * frac);
      t += this.#step;
    }
    this.#phase = t - block.length;
    this.#previous = block[last];
  }

  #put(sample) {
    this.#view.setInt16(this.#filled * BYTES_PER_SAMPLE, toInt16(sample), true);
    this.#filled += 1;
    if (this.#filled === this.#batchSamples) this.#flush();
  }

  #flush() {
    const bytes = this.#batch;
    // Transferred, not copied; a fresh batch takes its place.
    this.port.postMessage(bytes, [bytes]);
    this.#newBatch();
  }

  #newBatch() {
    this.#batch = new ArrayBuffer(this.#batchSamples * BYTES_PER_SAMPLE);
    this.#view = new DataView(this.#batch);
    this.#filled = 0;
  }
}

registerProcessor('troupe-mic', MicProcessor);
