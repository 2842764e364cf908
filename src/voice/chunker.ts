/**
 * Text → speech chunking: turns the streamed text deltas of an LLM reply into
 * clean, speakable segments (a clause or sentence each), so TTS can start on
 * the first clause instead of waiting for the whole reply.
 *
 * Two stages, both streaming and both deciding only from the text itself:
 * a markdown filter (raw → plain text) and a segmenter (plain text →
 * segments). Whenever a decision needs characters that have not arrived yet
 * (is this `*` the start of `**`? is `3.` followed by `5`?), the stage waits
 * for the next delta instead of guessing, so the segments are the same however
 * the text was split into deltas.
 */
import { ConfigError } from '../errors.js';

/** Default `firstMinChars`: short, so the first clause reaches TTS fast. */
export const DEFAULT_FIRST_MIN_CHARS = 12;
/** Default `minChars`: later clauses are merged up to about a line of speech. */
export const DEFAULT_MIN_CHARS = 40;
/** Default `maxChars`: longer text without punctuation is cut at a space. */
export const DEFAULT_MAX_CHARS = 200;

/** Longest `[link text]` looked for before a `[` is taken as a plain bracket, in chars. */
const MAX_LINK_TEXT_CHARS = 300;
/** Longest `(url)` of a link, in chars. */
const MAX_LINK_URL_CHARS = 2048;
/** Longest HTML tag, in chars. */
const MAX_TAG_CHARS = 300;
/** Longest special token such as `<|python_tag|>`, in chars. */
const MAX_SPECIAL_TOKEN_CHARS = 64;
/** Longest HTML entity such as `&hellip;`, in chars. */
const MAX_ENTITY_CHARS = 10;

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

// ── Markdown filter ─────────────────────────────────────────────────────────

/** What a filter step did: consumed this many chars, or needs more text. */
const WAIT = -1;
/** A search found nothing and more text would not change that. */
const NONE = -2;

/** Tags whose content is dropped with them: leaked tool calls and reasoning. */
const DROP_CONTENT_TAGS = new Set([
  'tool_call',
  'tool_calls',
  'function_call',
  'function_calls',
  'think',
  'thinking',
  'script',
  'style',
]);
/** Tags that end a line of text (so their text is not run together). */
const BLOCK_TAGS = new Set([
  'br',
  'p',
  'div',
  'li',
  'ul',
  'ol',
  'tr',
  'table',
  'hr',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'blockquote',
  'pre',
]);
/** Special tokens (`<|name|>`) whose content, up to `<|/name|>`, is a tool call. */
const DROP_CONTENT_SPECIAL = new Set(['tool_call', 'tool_calls']);
/** Special tokens after which the rest of the reply is a tool call (Llama's `<|python_tag|>`). */
const DROP_REST_SPECIAL = new Set(['python_tag']);
/** Bracket tokens after which the rest of the reply is a tool call (Mistral's `[TOOL_CALLS]`). */
const DROP_REST_BRACKET = new Set(['TOOL_CALLS']);

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  mdash: '—',
  ndash: '–',
  hellip: '…',
  lsquo: '‘',
  rsquo: '’',
  ldquo: '“',
  rdquo: '”',
};

const URL_PREFIXES = ['http://', 'https://', 'www.'];

