/**
 * Running a character's prompt generator for a session: when the session
 * opens or is restored, when `session.update` picks another character or
 * gives new metadata, and at a handoff; and which character an update asks for.
 */
import type { Logger } from 'pino';
import { openConversation, type CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError, errorLine } from '../errors.js';

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

/** The session as it is before a `session.update`. */
export interface OpeningNow {
  sessionId: string;
  character: LoadedCharacter;
  variant: string;
  metadata: Record<string, unknown>;
}

/**
 * The opening a `session.update` asks for: another character's (its first
 * variant), or for new metadata the prompt of the character serving made
 * again (its variant kept); undefined when neither changes. Made before the
 * update changes anything, so a prompt generator that throws (say, on
 * metadata of a shape it does not expect) refuses the update whole.
 *
 * @example const opening = await updatedOpening(now, next, u.metadata, eventId, log);
 */
export async function updatedOpening(
  now: OpeningNow,
  next: LoadedCharacter,
  metadata: Record<string, unknown> | undefined,
  eventId: string | null,
  log: Logger,
): Promise<CharacterOpening | ProtocolError | undefined> {
  const same = next === now.character;
  // A client that sends back session.created's `troupe` unchanged changes nothing.
  const newMetadata =
    metadata !== undefined && JSON.stringify(metadata) !== JSON.stringify(now.metadata);
  if (same && !newMetadata) return undefined;
  const variant = same ? now.variant : undefined;
  try {
    return await openCharacter(next, now.sessionId, metadata ?? now.metadata, variant);
  } catch (err) {
    // For the character's author: the generator passed at load, with `{}`.
    log.warn({ err, to: next.id }, 'prompt generator failed on session.update');
    return new ProtocolError(
      'character_unavailable',
      `session.update: character "${next.id}" could not make its system prompt${newMetadata ? ' with this metadata' : ''}: ${errorLine(err, 300)} Nothing was changed.`,
      {
        type: 'server_error',
        param: newMetadata ? 'session.troupe.metadata' : 'session.character',
        eventId,
      },
    );
  }
}
