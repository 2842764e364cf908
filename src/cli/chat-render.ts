/**
 * The chat client's rendering: server events in, text to print out. No
 * sockets, no terminal, no clock, so every line the client shows can be
 * unit-tested by feeding events (test/cli/chat-render.test.ts).
 *
 * The renderer keeps just enough state to lay the text out: whose turn it is,
 * whether a streamed line is still open (a tool line must start on a fresh
 * line, and the reply then resumes under the character's name), which items
 * were already shown (the greeting arrives as both `.added` and `.done`), and
 * the tool calls in flight (the result event needs the arguments' line first).
 *
 * Voice sessions add a few lines: the user's words as the server heard them
 * (`you (spoken): …`), discreet `[vad]` lines when the server hears speech
 * start and stop, and a note when a spoken reply was cut short. A spoken
 * reply's transcript prints exactly as a text reply does.
 *
 * This file follows the conversation; the lines of tool calls are made in
 * chat-tool-lines.ts, those of voice events in chat-voice-lines.ts, and
 * chat-layout.ts keeps stdout's open line.
 */
import { ChatLayout } from './chat-layout.js';
import {
  messageText,
  painter,
  record,
  str,
  TEXT_DELTA_TYPES,
  TEXT_DONE_TYPES,
  type Output,
  type Paint,
  type ServerEvent,
  type Style,
} from './chat-text.js';
import { ToolLines } from './chat-tool-lines.js';
import { VoiceLines } from './chat-voice-lines.js';

export {
  announcesGreeting,
  formatDuration,
  isAssistantMessage,
  parseServerEvent,
  shorten,
  type Output,
  type OutputStream,
  type ServerEvent,
} from './chat-text.js';
export {
  describeClose,
  describeConnectError,
  describeRejectedUpgrade,
} from './chat-connect-errors.js';
export { MAX_ARGUMENTS_PREVIEW_CHARS, MAX_OUTPUT_PREVIEW_CHARS } from './chat-tool-lines.js';

/** `event_id` prefix of the client's audio events, so an `error` about one can be told apart. */
export const AUDIO_EVENT_ID_PREFIX = 'evt_audio';

/** Options of {@link createChatRenderer}. */
export interface ChatRendererOptions {
  /** Paint with ANSI colours (only when stdout is a terminal). @defaultValue false */
  color?: boolean;
  /**
   * Cut tool arguments and successful outputs to one short line (a terminal);
   * `false` shows them whole (piped output, logs). A failed call's output is
   * never cut: its end often says what went wrong. @defaultValue true
   */
  cutPreviews?: boolean;
}

/** Turns server events into text; one per connection. */
export interface ChatRenderer {
  /** What to print for one server event (often nothing). */
  render(event: ServerEvent): Output[];
  /** The user's own line, as `you: …`; for piped input, which no terminal echoes. */
  user(text: string): Output[];
  /** A short note from the client itself, e.g. `(cancelling)`. */
  note(text: string): Output[];
  /** Ends a half-written line, e.g. before a prompt or when exiting. */
  endLine(): Output[];
  /** The character's display name, once the session told us. */
  readonly characterName: string;
  /** Whether a response is in flight (between `response.created` and `response.done`). */
  readonly responding: boolean;
}

/**
 * Creates the renderer for one connection.
 *
 * @example
 * const r = createChatRenderer();
 * r.render({ type: 'response.output_text.delta', delta: 'Hi' }); // [{ stream: 'stdout', text: 'assistant: Hi' }]
 */
