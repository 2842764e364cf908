/**
 * The chunker's second stage in word mode, for engines that take words as
 * the LLM writes them (Kyutai's TTS, as Unmute feeds it): a word goes out as
 * soon as the space after it has arrived.
 */

/**
 * Where the first word of `text` ends (at the space after it), -1 while the
 * word may go on, or undefined for a run with no space longer than
 * `maxChars` (CJK text), which is then cut at clause boundaries instead.
 *
 * @example
 * wordCut('Hello the', 200); // 5
 * wordCut('Hel', 200); // -1
 */
export function wordCut(text: string, maxChars: number): number | undefined {
  const space = text.search(/\s/u);
  if (space >= 0 || text.length <= maxChars) return space;
  return undefined;
}