/** Emoji, pictographs and the marks that build them: none of it is speakable. */
const EMOJI_PART = /^(?:\p{Extended_Pictographic}|\p{Emoji_Modifier}|\p{Regional_Indicator})$/u;
const ZWJ = 0x200d;
const WORD_CHAR = /[\p{L}\p{N}]/u;
const SPACE = /\s/;
const ASCII_PUNCT = /[!-/:-@[-`{-~]/;

function isEmojiPart(cp: number): boolean {
  // Variation selectors, the keycap mark and tag characters (flag subdivisions).
  if ((cp >= 0xfe00 && cp <= 0xfe0f) || cp === 0x20e3 || (cp >= 0xe0020 && cp <= 0xe007f)) {
    return true;
  }
  return EMOJI_PART.test(String.fromCodePoint(cp));
}

/** Whether `text` is a proper prefix of `full`, ignoring case (more text could complete it). */
function couldBecome(text: string, full: string): boolean {
  return text.length < full.length && full.startsWith(text.toLowerCase());
}

type FilterMode =
  | { kind: 'text' }
  /** Inside a fenced code block opened by `len` × `char`. */
  | { kind: 'fence'; char: string; len: number; atLineStart: boolean }
  /** Dropping everything up to and including `close` (lower case). */
  | { kind: 'drop'; close: string }
  /** Dropping the rest of the reply. */
  | { kind: 'dropRest' };

/**
 * Streaming markdown/markup → plain text. Newlines come out as `\n` (line ends
 * are segment boundaries); other whitespace as single spaces.
 */
class SpeechTextFilter {
  #raw = '';
  #mode: FilterMode = { kind: 'text' };
  #lineStart = true;
  /** The raw char before the current one, for word-boundary rules. */
  #prev = '\n';
  /** Whether the previous code point was dropped as part of an emoji. */
  #inEmoji = false;
  /** The last char given out, to collapse whitespace. */
  #last = '\n';
  #out = '';

  /** Adds raw text; returns the plain text that is now certain. */
  feed(delta: string, final: boolean): string {
    this.#raw += delta;
    let i = 0;
    while (i < this.#raw.length) {
      const n = this.#step(i, final);
      if (n === WAIT) break;
      if (n > 0) {
        if (this.#mode.kind === 'text') this.#prev = this.#raw[i + n - 1]!;
        i += n;
      }
      // n === 0: the raw text at i was rewritten (a link became its text); step again.
    }
    this.#raw = this.#raw.slice(i);
    const out = this.#out;
    this.#out = '';
    if (final) this.reset();
    return out;
  }

  /** Back to the start of a reply. */
  reset(): void {
    this.#raw = '';
    this.#mode = { kind: 'text' };
    this.#lineStart = true;
    this.#prev = '\n';
    this.#inEmoji = false;
    this.#last = '\n';
    this.#out = '';
  }

  #emit(text: string): void {
    for (const ch of text) {
      if (ch === '\n') {
        if (this.#last === '\n') continue;
      } else if (SPACE.test(ch)) {
        if (this.#last === ' ' || this.#last === '\n') continue;
        this.#out += ' ';
        this.#last = ' ';
        continue;
      }
      this.#out += ch;
      this.#last = ch;
    }
  }

  #newline(): void {
    this.#emit('\n');
    this.#lineStart = true;
  }

  #step(i: number, final: boolean): number {
    const mode = this.#mode;
    if (mode.kind === 'fence') return this.#fenceStep(mode, i, final);
    if (mode.kind === 'drop') return this.#dropStep(mode, i, final);
    if (mode.kind === 'dropRest') return this.#raw.length - i;
    if (this.#lineStart) {
      const n = this.#lineStartStep(i, final);
      if (n !== 0) return n;
      this.#lineStart = false;
    }
    return this.#inlineStep(i, final);
  }

  /** Markdown that only counts at the start of a line. 0: none here. */
  #lineStartStep(i: number, final: boolean): number {
    const raw = this.#raw;
    const c = raw[i]!;
    if (c === ' ' || c === '\t') return 1;
    if (c === '>' || c === '|') return 1; // block quote, table row
    if (c === '`' || c === '~') {
      const run = runLength(raw, i, c);
      if (i + run === raw.length && !final) return WAIT;
      if (run >= 3) return this.#openFence(c, run);
      return 0;
    }
    if (c === '#') {
      const run = runLength(raw, i, '#');
      if (i + run === raw.length) return final ? run : WAIT;
      const next = raw[i + run]!;
      if (run <= 6 && (next === ' ' || next === '\t' || next === '\n')) {
        this.#lineStart = false;
        return run;
      }
      return 0;
    }
    if (c === '-' || c === '*' || c === '+' || c === '•' || c === '◦' || c === '‣') {
      if (i + 1 === raw.length) return final ? 0 : WAIT;
      const next = raw[i + 1]!;
      // A bullet; `[ ]`/`[x]` task boxes after it are dropped by the link rule.
      return next === ' ' || next === '\t' ? 2 : 0;
    }
    if (c >= '0' && c <= '9') {
      const match = /^\d{1,3}[.)](?=[ \t])/.exec(raw.slice(i, i + 6));
      if (match) {
        this.#lineStart = false;
        return match[0].length;
      }
      if (!final && /^\d{1,3}[.)]?$/.test(raw.slice(i))) return WAIT;
      return 0;
    }
    return 0;
  }

  #inlineStep(i: number, final: boolean): number {
    const raw = this.#raw;
    const c = raw[i]!;
    const end = raw.length;
    switch (c) {
      case '\n':
      case '\r':
        this.#newline();
        return 1;
      case '`': {
        const run = runLength(raw, i, '`');
        if (i + run === end && !final) return WAIT;
        // Three or more open a code block even mid-line ("Here:```js").
        return run >= 3 ? this.#openFence('`', run) : run;
      }
      case '*':
      case '~':
        return 1;
      case '_': {
        const run = runLength(raw, i, '_');
        if (i + run === end && !final) return WAIT;
        // Inside a word (snake_case) it is text; at a word's edge it is emphasis.
        const next = raw[i + run] ?? '';
        if (WORD_CHAR.test(this.#prev) && WORD_CHAR.test(next)) this.#emit(raw.slice(i, i + run));
        return run;
      }
      case '\\':
        if (i + 1 === end) return final ? 1 : WAIT;
        // An escape: drop the backslash and read the char after it as it is.
        if (ASCII_PUNCT.test(raw[i + 1]!)) {
          this.#emit(raw[i + 1]!);
          return 2;
        }
        this.#emit(c);
        return 1;
      case '!':
        if (i + 1 === end && !final) return WAIT;
        if (raw[i + 1] === '[') return this.#linkStep(i + 1, final, true);
        this.#emit(c);
        return 1;
      case '[':
        return this.#linkStep(i, final, false);
      case ']':
        return 1;
      case '<':
        return this.#tagStep(i, final);
      case '&':
        return this.#entityStep(i, final);
      case '|': {
        let m = i + 1;
        while (m < end && (raw[m] === ' ' || raw[m] === '\t')) m++;
        if (m === end && !final) return WAIT;
        // A table's last pipe ends the row; inner pipes separate cells.
        if (m < end && raw[m] !== '\n' && raw[m] !== '\r') this.#emit(', ');
        return 1;
      }
      default:
        break;
    }
    if ((c === 'h' || c === 'H' || c === 'w' || c === 'W') && !WORD_CHAR.test(this.#prev)) {
      const n = this.#urlStep(i, final);
      if (n !== 0) return n;
    }
    const code = c.charCodeAt(0);
    if (code >= 0xd800 && code <= 0xdbff && i + 1 === end && !final) return WAIT;
    const cp = raw.codePointAt(i)!;
    const size = cp > 0xffff ? 2 : 1;
    if (isEmojiPart(cp) || (cp === ZWJ && this.#inEmoji)) {
      this.#inEmoji = true;
      return size;
    }
    this.#inEmoji = false;
    this.#emit(raw.slice(i, i + size));
    return size;
  }

  #openFence(char: string, len: number): number {
    this.#mode = { kind: 'fence', char, len, atLineStart: false };
    return len;
  }

  #fenceStep(mode: Extract<FilterMode, { kind: 'fence' }>, i: number, final: boolean): number {
    const raw = this.#raw;
    const eol = raw.indexOf('\n', i);
    if (!mode.atLineStart) {
      if (eol < 0) return raw.length - i;
      mode.atLineStart = true;
      return eol + 1 - i;
    }
    const line = raw.slice(i, eol < 0 ? raw.length : eol);
    const trimmed = line.trim();
    const closes = trimmed.length >= mode.len && trimmed === mode.char.repeat(trimmed.length);
    if (eol < 0 && !final) {
      // Wait while the line could still become the closing fence.
      if (trimmed === mode.char.repeat(trimmed.length)) return WAIT;
      mode.atLineStart = false;
      return raw.length - i;
    }
    if (closes) {
      this.#mode = { kind: 'text' };
      this.#newline();
      this.#prev = '\n';
      return (eol < 0 ? raw.length : eol + 1) - i;
    }
    if (eol < 0) return raw.length - i;
    return eol + 1 - i;
  }

  #dropStep(mode: Extract<FilterMode, { kind: 'drop' }>, i: number, final: boolean): number {
    const rest = this.#raw.slice(i).toLowerCase();
    const at = rest.indexOf(mode.close);
    if (at >= 0) {
      this.#mode = { kind: 'text' };
      this.#emit(' ');
      this.#prev = ' ';
      return at + mode.close.length;
    }
    if (final) return rest.length;
    // Keep a tail that could be the start of the closing tag.
    const keep = Math.min(rest.length, mode.close.length - 1);
    return rest.length - keep > 0 ? rest.length - keep : WAIT;
  }

  /** `[text](url)` → text, `![alt](url)` → nothing, `[1]` → nothing, `[TOOL_CALLS]` → drop the rest. */
  #linkStep(open: number, final: boolean, image: boolean): number {
    const raw = this.#raw;
    const start = image ? open - 1 : open;
    const close = matchBracket(raw, open, '[', ']', MAX_LINK_TEXT_CHARS);
    if (close === WAIT && !final) return WAIT;
    if (close < 0) {
      // Not a link: a lone `[` is dropped (an image's `!` is kept), the rest read on.
      if (image) this.#emit('!');
      return 1;
    }
    const inner = raw.slice(open + 1, close);
    if (!image && DROP_REST_BRACKET.has(inner)) {
      this.#mode = { kind: 'dropRest' };
      return raw.length - start;
    }
    let after = close + 1;
    if (after === raw.length && !final) return WAIT;
    if (raw[after] === '(') {
      const paren = matchBracket(raw, after, '(', ')', MAX_LINK_URL_CHARS);
      if (paren === WAIT && !final) return WAIT;
      if (paren >= 0) after = paren + 1;
    }
    const speak = image || /^\s*[xX]?\s*$/.test(inner) || /^\^?\d+$/.test(inner) ? '' : inner;
    // Put the link's text back in place of the link and read it like any text.
    this.#raw = raw.slice(0, start) + speak + raw.slice(after);
    return 0;
  }

  /** HTML tags, special tokens and leaked tool-call markup. */
  #tagStep(i: number, final: boolean): number {
    const raw = this.#raw;
    if (i + 1 === raw.length) {
      if (!final) return WAIT;
      this.#emit('<');
      return 1;
    }
    const next = raw[i + 1]!;
    if (next === '|') {
      const close = raw.indexOf('|>', i + 2);
      if (close < 0 || close - i > MAX_SPECIAL_TOKEN_CHARS) {
        if (close < 0 && raw.length - i <= MAX_SPECIAL_TOKEN_CHARS && !final) return WAIT;
        this.#emit('<');
        return 1;
      }
      const name = raw
        .slice(i + 2, close)
        .trim()
        .toLowerCase();
      if (DROP_REST_SPECIAL.has(name)) {
        this.#mode = { kind: 'dropRest' };
        return raw.length - i;
      }
      if (DROP_CONTENT_SPECIAL.has(name)) this.#mode = { kind: 'drop', close: `<|/${name}|>` };
      return close + 2 - i;
    }
    if (!/[A-Za-z/!?]/.test(next)) {
      this.#emit('<');
      return 1;
    }
    let close = -1;
    for (let k = i + 1; k < raw.length && k - i <= MAX_TAG_CHARS; k++) {
      const ch = raw[k];
      if (ch === '>') {
        close = k;
        break;
      }
      if (ch === '<' || ch === '\n') break;
    }
    if (close < 0) {
      const open = raw.length - i <= MAX_TAG_CHARS && !/[<\n]/.test(raw.slice(i + 1));
      if (open && !final) return WAIT;
      this.#emit('<');
      return 1;
    }
    const body = raw.slice(i + 1, close);
    const match = /^(\/?)([A-Za-z][\w:-]*)(=?)/.exec(body);
    const name = match?.[2]?.toLowerCase() ?? '';
    const closing = match?.[1] === '/';
    const selfClosing = body.endsWith('/');
    if (!closing && !selfClosing && match) {
      if (DROP_CONTENT_TAGS.has(name) || (name === 'function' && match[3] === '=')) {
        this.#mode = { kind: 'drop', close: `</${name}>` };
        return close + 1 - i;
      }
    }
    if (BLOCK_TAGS.has(name)) this.#newline();
    else this.#emit(' ');
    return close + 1 - i;
  }

  #entityStep(i: number, final: boolean): number {
    const raw = this.#raw;
    const head = raw.slice(i, i + MAX_ENTITY_CHARS);
    const match = /^&(#\d{1,7}|#x[0-9a-f]{1,6}|[a-z]{2,8});/i.exec(head);
    if (match) {
      const name = match[1]!;
      let text: string | undefined;
      if (name.startsWith('#')) {
        const hex = name[1] === 'x' || name[1] === 'X';
        const cp = parseInt(name.slice(hex ? 2 : 1), hex ? 16 : 10);
        if (cp > 0 && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff)) {
          text = String.fromCodePoint(cp);
        }
      } else {
        text = NAMED_ENTITIES[name.toLowerCase()];
      }
      if (text !== undefined) {
        // Decoded text is literal (`&lt;b&gt;` is not a tag), but emoji still go.
        if (!isEmojiPart(text.codePointAt(0)!)) this.#emit(text);
        return match[0].length;
      }
    } else if (
      !final &&
      raw.length - i < MAX_ENTITY_CHARS &&
      /^&(#\d{0,7}|#x[0-9a-f]{0,6}|[a-z]{0,8})$/i.test(raw.slice(i))
    ) {
      return WAIT;
    }
    this.#emit('&');
    return 1;
  }

  /** Bare URLs are dropped; punctuation after them is kept. 0: not a URL. */
  #urlStep(i: number, final: boolean): number {
    const raw = this.#raw;
    const head = raw.slice(i, i + 8).toLowerCase();
    if (!final && i + 8 > raw.length && URL_PREFIXES.some((p) => couldBecome(head, p))) {
      return WAIT;
    }
    if (!URL_PREFIXES.some((p) => head.startsWith(p))) return 0;
    let end = i;
    while (end < raw.length && !/[\s<>"`]/.test(raw[end]!)) end++;
    if (end === raw.length && !final) return WAIT;
    // Trailing punctuation belongs to the sentence, not the URL.
    let url = raw.slice(i, end);
    for (;;) {
      const last = url.at(-1);
      if (last === undefined) break;
      if (/[.,;:!?'"’”\]*_]/.test(last)) url = url.slice(0, -1);
      else if (last === ')' && count(url, '(') < count(url, ')')) url = url.slice(0, -1);
      else break;
    }
    return url.length;
  }
}

function runLength(text: string, from: number, ch: string): number {
  let k = from;
  while (k < text.length && text[k] === ch) k++;
  return k - from;
}

function count(text: string, ch: string): number {
  let n = 0;
  for (const c of text) if (c === ch) n++;
  return n;
}

/** Index of the bracket closing the one at `open`; NONE when there is none; WAIT when more text could bring it. */
function matchBracket(
  text: string,
  open: number,
  left: string,
  right: string,
  max: number,
): number {
  let depth = 0;
  for (let k = open; k < text.length; k++) {
    if (k - open > max) return NONE;
    const ch = text[k];
    if (ch === '\n') return NONE;
    if (ch === left) depth++;
    else if (ch === right && --depth === 0) return k;
  }
  return WAIT;
}

// ── Segmenter ───────────────────────────────────────────────────────────────

/** Words whose period never ends a sentence (titles, Latin, units); compared in lower case. */
const ABBREVIATIONS = new Set([
  'mr',
  'mrs',
  'ms',
  'mx',
  'dr',
  'prof',
  'st',
  'mt',
  'sr',
  'jr',
  'gen',
  'gov',
  'sen',
  'rep',
  'capt',
  'lt',
  'col',
  'sgt',
  'rev',
  'hon',
  'vs',
  'cf',
  'viz',
  'approx',
  'dept',
  'fig',
  'vol',
  'pp',
  'no',
]);
/** Words whose period ends a sentence only when the next word is capitalised. */
const MAYBE_ABBREVIATIONS = new Set([
  'etc',
  'inc',
  'ltd',
  'co',
  'corp',
  'jan',
  'feb',
  'mar',
  'apr',
  'jun',
  'jul',
  'aug',
  'sep',
  'sept',
  'oct',
  'nov',
  'dec',
]);
const SENTENCE_END = new Set(['.', '!', '?', '…']);
/** CJK sentence ends: no space follows them. */
const CJK_SENTENCE_END = new Set(['。', '！', '？', '｡']);
const CJK_CLAUSE = new Set(['，', '、', '；', '：']);
const CLOSERS = new Set(['"', "'", '”', '’', ')', ']', '»', '」', '』', '）', '】']);
const LOWER = /\p{Ll}/u;
const SPEAKABLE = /[\p{L}\p{N}]/u;

/** Whitespace collapsed and punctuation left loose by removed markup tidied. */
function tidy(segment: string): string {
  return segment
    .replace(/\s+/g, ' ')
    .replace(/\s+([,.;:!?…)\]}”’»」』、。，！？；：])/g, '$1')
    .replace(/([,;:])(?:\s*[,;:])+/g, '$1')
    .replace(/^[\s,;:.)\]}]+/, '')
    .trim();
}

