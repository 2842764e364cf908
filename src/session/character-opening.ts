/**
 * Running a character's prompt generator for a session (when the session
 * opens or is restored, when `session.update` picks another character, and
 * at a handoff), and which character an update asks for.
 */
import { openConversation, type CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';

/** Runs the character's prompt generator for a conversation (its opening). */
export function openCharacter(
  character: LoadedCharacter,
  sessionId: string,
  metadata: Record<string, unknown>,
  variant?: string,
): Promise<CharacterOpening> {
  return openConversation(character, {
    now: new Date(),
    sessionId,
    metadata,
    ...(variant !== undefined ? { variant } : {}),
  });
}

/**
 * The character a `session.update` asks for (`session.character`): the one
 * serving when it names none or that one; another, unless a response is
 * under way (changing character starts a new conversation) or there is no
 * such character.
 *
 * @example const next = askedCharacter(u.character, current, { blocking, characters, eventId });
 */
export function askedCharacter(
  asked: string | undefined,
  current: LoadedCharacter,
  o: {
    /** The response in the way of a new conversation, if any. */
    blocking: () => string | undefined;
    characters: { get(id: string): LoadedCharacter | undefined; ids(): string[] };
    eventId: string | null;
  },
): LoadedCharacter | ProtocolError {
  if (asked === undefined || asked === current.id) return current;
  const { eventId } = o;
  const blocking = o.blocking();
  if (blocking) {
    return new ProtocolError(
      'conversation_already_has_active_response',
      `session.update: cannot change character while response ${blocking} is in progress; wait for response.done or send response.cancel.`,
      { param: 'session.character', eventId },
    );
  }
  const found = o.characters.get(asked);
  if (found === undefined) {
    return new ProtocolError(
      'unknown_character',
      `session.update: no character "${asked}"; available: ${o.characters.ids().join(', ')}.`,
      { param: 'session.character', eventId },
    );
  }
  return found;
}
