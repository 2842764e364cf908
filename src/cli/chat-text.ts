/**
 * The small pure pieces the chat client's rendering is built from: the event
 * and output types, readers of untyped event fields, text shortened to one
 * line, durations as people read them, and ANSI paint.
 */

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

/** Paints text in one style (or leaves it plain). */
export type Paint = (text: string) => string;
const ANSI = { bold: '1', dim: '2', red: '31', green: '32', yellow: '33', cyan: '36' } as const;
/** The styles {@link painter} offers. */
export type Style = keyof typeof ANSI;

/** The paint for each style; without colour every paint leaves text as it is. */
export function painter(color: boolean): Record<Style, Paint> {
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
export const TEXT_DELTA_TYPES = new Set([
  'response.output_text.delta',
  'response.text.delta',
  'response.output_audio_transcript.delta',
  'response.audio_transcript.delta',
]);
/** The `.done` events of those texts. */
export const TEXT_DONE_TYPES = new Set([
  'response.output_text.done',
  'response.text.done',
  'response.output_audio_transcript.done',
  'response.audio_transcript.done',
]);

/** Whether a value is a plain JSON object. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The value if it is a string. */
export function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The value if it is a JSON object, else an empty one. */
export function record(value: unknown): Record<string, unknown> {
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
export function compact(value: unknown): string {
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
export function messageText(item: Record<string, unknown>): string {
  const parts = Array.isArray(item.content) ? item.content : [];
  return parts
    .map((part) => {
      const p = record(part);
      return str(p.text) ?? str(p.transcript) ?? '';
    })
    .join('');
}
