/**
 * Checks of what a client asks a response (or a recorded call) to use —
 * modalities, tools, tool_choice, `response.input` — against the session's
 * character and client tools, each failure an error naming the field.
 */
import type { CharacterTurnSettings } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';
import type { ChatMessage } from '../llm/chunk.js';
import type { ClientTool, Item, ResponseOptions } from './events.js';
import { audioUnsupported } from './items.js';
import { unknownCall } from './item-checks.js';
import { inputMessages } from './response-input.js';
import { MAX_OUT_OF_BAND_RESPONSES, type ResponseKind } from './response-queue.js';
import { formatRateProblem } from './voice-settings.js';

/** What a response is checked against. */
export interface ResponseCheckContext {
  canSpeak: boolean;
  character: LoadedCharacter;
  clientTools: readonly ClientTool[];
  find: (id: string) => Item | undefined;
  turn: CharacterTurnSettings;
  /** The character's `transfer_to_<id>` tools offered now. */
  transfers: readonly string[];
  eventId: string | null;
}

/**
 * Checks `response.create`'s options; returns `response.input` as the
 * messages the model reads (undefined when none was given), or the error.
 */
export function checkResponse(
  r: ResponseOptions,
  kind: ResponseKind,
  c: ResponseCheckContext,
): ChatMessage[] | undefined | ProtocolError {
  const { eventId, character } = c;
  const invalid = (param: string, message: string) =>
    new ProtocolError('invalid_value', `response.create: ${param}: ${message}`, {
      param,
      eventId,
    });
  if (r.output_modalities?.includes('audio')) {
    if (!c.canSpeak) return audioUnsupported('response.output_modalities', eventId);
    if (kind === 'out_of_band') {
      return invalid(
        'response.output_modalities',
        'an out-of-band response (conversation "none") is text only here: speech belongs to the conversation\'s response; use ["text"], or conversation "auto" for a spoken reply.',
      );
    }
  }
  if (r.tool_choice === 'required') {
    const transfers = kind === 'out_of_band' ? [] : c.transfers;
    const count = character.toolNames.length + transfers.length + (r.tools ?? c.clientTools).length;
    if (count === 0) {
      return invalid(
        'response.tool_choice',
        '"required" forces a tool call, and this response is offered no tools; offer a tool in response.tools, or use "auto" or "none".',
      );
    }
  }
  if (typeof r.tool_choice === 'object') {
    // Out of band a transfer cannot go through, so it cannot be forced either.
    const transfers = kind === 'out_of_band' ? [] : c.transfers;
    if (kind === 'out_of_band' && c.transfers.includes(r.tool_choice.name)) {
      return invalid(
        'response.tool_choice.name',
        `"${r.tool_choice.name}" hands the conversation over, which an out-of-band response (conversation "none") cannot do; name another tool, or use conversation "auto".`,
      );
    }
    const names = [
      ...character.toolNames,
      ...transfers,
      ...(r.tools ?? c.clientTools).map((t) => t.name),
    ];
    if (!names.includes(r.tool_choice.name)) {
      return invalid(
        'response.tool_choice.name',
        `no tool "${r.tool_choice.name}"; tools: ${names.join(', ') || 'none'}.`,
      );
    }
  }
  const formatProblem = r.output_audio_format && formatRateProblem(r.output_audio_format);
  if (formatProblem) return invalid('response.audio.output.format.rate', formatProblem);
  const clash = r.tools?.find((t) => character.toolNames.includes(t.name));
  if (clash) {
    return invalid(
      'response.tools',
      `"${clash.name}" is a tool of character "${character.id}" (which the server runs); give the client tool another name.`,
    );
  }
  if (r.input === undefined) return undefined;
  const tools = r.tools ?? c.clientTools;
  return inputMessages(r.input, c.find, c.turn, eventId, (item, place) =>
    unknownCall(item, character, tools, place),
  );
}

/** `response.create` while the conversation's response runs. */
export function activeResponse(activeId: string, eventId: string | null): ProtocolError {
  return new ProtocolError(
    'conversation_already_has_active_response',
    `Conversation already has an active response in progress: ${activeId}. Wait until the response is finished before creating a new one.`,
    { eventId },
  );
}

/** `response.create` out of band while the most out-of-band responses run. */
export function tooManyOutOfBand(running: string, eventId: string | null): ProtocolError {
  return new ProtocolError(
    'too_many_out_of_band_responses',
    `response.create: ${MAX_OUT_OF_BAND_RESPONSES} out-of-band responses are running (${running}), the most a session runs at once; wait for a response.done or cancel one with response.cancel {response_id}.`,
    { param: 'response.conversation', eventId },
  );
}
