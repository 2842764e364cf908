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
 */

/** `event_id` prefix of the client's audio events, so an `error` about one can be told apart. */
export const AUDIO_EVENT_ID_PREFIX = 'evt_audio';

/** A server event as it came off the wire: a JSON object with a `type`. */
export interface ServerEvent {
  type: string;
  [field: string]: unknown;
}

/** Where a piece of output goes. */
export type OutputStream = 'stdout' | 'stderr';

/** One piece of text to write, in order. */
export interface Output {
  stream: OutputStream;
  text: string;
}

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

/** Longest tool-argument text shown on a call line. */
export const MAX_ARGUMENTS_PREVIEW_CHARS = 120;
/** Longest tool-output text shown on a result line. */
export const MAX_OUTPUT_PREVIEW_CHARS = 100;

type Paint = (text: string) => string;
const ANSI = { bold: '1', dim: '2', red: '31', green: '32', yellow: '33', cyan: '36' } as const;
type Style = keyof typeof ANSI;

function painter(color: boolean): Record<Style, Paint> {
  const style = (code: string): Paint =>
    color ? (text) => `\x1b[${code}m${text}\x1b[0m` : (text) => text;
  return {
    bold: style(ANSI.bold),
    dim: style(ANSI.dim),
    red: style(ANSI.red),
    green: style(ANSI.green),
    yellow: style(ANSI.yellow),
    cyan: style(ANSI.cyan),
  };
}

