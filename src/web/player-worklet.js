/**
 * Troupe web client, speaker side: an AudioWorklet processor that plays
 * queued PCM16 chunks back to back (no gaps between deltas, whatever their
 * size) and counts, per conversation item, how many samples it actually
 * played, so a barge-in can tell the server exactly what was heard.
 *
 * Runs on the audio rendering thread; loaded by voice.js. The context runs
 * at the audio's own rate (24 kHz), so samples play as they are.
 *
 * Messages in:
 * - `{type: 'push', itemId, samples: Int16Array}` — queue audio of an item.
 * - `{type: 'clear', id}` — drop everything queued, at once.
 * - `{type: 'close'}` — end the processor.
 *
 * Messages out:
 * - `{type: 'progress', played: [[itemId, samples], …], playing}` — samples
 *   played since the last report, per item, and whether audio is still queued.
 * - `{type: 'cleared', id, played, dropped: [[itemId, samples], …]}` — the
 *   answer to `clear`: the last played samples and what was thrown away.
 */
/* global AudioWorkletProcessor, registerProcessor, sampleRate */

/** Report progress every this many render quanta while playing (8 × 128 samples ≈ 43 ms at 24 kHz). */
const PROGRESS_EVERY_QUANTA = 8;
/** Int16 → float. */
const INT16_SCALE = 1 / 0x8000;
/**
 * Playback starts (and restarts after running dry) once this much audio is
 * queued, or once it has waited this long: a jitter buffer, so deltas that
 * arrive a little late do not chop the speech into pieces.
 */
const PREBUFFER_MS = 60;

class PlayerProcessor extends AudioWorkletProcessor {
  /** Chunks to play, oldest first: `{itemId, samples, offset}`. */
  #queue = [];
  /** Samples in the queue not yet played. */
  #queued = 0;
  /** Samples of silence output while waiting to start. */
  #waited = 0;
  #prebuffer = Math.round((PREBUFFER_MS * sampleRate) / 1000);
  /** Samples played since the last report, per item. */
  #unreported = new Map();
  #quanta = 0;
  #playing = false;
  #closed = false;

  constructor() {
    super();
    this.port.onmessage = (event) => this.#onMessage(event.data);
  }

  #onMessage(message) {
    switch (message?.type) {
      case 'push':
        if (message.samples?.length > 0) {
          this.#queue.push({ itemId: message.itemId, samples: message.samples, offset: 0 });
          this.#queued += message.samples.length;
        }
        break;
      case 'clear': {
        const dropped = new Map();
        for (const chunk of this.#queue) {
          const left = chunk.samples.length - chunk.offset;
          dropped.set(chunk.itemId, (dropped.get(chunk.itemId) ?? 0) + left);
        }
        this.#queue = [];
        this.#queued = 0;
        this.#waited = 0;
        this.#playing = false;
        this.port.postMessage({
          type: 'cleared',
          id: message.id,
          played: this.#takeUnreported(),
          dropped: [...dropped],
        });
        break;
      }
      case 'close':
        this.#closed = true;
        break;
      default:
        break;
    }
  }

  process(_inputs, outputs) {
    if (this.#closed) return false;
    const out = outputs[0]?.[0];
    if (!out) return true;
    let written = 0;
    let ready = this.#queue.length > 0;
    if (ready && this.#waited < this.#prebuffer && this.#queued < this.#prebuffer) {
      this.#waited += out.length;
      ready = false;
    }
    while (ready && written < out.length && this.#queue.length > 0) {
      const chunk = this.#queue[0];
      const n = Math.min(out.length - written, chunk.samples.length - chunk.offset);
      for (let i = 0; i < n; i++) out[written + i] = chunk.samples[chunk.offset + i] * INT16_SCALE;
      written += n;
      chunk.offset += n;
      this.#queued -= n;
      this.#unreported.set(chunk.itemId, (this.#unreported.get(chunk.itemId) ?? 0) + n);
      if (chunk.offset === chunk.samples.length) this.#queue.shift();
    }
    // An underrun (or nothing to play): silence, not the last quantum again.
    out.fill(0, written);
    // Any further output channels (stereo destinations) get the same signal.
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);

    const playing = this.#queue.length > 0;
    // Ran dry: the next audio waits for the buffer to fill again.
    if (!playing) this.#waited = 0;
    this.#quanta += 1;
    // Report when playback starts or drains (the page shows "speaking" in
    // between, and a short chunk may start and drain in one quantum),
    // otherwise at a steady pace while playing.
    if (
      playing !== this.#playing ||
      (written > 0 && (!playing || this.#quanta % PROGRESS_EVERY_QUANTA === 0))
    ) {
      this.port.postMessage({ type: 'progress', played: this.#takeUnreported(), playing });
    }
    this.#playing = playing;
    return true;
  }

  #takeUnreported() {
    const played = [...this.#unreported];
    this.#unreported.clear();
    return played;
  }
}

registerProcessor('troupe-player', PlayerProcessor);
