/**
 * The event side of a {@link TtsStream}, shared by every provider so that they
 * all keep the same contract: audio in order, the pushed segment's text on the
 * first chunk of its speech, `word` events right after the chunk in which the
 * word starts, nothing at all once the signal fired or an error was reported,
 * and `end()` resolving exactly once.
 */
import type { TtsEvent } from '../types.js';

/** The pino-shaped logger the TTS providers write to (a pino logger fits). */
export interface TtsLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Where a segment's speech starts: a sample position, or "the next audio chunk". */
interface SegmentLabel {
  text: string;
  /** Samples from the stream's start; undefined = the next chunk given out. */
  at: number | undefined;
}

/** Options of {@link TtsEmitter}. */
export interface TtsEmitterOptions {
  /** The provider's name, for logs. */
  provider: string;
  signal: AbortSignal;
  onEvent: (event: TtsEvent) => void;
  /** Called once when the signal fires (while the stream was live): stop the engine here. */
  onAbort?: () => void;
  log?: TtsLogger;
}

/**
 * Orders and guards the events of one TTS stream.
 *
 * @example
 * const out = new TtsEmitter({ provider: 'tone', signal, onEvent });
 * out.label('Hello there.');
 * out.audio(pcm);            // { type: 'audio', pcm, text: 'Hello there.' }
 * out.word('Hello', 0);      // emitted right after the chunk holding sample 0
 * out.finish();
 * await out.done;
 */
export class TtsEmitter {
  /** Resolves once: all audio out, an error reported, or the signal fired. */
  readonly done: Promise<void>;
  #resolve!: () => void;
  #live = true;
  #samplesOut = 0;
  #labels: SegmentLabel[] = [];
  #words: Array<{ text: string; startSample: number }> = [];
  readonly #options: TtsEmitterOptions;
  readonly #abortListener = (): void => this.#aborted();

  constructor(options: TtsEmitterOptions) {
    this.#options = options;
    this.done = new Promise<void>((resolve) => {
      this.#resolve = resolve;
    });
    if (options.signal.aborted) {
      this.#close();
      return;
    }
    options.signal.addEventListener('abort', this.#abortListener, { once: true });
  }

  /** Whether events may still be given out (not finished, failed or aborted). */
  get live(): boolean {
    return this.#live;
  }

  /** Samples given out so far: the stream's clock. */
  get samplesOut(): number {
    return this.#samplesOut;
  }

  /**
   * A segment's speech starts at sample `at` (or with the next chunk when
   * undefined, or when `at` has already gone out). Labels must come in order.
   */
  label(text: string, at?: number): void {
    if (!this.#live) return;
    this.#labels.push({ text, at });
  }

  /** Gives out audio, split where a labelled segment starts inside it. */
  audio(pcm: Int16Array): void {
    let rest = pcm;
    while (this.#live && rest.length > 0) {
      const head = this.#labels[0];
      let text: string | undefined;
      if (head !== undefined && (head.at === undefined || head.at <= this.#samplesOut)) {
        // Several labels due at once (segments that made no audio of their
        // own, or that were placed late) share this chunk's text.
        const due: string[] = [];
        while (
          this.#labels[0] !== undefined &&
          (this.#labels[0].at === undefined || this.#labels[0].at <= this.#samplesOut)
        ) {
          due.push(this.#labels.shift()!.text);
        }
        text = due.join(' ');
      }
      // Cut before the next label that starts inside this chunk.
      const next = this.#labels[0];
      let take = rest.length;
      if (next?.at !== undefined && next.at < this.#samplesOut + rest.length) {
        take = next.at - this.#samplesOut;
      }
      const piece = take === rest.length ? rest : rest.subarray(0, take);
      rest = rest.subarray(take);
      this.#samplesOut += piece.length;
      this.#emit(
        text === undefined ? { type: 'audio', pcm: piece } : { type: 'audio', pcm: piece, text },
      );
      this.#flushWords(false);
    }
  }

  /** A word starting at `startSample`; given out once audio has reached it. */
  word(text: string, startSample: number): void {
    if (!this.#live) return;
    this.#words.push({ text, startSample });
    this.#flushWords(false);
  }

  /** Reports a failure; the stream is over. */
  fail(error: Error): void {
    if (!this.#live) return;
    this.#emit({ type: 'error', error });
    this.#close();
  }

  /** All audio is out: gives out the remaining words and resolves {@link done}. */
  finish(): void {
    if (!this.#live) return;
    this.#flushWords(true);
    this.#close();
  }

  #flushWords(all: boolean): void {
    while (this.#live && this.#words.length > 0) {
      const word = this.#words[0]!;
      if (!all && word.startSample >= this.#samplesOut) return;
      this.#words.shift();
      this.#emit({ type: 'word', text: word.text, startSample: word.startSample });
    }
  }

  #emit(event: TtsEvent): void {
    try {
      this.#options.onEvent(event);
    } catch (error) {
      // A throwing listener must not take the engine (or the process) down:
      // the stream stops, the session learns of it through its own error.
      this.#options.log?.error(
        { provider: this.#options.provider, err: error },
        'tts event listener threw; stream stopped',
      );
      this.#close();
      this.#options.onAbort?.();
    }
  }

  #aborted(): void {
    if (!this.#live) return;
    this.#close();
    this.#options.onAbort?.();
  }

  #close(): void {
    this.#live = false;
    this.#labels = [];
    this.#words = [];
    this.#options.signal.removeEventListener('abort', this.#abortListener);
    this.#resolve();
  }
}
