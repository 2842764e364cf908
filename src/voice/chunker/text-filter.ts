/**
 * The chunker's first stage: streaming markdown/markup → plain text. It drops
 * emphasis marks, headings' and lists' markers, code fences, links' URLs, HTML
 * tags and entities, emoji, and leaked tool-call or reasoning text, deciding
 * only from the text itself: when a decision needs characters that have not
 * arrived yet, it waits for the next delta.
 */
import {
  ASCII_PUNCT,
  BLOCK_TAGS,
  DROP_CONTENT_SPECIAL,
  DROP_CONTENT_TAGS,
  DROP_REST_BRACKET,
  DROP_REST_SPECIAL,
  MAX_ENTITY_CHARS,
  MAX_LINK_TEXT_CHARS,
  MAX_LINK_URL_CHARS,
  MAX_SPECIAL_TOKEN_CHARS,
  MAX_TAG_CHARS,
  NAMED_ENTITIES,
  URL_PREFIXES,
  WORD_CHAR,
  ZWJ,
  isEmojiPart,
} from './markup.js';
import { SPACE, WAIT, count, couldBecome, matchBracket, runLength } from './scan.js';

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
export class SpeechTextFilter {
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
