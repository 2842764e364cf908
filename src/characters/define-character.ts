import type { Character, CharacterInstructions } from './types.js';

/**
 * Types a character; returns it unchanged. A module needs no import at all to
 * be a character: any default-exported object of the right shape is one.
 *
 * @example
 * export default defineCharacter({
 *   name: 'Narrator',
 *   instructions: { prompt: 'You are a storyteller.' },
 *   makeSystemPrompt: (i, ctx) => `${i.prompt}\nToday is ${ctx.now.toDateString()}.`,
 * });
 */
export function defineCharacter<I = CharacterInstructions>(character: Character<I>): Character<I> {
  return character;
}
