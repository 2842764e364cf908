/**
 * Checks of an item a client gives, shared by `conversation.item.create` and
 * `response.create`'s `response.input`: the same item is refused with the
 * same words wherever it comes, only the event and the field's path differ.
 */
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';
import type { ClientFunctionCallItem, ClientItem, ClientTool } from './events.js';

/** Where an item was given: the event's type and the item's path (`item`, `response.input[2]`). */
export interface ItemPlace {
  event: 'conversation.item.create' | 'response.create';
  at: string;
  eventId: string | null;
}

/** A client message's content: audio with its transcript, images only from the user, the right parts for the role. */
export function checkMessage(
  item: Extract<ClientItem, { type: 'message' }>,
  place: ItemPlace,
): ProtocolError | undefined {
  const err = (code: string, message: string, param: string) =>
    new ProtocolError(code, `${place.event}: ${param}: ${message}`, {
      param,
      eventId: place.eventId,
    });
  // The model reads text: an audio part is taken for its transcript, and only with one.
  const audioAt = item.content.findIndex(
    (p) =>
      (p.type === 'input_audio' || p.type === 'output_audio') && typeof p.transcript !== 'string',
  );
  if (audioAt !== -1) {
    const [text, audio] =
      item.role === 'assistant' ? ['output_text', 'output_audio'] : ['input_text', 'input_audio'];
    return err(
      'unsupported_content',
      `an audio part is taken only with its transcript, which is what the model reads (spoken input goes through input_audio_buffer.append); give an ${audio} part its "transcript", or send "${text}" parts.`,
      `${place.at}.content[${audioAt}]`,
    );
  }
  const imageAt = item.content.findIndex((p) => p.type === 'input_image');
  if (imageAt !== -1 && item.role !== 'user') {
    return err(
      'invalid_value',
      'images are only taken in user messages.',
      `${place.at}.content[${imageAt}]`,
    );
  }
  const wrongText = item.content.findIndex((p) =>
    item.role === 'assistant'
      ? p.type === 'input_text' || p.type === 'input_audio'
      : p.type === 'output_text' || p.type === 'output_audio',
  );
  if (wrongText !== -1) {
    const want =
      item.role === 'assistant' ? 'output_text" or "output_audio' : 'input_text" or "input_audio';
    return err(
      'invalid_value',
      `${item.role === 'assistant' ? 'an' : 'a'} ${item.role} message takes "${want}" parts.`,
      `${place.at}.content[${wrongText}].type`,
    );
  }
  return undefined;
}

/** A client's `function_call` item for a tool neither it nor the character has: the error. */
export function unknownCall(
  item: ClientFunctionCallItem,
  character: LoadedCharacter,
  clientTools: readonly ClientTool[],
  place: ItemPlace,
): ProtocolError | undefined {
  const own = character.toolNames;
  const client = clientTools.map((t) => t.name);
  if (own.includes(item.name) || client.includes(item.name)) return undefined;
  const list = (names: readonly string[]) => (names.length ? names.join(', ') : 'none');
  const param = `${place.at}.name`;
  const where =
    place.event === 'response.create' ? 'response.tools or session.tools' : 'session.tools';
  return new ProtocolError(
    'invalid_value',
    `${place.event}: ${param}: no tool "${item.name}" in this session; the character's tools: ${list(own)}; the client's (${where}): ${list(client)}. Add the tool with session.update first, or name one of these.`,
    { param, eventId: place.eventId },
  );
}

/** A `function_call` item whose `call_id` is already used where it goes: the error. */
export function duplicateCallId(
  callId: string,
  within: 'the conversation' | 'response.input',
  place: ItemPlace,
): ProtocolError {
  const param = `${place.at}.call_id`;
  return new ProtocolError(
    'invalid_value',
    `${place.event}: ${param}: a call "${callId}" is already in ${within}; give each call its own call_id.`,
    { param, eventId: place.eventId },
  );
}
