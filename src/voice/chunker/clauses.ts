/**
 * The chunker's second stage in clause mode: where plain text may be cut
 * into segments. Sentence ends (not after abbreviations, initials, decimals
 * or a mid-sentence ellipsis), CJK sentence ends, and — once a segment is
 * long enough — clause boundaries (`, ; : — –`); text with none is cut at a
 * space past `maxChars`. Each search answers WAIT when the next characters
 * decide, so the cuts do not depend on how the text was split into deltas.
 */
import { SPACE, WAIT } from './scan.js';

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
export const SPEAKABLE = /[\p{L}\p{N}]/u;

/** Whitespace collapsed and punctuation left loose by removed markup tidied. */
export function tidy(segment: string): string {
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

/** Lengths that decide where a clause may end. */
export interface ClauseLimits {
  /** Shortest segment that may end at a clause boundary. */
  minChars: number;
  /** A segment with no boundary is cut at a space once it is longer than this. */
  maxChars: number;
}

/**
 * Where the first segment of `text` ends, scanning from `from` (everything
 * before it was already found not to end one). `cut` is -1 when that is not
 * known yet; `cursor` is where the next scan may resume.
 */
export function clauseCut(
  text: string,
  from: number,
  limits: ClauseLimits,
  final: boolean,
): { cut: number; cursor: number } {
  const n = text.length;
  let i = from;
  for (; i < n; i++) {
    if (i >= limits.maxChars) return { cut: forcedCut(text, limits.maxChars, final), cursor: i };
    const c = text[i]!;
    if (c === '\n') return { cut: i, cursor: i };
    let cut: number;
    if (SENTENCE_END.has(c)) {
      // A run ("...", "?!") is judged once, from its first char.
      cut = i > 0 && SENTENCE_END.has(text[i - 1]!) ? 0 : sentenceEnd(text, i, final);
    } else if (CJK_SENTENCE_END.has(c)) cut = cjkSentenceEnd(text, i, final);
    else cut = clauseEnd(text, i, final, limits.minChars);
    if (cut === WAIT) return { cut: -1, cursor: i };
    if (cut > 0) return { cut, cursor: i };
  }
  return { cut: -1, cursor: i };
}

/** The cut after the terminator run at `i`; 0 when it does not end a sentence. */
export function sentenceEnd(text: string, i: number, final: boolean): number {
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

export function cjkSentenceEnd(text: string, i: number, final: boolean): number {
  let k = i + 1;
  while (k < text.length && (CJK_SENTENCE_END.has(text[k]!) || CLOSERS.has(text[k]!))) k++;
  if (k === text.length && !final) return WAIT;
  return k;
}

/** The cut after a clause boundary at `i`; 0 when there is none or the segment is too short. */
export function clauseEnd(text: string, i: number, final: boolean, minChars: number): number {
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
export function forcedCut(text: string, maxChars: number, final: boolean): number {
  const last = text.lastIndexOf(' ', maxChars);
  if (last > 0) return last;
  const first = text.indexOf(' ', maxChars);
  if (first > 0) return first;
  return final ? text.length : WAIT;
}