/** Beta event names (and audio transcripts) that show as the same text as the GA text events. */
const TEXT_DELTA_TYPES = new Set([
  'response.output_text.delta',
  'response.text.delta',
  'response.output_audio_transcript.delta',
  'response.audio_transcript.delta',
]);
const TEXT_DONE_TYPES = new Set([
  'response.output_text.done',
  'response.text.done',
  'response.output_audio_transcript.done',
  'response.audio_transcript.done',
]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function record(value: unknown): Record<string, unknown> {
  return isRecord(value) ? value : {};
}

/**
 * Parses one text frame; `undefined` when it is not a JSON object with a string `type`.
 *
 * @example parseServerEvent('{"type":"response.created"}') // { type: 'response.created' }
 */
export function parseServerEvent(frame: string): ServerEvent | undefined {
  let json: unknown;
  try {
    json = JSON.parse(frame);
  } catch {
    return undefined;
  }
  return isRecord(json) && typeof json.type === 'string' ? (json as ServerEvent) : undefined;
}

/**
 * Whether a `session.created` says a greeting follows (Troupe puts the
 * character's greeting in `session.troupe.character.greeting`).
 *
 * @example announcesGreeting({ type: 'session.created', session: { troupe: { character: { greeting: 'Hi!' } } } }) // true
 */
export function announcesGreeting(event: ServerEvent): boolean {
  const greeting = record(record(record(event.session).troupe).character).greeting;
  return typeof greeting === 'string' && greeting.trim() !== '';
}

/**
 * Whether an event adds an assistant message to the history (how the greeting arrives).
 *
 * @example isAssistantMessage({ type: 'conversation.item.added', item: { type: 'message', role: 'assistant', content: [] } }) // true
 */
export function isAssistantMessage(event: ServerEvent): boolean {
  if (!event.type.startsWith('conversation.item.')) return false;
  const item = record(event.item);
  return item.type === 'message' && item.role === 'assistant';
}

/**
 * One line of text at most `max` characters long: whitespace runs collapse to
 * a space, and a cut ends in `…`.
 *
 * @example shorten('a\n  b', 10) // 'a b'
 */
export function shorten(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, Math.max(0, max - 1))}…` : flat;
}

/** Tool arguments or output as compact text: JSON re-serialised without spaces when it parses. */
function compact(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') return JSON.stringify(value) ?? String(value);
  try {
    return JSON.stringify(JSON.parse(value));
  } catch {
    return value;
  }
}

/** Milliseconds as people read them: `0.4 ms`, `12 ms`, `1.5 s`. */
export function formatDuration(ms: number): string {
  if (ms >= 1000) return `${(ms / 1000).toFixed(1)} s`;
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}

/** The text of a message item's content parts (`text`, or `transcript` for audio). */
function messageText(item: Record<string, unknown>): string {
  const parts = Array.isArray(item.content) ? item.content : [];
  return parts
    .map((part) => {
      const p = record(part);
      return str(p.text) ?? str(p.transcript) ?? '';
    })
    .join('');
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
  const cut = options.cutPreviews ?? true;
  /** Errors about the client's audio events seen so far, by code. */
  const audioErrors = new Map<string, number>();
  let characterName = 'assistant';
  let responding = false;
  /** The id of the character serving, to tell a change of character. */
  let currentId: string | undefined;
  /** stdout's cursor is not at the start of a line. */
  let midLine = false;
  /** The open line is the character's streamed text, so more deltas continue it. */
  let textOpen = false;
  /** Text parts (item:index) that streamed deltas, so their `.done` is not printed again. */
  const streamedParts = new Set<string>();
  /** Items produced by a response, and items already printed: not shown again as history. */
  const seenItems = new Set<string>();
  /** Tool calls by call_id: name, arguments, whether the call line is out. */
  const calls = new Map<string, { name: string; args: string; shown: boolean }>();
  /**
   * Messages printed whole from history (the greeting). A voice session may
   * speak the greeting afterwards: its transcript must not print it twice.
   */
  const shownWhole = new Set<string>();
  /** Where the speech the server is hearing started (ms of input audio), by item. */
  const speechStarts = new Map<string, number>();

  function out(text: string): Output {
    if (text.length > 0) midLine = !text.endsWith('\n');
    return { stream: 'stdout', text };
  }

  /** A whole line of its own on stdout, after closing any open one. */
  function line(text: string): Output[] {
    const result = endLine();
    result.push(out(`${text}\n`));
    return result;
  }

  /** A whole line on stderr; stdout's open line is ended first so they do not run together. */
  function errLine(text: string): Output[] {
    const result = endLine();
    result.push({ stream: 'stderr', text: `${text}\n` });
    return result;
  }

  function endLine(): Output[] {
    textOpen = false;
    return midLine ? [out('\n')] : [];
  }

  function text(delta: string): Output[] {
    if (delta === '') return [];
    if (textOpen) return [out(delta)];
    const result = endLine();
    textOpen = true;
    result.push(out(`${paint.bold(`${characterName}:`)} ${delta.replace(/^\s+/, '')}`));
    return result;
  }

  function isShownWhole(event: ServerEvent): boolean {
    const itemId = str(event.item_id);
    return itemId !== undefined && shownWhole.has(itemId);
  }

  function partKey(event: ServerEvent): string {
    return `${str(event.item_id) ?? ''}:${String(event.content_index ?? 0)}`;
  }

  function callLine(callId: string): Output[] {
    const call = calls.get(callId);
    if (call === undefined || call.shown) return [];
    call.shown = true;
    const args = cut ? shorten(call.args, MAX_ARGUMENTS_PREVIEW_CHARS) : call.args;
    return line(`  ${paint.cyan('[tool]')} ${paint.cyan(call.name)} ${paint.dim(args || '{}')}`);
  }

  function trackCall(item: Record<string, unknown>): string | undefined {
    const callId = str(item.call_id) ?? str(item.id);
    if (callId === undefined) return undefined;
    const known = calls.get(callId);
    const name = str(item.name) ?? known?.name ?? 'tool';
    const args = compact(item.arguments) || (known?.args ?? '');
    calls.set(callId, { name, args, shown: known?.shown ?? false });
    return callId;
  }

  function resultLine(event: ServerEvent): Output[] {
    // A server-run tool's call is known by its mcp_call item's id.
    const itemId = str(event.item_id);
    const callId =
      itemId !== undefined && !calls.has(str(event.call_id) ?? '') && calls.has(itemId)
        ? itemId
        : (str(event.call_id) ?? '');
    if (!calls.has(callId)) {
      calls.set(callId, { name: str(event.name) ?? 'tool', args: '', shown: false });
    }
    const result = callLine(callId);
    const name = str(event.name) ?? calls.get(callId)?.name ?? 'tool';
    const outcome = str(event.outcome) ?? 'done';
    const colour = outcome === 'ok' ? paint.green : outcome === 'error' ? paint.red : paint.yellow;
    const ms =
      typeof event.duration_ms === 'number' ? ` in ${formatDuration(event.duration_ms)}` : '';
    const full = compact(event.output);
    const output =
      cut && outcome === 'ok'
        ? shorten(full, MAX_OUTPUT_PREVIEW_CHARS)
        : full.replace(/\s+/g, ' ').trim();
    result.push(
      ...line(
        `  ${paint.cyan('[tool]')} ${paint.cyan(name)} → ${colour(outcome)}${ms}` +
          (output ? `: ${paint.dim(output)}` : ''),
      ),
    );
    calls.delete(callId);
    return result;
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

  /** `[vad]` lines: dim and indented, so they stay out of the way of the conversation. */
  function vadLine(event: ServerEvent): Output[] {
    const itemId = str(event.item_id) ?? '';
    if (event.type === 'input_audio_buffer.speech_started') {
      if (typeof event.audio_start_ms === 'number') speechStarts.set(itemId, event.audio_start_ms);
      return line(`  ${paint.dim('[vad] speech started')}`);
    }
    const start = speechStarts.get(itemId);
    speechStarts.delete(itemId);
    const end = event.audio_end_ms;
    const took =
      start !== undefined && typeof end === 'number' && end >= start
        ? ` (${formatDuration(end - start)})`
        : '';
    return line(`  ${paint.dim(`[vad] speech stopped${took}`)}`);
  }

  /** The user's words as the server's speech recognition heard them. */
  function spokenLine(event: ServerEvent): Output[] {
    const said = (str(event.transcript) ?? '').trim();
    const who = paint.bold('you (spoken):');
    return line(said === '' ? `${who} ${paint.dim('(no words recognised)')}` : `${who} ${said}`);
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
    if (name !== undefined && name !== '') characterName = name;
    return { id, name };
  }

  function responseDone(event: ServerEvent): Output[] {
    responding = false;
    const response = record(event.response);
    const status = str(response.status) ?? 'completed';
    const result = endLine();
    if (status === 'completed') return result;
    if (status === 'cancelled') return [...result, ...line(paint.yellow('(cancelled)'))];
    const details = record(response.status_details);
    const reason =
      str(record(details.error).message) ?? str(details.reason) ?? str(details.type) ?? '';
    return [
      ...result,
      ...line(paint.yellow(`(response ${status}${reason === '' ? '' : `: ${reason}`})`)),
    ];
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
      return [...text(whole), ...endLine()];
    }
    switch (type) {
      case 'session.created':
      case 'session.updated': {
        const { id } = sessionCharacter(event);
        if (type === 'session.updated') {
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
        if (item.type === 'mcp_call') {
          // A tool the server runs (GA mcp_call): its line shows at mcp_call_arguments.done,
          // and its item is done only after its result.
          if (type === 'response.output_item.added') trackCall(item);
          return [];
        }
        if (item.type !== 'function_call') return [];
        const callId = trackCall(item);
        // `.done` carries the final arguments: show the call if nothing else did yet.
        return type === 'response.output_item.done' && callId !== undefined ? callLine(callId) : [];
      }
      case 'response.function_call_arguments.done': {
        const callId = trackCall(event);
        return callId === undefined ? [] : callLine(callId);
      }
      case 'response.mcp_call_arguments.done': {
        const callId = trackCall({ id: event.item_id, arguments: event.arguments });
        return callId === undefined ? [] : callLine(callId);
      }
      case 'troupe.tool_call.result':
        return resultLine(event);
      case 'troupe.background_tool.progress': {
        const name = str(event.name) ?? 'tool';
        return line(
          `  ${paint.cyan('[tool]')} ${paint.cyan(name)} … ${paint.dim(compact(event.text))}`,
        );
      }
      case 'troupe.background_tool.done': {
        const name = str(event.name) ?? 'tool';
        const outcome = str(event.outcome) ?? 'done';
        const colour = outcome === 'ok' ? paint.green : paint.yellow;
        const full = compact(event.output);
        const output = cut ? shorten(full, MAX_OUTPUT_PREVIEW_CHARS) : full;
        const ms =
          typeof event.duration_ms === 'number' ? ` in ${formatDuration(event.duration_ms)}` : '';
        return line(
          `  ${paint.cyan('[tool]')} ${paint.cyan(name)} (background) → ${colour(outcome)}${ms}: ${paint.dim(output)}`,
        );
      }
      case 'input_audio_buffer.speech_started':
      case 'input_audio_buffer.speech_stopped':
        return vadLine(event);
      case 'conversation.item.input_audio_transcription.completed':
        return spokenLine(event);
      case 'conversation.item.input_audio_transcription.failed': {
        const error = record(event.error);
        const code = str(error.code) ?? 'stt_failed';
        const message = str(error.message) ?? 'speech recognition failed';
        return errLine(
          `${paint.red(`error [${code}]:`)} your speech was not understood: ${message}`,
        );
      }
      case 'conversation.item.truncated': {
        const ms = typeof event.audio_end_ms === 'number' ? event.audio_end_ms : undefined;
        return line(
          paint.dim(
            ms === undefined ? '(reply cut short)' : `(reply cut after ${formatDuration(ms)})`,
          ),
        );
      }
      case 'response.done':
        return responseDone(event);
      case 'error': {
        const error = record(event.error);
        const code = str(error.code) ?? str(error.type) ?? 'error';
        // Audio sent before the first refusal arrived is refused too, chunk by chunk:
        // one line says so, instead of one error per 40 ms chunk.
        if (str(error.event_id)?.startsWith(AUDIO_EVENT_ID_PREFIX)) {
          const seen = audioErrors.get(code) ?? 0;
          audioErrors.set(code, seen + 1);
          if (seen === 1) {
            return errLine(
              paint.dim(`(the same ${code} error for the audio already sent is not repeated)`),
            );
          }
          if (seen > 1) return [];
        }
        const message = str(error.message) ?? 'the server reported an error without a message';
        const param = str(error.param);
        return errLine(
          `${paint.red(`error [${code}]:`)} ${message}${param ? paint.dim(` (param: ${param})`) : ''}`,
        );
      }
      default:
        return [];
    }
  }

  return {
    render,
    user: (said) => line(`${paint.bold('you:')} ${said}`),
    note: (said) => line(paint.dim(said)),
    endLine,
    get characterName() {
      return characterName;
    },
    get responding() {
      return responding;
    },
  };
}

/** Plain words for the WebSocket close codes a Troupe server uses. */
const CLOSE_MEANINGS: Readonly<Record<number, string>> = {
  1000: 'closed normally',
  1001: 'the server is shutting down or restarting; try again in a moment',
  1005: 'closed without a status code',
  1006: 'the connection dropped without a close frame (network problem or server crash)',
  1008:
    'the server refused the session by policy: a missing or wrong token (pass --token), ' +
    'an origin it does not allow, or a request it cannot serve (see the error above)',
  1009: 'a message was larger than the server accepts',
  1011: 'the server hit an internal error; its log says more',
  1013:
    'the server is busy: it has as many sessions as it allows, or this client fell behind; ' +
    'try again later',
};

/**
 * One line saying why the socket closed, code and reason included.
 *
 * @example describeClose(1013, 'too many sessions') // 'connection closed (1013 too many sessions): the server is busy: …'
 */
export function describeClose(code: number, reason: string): string {
  const said = reason.trim() === '' ? `${code}` : `${code} ${reason.trim()}`;
  const meaning = code === 1008 ? policyMeaning(reason) : CLOSE_MEANINGS[code];
  return meaning === undefined
    ? `connection closed (${said})`
    : `connection closed (${said}): ${meaning}`;
}

/** 1008 covers auth, origins and bad requests alike: the reason tells which, so say that one. */
function policyMeaning(reason: string): string {
  if (/auth|token/i.test(reason)) {
    return 'the server refused the session: authentication failed; pass the right --token';
  }
  if (/origin/i.test(reason)) return 'the server refused the session: this origin is not allowed';
  if (/character/i.test(reason)) {
    return 'the server refused the session: check --character (the error above lists the ids)';
  }
  return CLOSE_MEANINGS[1008]!;
}

/** Hints for the errors a failed connect usually comes down to. */
const CONNECT_HINTS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'is the server running? Start it with npm start',
  ENOTFOUND: 'the host name does not resolve; check --url',
  EAI_AGAIN: 'the host name does not resolve; check --url',
  ETIMEDOUT: 'the server did not answer; check --url and the network',
  ECONNRESET: 'the server dropped the connection; is it a Troupe server?',
};

/**
 * The one line printed when the socket never opened.
 *
 * @example describeConnectError('ws://127.0.0.1:1/v1/realtime', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }))
 */
export function describeConnectError(url: string, err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const code = isRecord(err) ? str(err.code) : undefined;
  const hint = code === undefined ? undefined : CONNECT_HINTS[code];
  return `could not connect to ${url}: ${message || code || 'unknown error'}${hint ? ` (${hint})` : ''}`;
}

/** The message in an HTTP error body: `error.message` or `message` of JSON, else the text. */
function bodyMessage(body: string): string {
  try {
    const json = record(JSON.parse(body));
    return str(record(json.error).message) ?? str(json.error) ?? str(json.message) ?? body;
  } catch {
    return body;
  }
}

/**
 * The one line printed when the server answered the upgrade with plain HTTP
 * (401, 404, 503…) instead of a WebSocket; `body` is the start of its answer.
 *
 * @example describeRejectedUpgrade('ws://h/v1/realtime', 401, 'Unauthorized', '')
 */
export function describeRejectedUpgrade(
  url: string,
  status: number,
  statusText: string,
  body: string,
): string {
  const hint =
    status === 401 || status === 403
      ? ' (pass the right --token)'
      : status === 404
        ? ' (check the URL path; the endpoint is usually /v1/realtime)'
        : status === 503 || status === 429
          ? ' (the server is busy; try again later)'
          : '';
  const said = shorten(bodyMessage(body), 300);
  return (
    `could not connect to ${url}: the server answered HTTP ${status} ${statusText}`.trimEnd() +
    (said === '' ? '' : `: ${said}`) +
    hint
  );
}
