/**
 * Text → speech chunking: turns the streamed text deltas of an LLM reply into
 * clean, speakable segments (a clause or sentence each), so TTS can start on
 * the first clause instead of waiting for the whole reply.
 *
 * Two stages, both streaming and both deciding only from the text itself:
 * a markdown filter (raw → plain text: `chunker/text-filter.ts`) and a
 * segmenter (plain text → segments: clauses and sentences in
 * `chunker/clauses.ts`, or words in `chunker/words.ts`). Whenever a decision needs characters that have not arrived yet
 * (is this `*` the start of `**`? is `3.` followed by `5`?), the stage waits
 * for the next delta instead of guessing, so the segments are the same however
 * the text was split into deltas.
 */
import { ConfigError } from '../errors.js';
import { SPEAKABLE, clauseCut, tidy } from './chunker/clauses.js';
import { SpeechTextFilter } from './chunker/text-filter.js';
import { wordCut } from './chunker/words.js';

/** Default `firstMinChars`: short, so the first clause reaches TTS fast. */
export const DEFAULT_FIRST_MIN_CHARS = 12;
/** Default `minChars`: later clauses are merged up to about a line of speech. */
export const DEFAULT_MIN_CHARS = 40;
/** Default `maxChars`: longer text without punctuation is cut at a space. */
export const DEFAULT_MAX_CHARS = 200;

/** Settings of a {@link SpeechChunker}. Lengths count UTF-16 code units of cleaned text. */
export interface SpeechChunkerOptions {
  /**
   * Shortest first segment that may end at a clause boundary (`, ; : — –`).
   * Small, so speech starts on the first clause.
   * @defaultValue 12
   */
  firstMinChars?: number;
  /** Shortest later segment that may end at a clause boundary. @defaultValue 40 */
  minChars?: number;
  /**
   * A segment with no boundary is cut once it is longer than this: at the
   * last space at or before `maxChars`, or the first space after a longer word.
   * @defaultValue 200
   */
  maxChars?: number;
  /**
   * `clause`: segments are clauses and sentences (engines that take a text
   * per request). `word`: each word goes out as soon as it is complete (the
   * space after it has arrived), for engines that take words as the LLM
   * writes them, as Kyutai's TTS does in Unmute; the text is cleaned the same
   * way. A run of text with no space (CJK) longer than `maxChars` is still
   * cut at clause boundaries. A provider says which it wants in
   * `TtsProvider.segmentUnit`.
   * @defaultValue 'clause'
   */
  unit?: SegmentUnit;
}

/** What a segment is: see {@link SpeechChunkerOptions.unit}. */
export type SegmentUnit = 'clause' | 'word';

/**
 * Turns streamed LLM text into speakable segments for TTS: it splits at
 * sentence ends and, once a segment is long enough, at clause boundaries,
 * and strips markdown, markup, emoji and leaked tool-call text. Decimals,
 * abbreviations, times, URLs and mid-sentence ellipses are not split.
 *
 * @example
 * const chunker = new SpeechChunker();
 * for await (const delta of textDeltas) for (const s of chunker.push(delta)) tts.push(s);
 * for (const s of chunker.flush()) tts.push(s);
 */
export class SpeechChunker {
  #firstMinChars: number;
  #minChars: number;
  #maxChars: number;
  #unit: SegmentUnit;
  #filter = new SpeechTextFilter();
  /** Plain text not yet given out as a segment. */
  #text = '';
  /** Where scanning for a boundary resumes: everything before it was decided as "no split". */
  #cursor = 0;
  /** Segments given out in this reply. */
  #count = 0;

  /** @throws ConfigError when a length is negative or not a number. */
  constructor(options: SpeechChunkerOptions = {}) {
    this.#firstMinChars = checkLength(
      'firstMinChars',
      options.firstMinChars,
      DEFAULT_FIRST_MIN_CHARS,
    );
    this.#minChars = checkLength('minChars', options.minChars, DEFAULT_MIN_CHARS);
    this.#maxChars = Math.max(1, checkLength('maxChars', options.maxChars, DEFAULT_MAX_CHARS));
    const unit = options.unit ?? 'clause';
    if (unit !== 'clause' && unit !== 'word') {
      throw new ConfigError(
        `SpeechChunker: unit must be "clause" or "word", got "${String(unit)}".`,
      );
    }
    this.#unit = unit;
  }

  /**
   * Adds a text delta; returns the segments it completed (often none).
   *
   * @example
   * chunker.push('Sure, the weather in Paris'); // []
   * chunker.push(' is sunny, about 24 degrees.'); // ['Sure, the weather in Paris is sunny,']
   */
  push(delta: string): string[] {
    if (delta === undefined || delta === null) return [];
    if (typeof delta !== 'string') {
      throw new TypeError(
        `SpeechChunker.push() takes text, got ${typeof delta}; pass the delta's content string.`,
      );
    }
    this.#text += this.#filter.feed(delta, false);
    return this.#segments(false);
  }

  /**
   * Ends the reply: returns the rest as segments and gets ready for the next
   * reply (the first segment is short again).
   *
   * @example
   * chunker.push('Goodbye'); // []
   * chunker.flush(); // ['Goodbye']
   */
  flush(): string[] {
    this.#text += this.#filter.feed('', true);
    const out = this.#segments(true);
    this.reset();
    return out;
  }

  /** Drops everything held back (e.g. on barge-in) and starts a new reply. */
  reset(): void {
    this.#filter.reset();
    this.#text = '';
    this.#cursor = 0;
    this.#count = 0;
  }

  #segments(final: boolean): string[] {
    const out: string[] = [];
    for (;;) {
      const cut = this.#findCut(final);
      if (cut < 0) break;
      this.#give(this.#text.slice(0, cut), out);
      this.#text = this.#text.slice(cut).replace(/^\s+/, '');
      this.#cursor = 0;
    }
    if (final) {
      this.#give(this.#text, out);
      this.#text = '';
      this.#cursor = 0;
    }
    return out;
  }

  #give(raw: string, out: string[]): void {
    const segment = tidy(raw);
    if (!SPEAKABLE.test(segment)) return;
    out.push(segment);
    this.#count++;
  }

  /** Where the first segment of the pending text ends; -1 when that is not known yet. */
  #findCut(final: boolean): number {
    if (this.#unit === 'word') {
      const cut = wordCut(this.#text, this.#maxChars);
      if (cut !== undefined) return cut;
    }
    const minChars = this.#count === 0 ? this.#firstMinChars : this.#minChars;
    const limits = { minChars, maxChars: this.#maxChars };
    const { cut, cursor } = clauseCut(this.#text, this.#cursor, limits, final);
    this.#cursor = cursor;
    return cut;
  }
}

function checkLength(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || Number.isNaN(value) || value < 0) {
    throw new ConfigError(
      `SpeechChunker option ${name} is invalid (${String(value)}): it must be a number of ` +
        'characters, 0 or more (Infinity turns the limit off).',
    );
  }
  return value;
}

/**
 * Cleans a whole text for speech, as {@link SpeechChunker} does to a stream:
 * no markdown, markup, URLs, emoji or leaked tool calls; whitespace collapsed;
 * line breaks become spaces.
 *
 * @example
 * cleanForSpeech('**Hi!** 👋 See [the docs](https://x.dev).'); // 'Hi! See the docs.'
 */
export function cleanForSpeech(text: string): string {
  const chunker = new SpeechChunker({
    firstMinChars: Infinity,
    minChars: Infinity,
    maxChars: Infinity,
  });
  return [...chunker.push(text), ...chunker.flush()].join(' ');
}
