/**
 * Handoffs between characters: the `transfer_to_<id>` tool names, and the
 * checks that tie a character's `handoffs` to the characters there are.
 */
import { CharacterError } from '../errors.js';
import { closest } from './closest.js';
import type { LoadedCharacter } from './types.js';

/** The prefix of the tools that hand the conversation to another character. */
export const HANDOFF_TOOL_PREFIX = 'transfer_to_';

/** The tool that hands the conversation to `id`: `transfer_to_weather`. */
export function handoffToolName(id: string): string {
  return HANDOFF_TOOL_PREFIX + id;
}

/**
 * The problems of one character's `handoffs` against the ids there are:
 * an unknown id (with the nearest known one), or the character itself.
 */
export function handoffProblems(
  character: Pick<LoadedCharacter, 'id' | 'handoffs' | 'toolNames'>,
  shown: string,
  known: readonly string[],
): CharacterError[] {
  const errors: CharacterError[] = [];
  const others = known.filter((k) => k !== character.id);
  character.handoffs.forEach((id, i) => {
    const path = `handoffs[${i}]`;
    if (id === character.id) {
      errors.push(
        new CharacterError(
          'handoff',
          shown,
          path,
          `"${id}" is this character itself; a character cannot hand off to itself, so remove it`,
        ),
      );
      return;
    }
    const clash = character.toolNames.indexOf(handoffToolName(id));
    if (clash !== -1) {
      errors.push(
        new CharacterError(
          'handoff',
          shown,
          path,
          `hands off to "${id}" with a tool named "${handoffToolName(id)}", but tools[${clash}] has that name; rename the tool (names starting with "${HANDOFF_TOOL_PREFIX}" are Troupe's)`,
        ),
      );
      return;
    }
    if (known.includes(id)) return;
    const guess = closest(id, others);
    const list = others.length ? others.map((k) => `"${k}"`).join(', ') : 'none';
    errors.push(
      new CharacterError(
        'handoff',
        shown,
        path,
        `no character "${id}"${guess ? `; did you mean "${guess}"?` : ''} (the characters are ${list}); a handoff names another character's file name without extension`,
      ),
    );
  });
  return errors;
}
