/**
 * Keeps long silences away from a decoder that would spend CPU on them.
 * The session sends an utterance's audio as the VAD sees it, which ends with
 * the whole silence window (500 ms by default) and may hold pauses; a
 * decoder needs a little silence after each word (to settle its last
 * phones), not all of it. The gate lets through the first `keepMs` of each
 * silence and drops the rest, until sound comes again.
 */

/** Options of {@link SilenceGate}. */
export interface SilenceGateOptions {
  sampleRate: number;
  /** Silence kept after sound, in ms. @defaultValue 250 */
  keepMs?: number;
  /** Peak below which a chunk counts as silent (PCM16 units; ~−40 dBFS). @defaultValue 330 */
  level?: number;
}

/**
 * @example
 * const gate = new SilenceGate({ sampleRate: 16_000 });
 * for (const chunk of chunks) if (gate.pass(chunk)) decoder.write(chunk);
 */
export class SilenceGate {
  readonly #keepSamples: number;
  readonly #level: number;
  /** Silent samples in a row so far. */
  #silent = 0;
  /** Samples dropped since the last reset. */
  dropped = 0;

  constructor(options: SilenceGateOptions) {
    this.#keepSamples = Math.round(((options.keepMs ?? 250) / 1000) * options.sampleRate);
    this.#level = options.level ?? 330;
  }

  /** Whether `pcm` should reach the decoder. */
  pass(pcm: Int16Array): boolean {
    let peak = 0;
    for (let i = 0; i < pcm.length && peak < this.#level; i++) {
      const v = Math.abs(pcm[i]!);
      if (v > peak) peak = v;
    }
    if (peak >= this.#level) {
      this.#silent = 0;
      return true;
    }
    const keep = this.#silent < this.#keepSamples;
    this.#silent += pcm.length;
    if (!keep) this.dropped += pcm.length;
    return keep;
  }

  /** A new utterance: the silence count starts again. */
  reset(): void {
    this.#silent = 0;
    this.dropped = 0;
  }
}