export function createChatRenderer(options: ChatRendererOptions = {}): ChatRenderer {
  const paint = painter(options.color ?? false);
  const layout = new ChatLayout();
  const tools = new ToolLines(layout, paint, options.cutPreviews ?? true);
  const voice = new VoiceLines(layout, paint);
  /** Errors about the client's audio events seen so far, by code. */
  const audioErrors = new Map<string, number>();
  let characterName = 'assistant';
  let responding = false;
  /** The id of the character serving, to tell a change of character. */
  let currentId: string | undefined;
  /** Text parts (item:index) that streamed deltas, so their `.done` is not printed again. */
  const streamedParts = new Set<string>();
  /** Items produced by a response, and items already printed: not shown again as history. */
  const seenItems = new Set<string>();
  /**
   * Messages printed whole from history (the greeting). A voice session may
   * speak the greeting afterwards: its transcript must not print it twice.
   */
  const shownWhole = new Set<string>();

  const line = (text: string): Output[] => layout.line(text);
  const text = (delta: string): Output[] => layout.text(delta, paint.bold(`${characterName}:`));

  function isShownWhole(event: ServerEvent): boolean {
    const itemId = str(event.item_id);
    return itemId !== undefined && shownWhole.has(itemId);
  }

  function partKey(event: ServerEvent): string {
    return `${str(event.item_id) ?? ''}:${String(event.content_index ?? 0)}`;
  }

  function historyItem(event: ServerEvent): Output[] {
    const item = record(event.item);
    const id = str(item.id);
    // Only the character's own messages outside a response: the greeting (or
    // anything else the server adds to history). User echoes and tool items are
    // already on screen, and a response's messages were streamed as deltas.
    if (item.type !== 'message' || item.role !== 'assistant' || responding) return [];
    if (id !== undefined && seenItems.has(id)) return [];
    const said = messageText(item).trim();
    if (said === '') return [];
    if (id !== undefined) {
      seenItems.add(id);
      shownWhole.add(id);
    }
    return line(`${paint.bold(`${characterName}:`)} ${said}`);
  }

  /** `session.created` says who we talk to; a `session.updated` naming another, a handoff. */
  function sessionLines(event: ServerEvent): Output[] {
    const { id, name } = sessionCharacter(event);
    if (name !== undefined && name !== '') characterName = name;
    if (event.type === 'session.updated') {
      // A handoff (or a switch the user asked for): say who speaks now.
      if (id === undefined || id === currentId) return [];
      const was = currentId;
      currentId = id;
      return was === undefined ? [] : line(paint.dim(`(now talking to ${id})`));
    }
    currentId = id;
    const session = str(record(event.session).id);
    const who =
      id !== undefined && id !== characterName ? `${characterName} (${id})` : characterName;
    return line(paint.dim(`connected to ${who}${session ? `, session ${session}` : ''}`));
  }

  function render(event: ServerEvent): Output[] {
    const { type } = event;
    if ((TEXT_DELTA_TYPES.has(type) || TEXT_DONE_TYPES.has(type)) && isShownWhole(event)) {
      return [];
    }
    if (TEXT_DELTA_TYPES.has(type)) {
      streamedParts.add(partKey(event));
      return text(str(event.delta) ?? '');
    }
    if (TEXT_DONE_TYPES.has(type)) {
      // Print the whole text only if no delta carried it (some servers send just `.done`).
      const whole = streamedParts.has(partKey(event))
        ? ''
        : (str(event.text) ?? str(event.transcript) ?? '');
      return [...text(whole), ...layout.endLine()];
    }
    switch (type) {
      case 'session.created':
      case 'session.updated':
        return sessionLines(event);
      case 'conversation.item.added':
      case 'conversation.item.done':
      case 'conversation.item.created':
        return historyItem(event);
      case 'response.created':
        responding = true;
        streamedParts.clear();
        return [];
      case 'response.output_item.added':
      case 'response.output_item.done': {
        const item = record(event.item);
        const id = str(item.id);
        if (id !== undefined) seenItems.add(id);
        return tools.itemLines(type, item);
      }
      case 'response.function_call_arguments.done': {
        const callId = tools.track(event);
        return callId === undefined ? [] : tools.callLine(callId);
      }
      case 'response.mcp_call_arguments.done': {
        const callId = tools.track({ id: event.item_id, arguments: event.arguments });
        return callId === undefined ? [] : tools.callLine(callId);
      }
      case 'troupe.tool_call.result':
        return tools.resultLine(event);
      case 'troupe.background_tool.progress':
        return tools.progressLine(event);
      case 'troupe.background_tool.done':
        return tools.backgroundDoneLine(event);
      case 'input_audio_buffer.speech_started':
      case 'input_audio_buffer.speech_stopped':
        return voice.vadLine(event);
      case 'conversation.item.input_audio_transcription.completed':
        return voice.spokenLine(event);
      case 'conversation.item.input_audio_transcription.failed':
        return voice.transcriptionFailedLine(event);
      case 'conversation.item.truncated':
        return voice.truncatedLine(event);
      case 'response.done':
        responding = false;
        return responseDoneLines(event, layout, paint);
      case 'error':
        return errorLines(event, layout, paint, audioErrors);
      default:
        return [];
    }
  }

  return {
    render,
    user: (said) => line(`${paint.bold('you:')} ${said}`),
    note: (said) => line(paint.dim(said)),
    endLine: () => layout.endLine(),
    get characterName() {
      return characterName;
    },
    get responding() {
      return responding;
    },
  };
}

/**
 * The character's id and name from a session object. Troupe sends the id as
 * `session.character` and the details under `session.troupe.character`;
 * other servers may send an object in `session.character`.
 */
function sessionCharacter(event: ServerEvent): { id?: string; name?: string } {
  const session = record(event.session);
  const details = record(record(session.troupe).character);
  const character = session.character;
  const inline = record(character);
  const id = str(details.id) ?? str(character) ?? str(inline.id);
  const name = str(details.name) ?? str(inline.name) ?? id;
  return { id, name };
}

/**
 * An `error` event's line. Audio sent before the first refusal arrived is
 * refused too, chunk by chunk: one line says so, instead of one error per
 * 40 ms chunk (`audioErrors` counts them by code).
 */
function errorLines(
  event: ServerEvent,
  layout: ChatLayout,
  paint: Record<Style, Paint>,
  audioErrors: Map<string, number>,
): Output[] {
  const error = record(event.error);
  const code = str(error.code) ?? str(error.type) ?? 'error';
  if (str(error.event_id)?.startsWith(AUDIO_EVENT_ID_PREFIX)) {
    const seen = audioErrors.get(code) ?? 0;
    audioErrors.set(code, seen + 1);
    if (seen === 1) {
      return layout.errLine(
        paint.dim(`(the same ${code} error for the audio already sent is not repeated)`),
      );
    }
    if (seen > 1) return [];
  }
  const message = str(error.message) ?? 'the server reported an error without a message';
  const param = str(error.param);
  return layout.errLine(
    `${paint.red(`error [${code}]:`)} ${message}${param ? paint.dim(` (param: ${param})`) : ''}`,
  );
}

/** How a response ended, when not simply completed: cancelled, failed (and why). */
function responseDoneLines(
  event: ServerEvent,
  layout: ChatLayout,
  paint: Record<Style, Paint>,
): Output[] {
  const response = record(event.response);
  const status = str(response.status) ?? 'completed';
  const result = layout.endLine();
  if (status === 'completed') return result;
  if (status === 'cancelled') return [...result, ...layout.line(paint.yellow('(cancelled)'))];
  const details = record(response.status_details);
  const reason =
    str(record(details.error).message) ?? str(details.reason) ?? str(details.type) ?? '';
  return [
    ...result,
    ...layout.line(paint.yellow(`(response ${status}${reason === '' ? '' : `: ${reason}`})`)),
  ];
}
