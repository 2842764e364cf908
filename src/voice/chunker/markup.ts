/**
 * What the speech text filter knows of markup: the tags, special tokens and
 * entities LLM replies hold, and which characters are emoji.
 */

/** Longest `[link text]` looked for before a `[` is taken as a plain bracket, in chars. */
export const MAX_LINK_TEXT_CHARS = 300;
/** Longest `(url)` of a link, in chars. */
export const MAX_LINK_URL_CHARS = 2048;
/** Longest HTML tag, in chars. */
export const MAX_TAG_CHARS = 300;
/** Longest special token such as `<|python_tag|>`, in chars. */
export const MAX_SPECIAL_TOKEN_CHARS = 64;
/** Longest HTML entity such as `&hellip;`, in chars. */
export const MAX_ENTITY_CHARS = 10;

/** Tags whose content is dropped with them: leaked tool calls and reasoning. */
export const DROP_CONTENT_TAGS = new Set([
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
export const BLOCK_TAGS = new Set([
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
export const DROP_CONTENT_SPECIAL = new Set(['tool_call', 'tool_calls']);
/** Special tokens after which the rest of the reply is a tool call (Llama's `<|python_tag|>`). */
export const DROP_REST_SPECIAL = new Set(['python_tag']);
/** Bracket tokens after which the rest of the reply is a tool call (Mistral's `[TOOL_CALLS]`). */
export const DROP_REST_BRACKET = new Set(['TOOL_CALLS']);

export const NAMED_ENTITIES: Readonly<Record<string, string>> = {
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

export const URL_PREFIXES = ['http://', 'https://', 'www.'];

/** Emoji, pictographs and the marks that build them: none of it is speakable. */
export const EMOJI_PART =
  /^(?:\p{Extended_Pictographic}|\p{Emoji_Modifier}|\p{Regional_Indicator})$/u;
export const ZWJ = 0x200d;
export const WORD_CHAR = /[\p{L}\p{N}]/u;
export const ASCII_PUNCT = /[!-/:-@[-`{-~]/;

export function isEmojiPart(cp: number): boolean {
  // Variation selectors, the keycap mark and tag characters (flag subdivisions).
  if ((cp >= 0xfe00 && cp <= 0xfe0f) || cp === 0x20e3 || (cp >= 0xe0020 && cp <= 0xe007f)) {
    return true;
  }
  return EMOJI_PART.test(String.fromCodePoint(cp));
}