/** The word (letters and dots) that ends just before `end`. */
function wordBefore(text: string, end: number): string {
  let k = end;
  while (k > 0 && /[\p{L}.]/u.test(text[k - 1]!)) k--;
  return text.slice(k, end);
}

/** Whether the period at the end of `word.` is an abbreviation's. */
function abbreviation(word: string): 'always' | 'maybe' | undefined {
  if (word.length === 0) return undefined;
  const lower = word.toLowerCase();
  if (ABBREVIATIONS.has(lower)) return 'always';
  if (MAYBE_ABBREVIATIONS.has(lower)) return 'maybe';
  // Initials and initialisms: "J.", "U.S.", "e.g.", "a.m.", "Ph.D."
  if (/^\p{Lu}$/u.test(word)) return 'always';
  if (/^(?:\p{L}+\.)+\p{L}+$/u.test(word)) return 'always';
  return undefined;
}

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
      const space = this.#text.search(/\s/u);
      if (space >= 0 || this.#text.length <= this.#maxChars) return space;
    }
    const text = this.#text;
    const n = text.length;
    const minChars = this.#count === 0 ? this.#firstMinChars : this.#minChars;
    let i = this.#cursor;
    for (; i < n; i++) {
      if (i >= this.#maxChars) {
        const cut = this.#forcedCut(final);
        if (cut < 0) this.#cursor = i;
        return cut;
      }
      const c = text[i]!;
      if (c === '\n') return i;
      let cut: number;
      if (SENTENCE_END.has(c)) {
        // A run ("...", "?!") is judged once, from its first char.
        cut = i > 0 && SENTENCE_END.has(text[i - 1]!) ? 0 : this.#sentenceEnd(i, final);
      } else if (CJK_SENTENCE_END.has(c)) cut = this.#cjkSentenceEnd(i, final);
      else cut = this.#clauseEnd(i, final, minChars);
      if (cut === WAIT) {
        this.#cursor = i;
        return -1;
      }
      if (cut > 0) return cut;
    }
    this.#cursor = i;
    return -1;
  }

  /** The cut after the terminator run at `i`; 0 when it does not end a sentence. */
  #sentenceEnd(i: number, final: boolean): number {
    const text = this.#text;
    const n = text.length;
    let j = i;
    while (j < n && SENTENCE_END.has(text[j]!)) j++;
    let k = j;
    while (k < n && CLOSERS.has(text[k]!)) k++;
    if (k === n) return final ? k : WAIT;
    if (!SPACE.test(text[k]!)) return 0;
    const run = text.slice(i, j);
    let needsCapital = false;
    if (run === '.') {
      const kind = abbreviation(wordBefore(text, i));
      if (kind === 'always') return 0;
      needsCapital = kind === 'maybe';
    } else if (/^(?:\.{2,}|…+)$/.test(run)) {
      // An ellipsis mid-sentence ("well… maybe", "Well... I think") is a pause,
      // not an end; before a capitalised word it ends the sentence.
      needsCapital = true;
    }
    if (!needsCapital) return k;
    let m = k;
    while (m < n && text[m] === ' ') m++;
    if (m === n) return final ? k : WAIT;
    const next = text[m]!;
    if (LOWER.test(next)) return 0;
    // "Well... I think": the pronoun I does not start a new sentence, "It" may.
    if (next === 'I') {
      if (m + 1 === n) return final ? 0 : WAIT;
      return /[\p{L}]/u.test(text[m + 1]!) ? k : 0;
    }
    return k;
  }

  #cjkSentenceEnd(i: number, final: boolean): number {
    const text = this.#text;
    let k = i + 1;
    while (k < text.length && (CJK_SENTENCE_END.has(text[k]!) || CLOSERS.has(text[k]!))) k++;
    if (k === text.length && !final) return WAIT;
    return k;
  }

  /** The cut after a clause boundary at `i`; 0 when there is none or the segment is too short. */
  #clauseEnd(i: number, final: boolean, minChars: number): number {
    const text = this.#text;
    const c = text[i]!;
    const long = (cut: number): boolean => text.slice(0, cut).trim().length >= minChars;
    if (CJK_CLAUSE.has(c)) return long(i + 1) ? i + 1 : 0;
    const isDash = c === '—' || c === '–';
    const spacedHyphen = c === '-' && text[i - 1] === ' ';
    if (c !== ',' && c !== ';' && c !== ':' && !isDash && !spacedHyphen) return 0;
    if (!long(i + 1)) return 0;
    if (i + 1 === text.length) return final ? 0 : WAIT;
    const next = text[i + 1]!;
    if (isDash) {
      // "1990–2000" is a range, not a pause.
      if (/\d/.test(text[i - 1] ?? '') && /\d/.test(next)) return 0;
      return i + 1;
    }
    if (!SPACE.test(next)) return 0;
    // "e.g., apples": the comma belongs to the abbreviation.
    if (c === ',' && text[i - 1] === '.' && abbreviation(wordBefore(text, i - 1)) !== undefined) {
      return 0;
    }
    return i + 1;
  }

  /** The cut of a segment longer than maxChars: the last space within it, else the first after. */
  #forcedCut(final: boolean): number {
    const text = this.#text;
    const last = text.lastIndexOf(' ', this.#maxChars);
    if (last > 0) return last;
    const first = text.indexOf(' ', this.#maxChars);
    if (first > 0) return first;
    return final ? text.length : WAIT;
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
