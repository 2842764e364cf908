/**
 * What the chunker's streaming scanners share: how a step says "wait for more
 * text", and small searches over the text seen so far.
 */

/** What a step did: consumed this many chars, or needs more text. */
export const WAIT = -1;
/** A search found nothing and more text would not change that. */
export const NONE = -2;

export const SPACE = /\s/;

/** Whether `text` is a proper prefix of `full`, ignoring case (more text could complete it). */
export function couldBecome(text: string, full: string): boolean {
  return text.length < full.length && full.startsWith(text.toLowerCase());
}

export function runLength(text: string, from: number, ch: string): number {
  let k = from;
  while (k < text.length && text[k] === ch) k++;
  return k - from;
}

export function count(text: string, ch: string): number {
  let n = 0;
  for (const c of text) if (c === ch) n++;
  return n;
}

/** Index of the bracket closing the one at `open`; NONE when there is none; WAIT when more text could bring it. */
export function matchBracket(
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
