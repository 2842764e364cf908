/**
 * Encoding of session events onto the wire: an `event_id` on each, and the
 * names and shapes of the connection's dialect.
 */
import type { Item, ServerEvent, SessionObject, SessionUpdate } from '../session/events.js';
import { ENCODING_OF_FORMAT } from '../session/voice-settings.js';
import { createUnmuteShaper } from './unmute.js';

/** The wire dialects. */
export const DIALECTS = ['openai', 'openai-beta', 'unmute'] as const;
/** A wire dialect: GA OpenAI Realtime names, the beta names, or Kyutai Unmute's. */
export type Dialect = (typeof DIALECTS)[number];

/** Beta names of GA output events; absent = the same name, null = not sent. */
const BETA_NAMES: Partial<Record<string, string | null>> = {
  'response.output_text.delta': 'response.text.delta',
  'response.output_text.done': 'response.text.done',
  'response.output_audio.delta': 'response.audio.delta',
  'response.output_audio.done': 'response.audio.done',
  'response.output_audio_transcript.delta': 'response.audio_transcript.delta',
  'response.output_audio_transcript.done': 'response.audio_transcript.done',
  'conversation.item.added': 'conversation.item.created',
  // Beta has no item.done: `conversation.item.created` and `response.output_item.done` carry the item.
  'conversation.item.done': null,
  // Beta has no words for tools the server runs: its clients see the `mcp_call`
  // items (which they do not answer) and `troupe.tool_call.result`.
  'response.mcp_call_arguments.delta': null,
  'response.mcp_call_arguments.done': null,
  'response.mcp_call.in_progress': null,
  'response.mcp_call.completed': null,
  'response.mcp_call.failed': null,
};

/** Events only the unmute dialect sends (Unmute's own vocabulary). */
const UNMUTE_ONLY: ReadonlySet<string> = new Set([
  'unmute.response.text.delta.ready',
  'unmute.interrupted_by_vad',
  'unmute.additional_outputs',
]);

/** Encodes session events as JSON text frames. */
export interface EventEncoder {
  readonly dialect: Dialect;
  /** The frame, or null when the dialect has no such event. */
  encode(event: ServerEvent): string | null;
  /**
   * Notes a client's session update that the session does not echo but the
   * dialect does (Unmute's `allow_recording`); call it before the session
   * handles the update.
   */
  observe(update: SessionUpdate): void;
}

/** Options of {@link createEncoder}. */
export interface EncoderOptions {
  /**
   * The session's character id: the unmute dialect names it as the voice of
   * `response.created` (until a `session.updated` says otherwise).
   * @defaultValue none
   */
  character?: string;
}

/**
 * Creates the encoder of one connection: event ids are unique within it.
 *
 * @example
 * const encoder = createEncoder('openai');
 * ws.send(encoder.encode({ type: 'error', error })!);
 */
export function createEncoder(dialect: Dialect, options: EncoderOptions = {}): EventEncoder {
  let next = 0;
  const prefix = `event_${Math.random().toString(36).slice(2, 8)}`;
  const eventId = () => `${prefix}${(next++).toString(36)}`;
  if (dialect === 'unmute') {
    const unmute = createUnmuteShaper(options);
    return {
      dialect,
      encode: function encodeUnmuteEvent(event) {
        const shaped = unmute.shape(event);
        return shaped === null ? null : JSON.stringify({ ...shaped, event_id: eventId() });
      },
      observe: (update) => unmute.observe(update),
    };
  }
  const deltas = deltaEncoder(dialect === 'openai' ? GA_TEXT_DELTA : BETA_TEXT_DELTA);
  return {
    dialect,
    encode: function encodeEvent(event) {
      // The hot path: one text delta per LLM chunk.
      if (event.type === GA_TEXT_DELTA) return deltas(event, eventId());
      if (UNMUTE_ONLY.has(event.type)) return null;
      // Hot path (one call per text delta): the id goes into the JSON text
      // rather than into a copy of the event.
      if (dialect === 'openai') {
        // The typings' content part is `text` / `audio` (items say `output_text` / `output_audio`).
        const shaped =
          event.type === 'response.content_part.added' ||
          event.type === 'response.content_part.done'
            ? { ...event, part: { ...event.part, type: betaPartType(event.part.type) } }
            : event;
        return withEventId(JSON.stringify(shaped), eventId());
      }
      const renamed = BETA_NAMES[event.type];
      if (renamed === null) return null;
      return JSON.stringify({ ...toBeta(event), type: renamed ?? event.type, event_id: eventId() });
    },
    observe() {},
  };
}

const GA_TEXT_DELTA = 'response.output_text.delta';
const BETA_TEXT_DELTA = 'response.text.delta';

type TextDelta = Extract<ServerEvent, { type: typeof GA_TEXT_DELTA }>;

/**
 * Encodes text deltas as `JSON.stringify` would (same members, same order,
 * `event_id` last) without serialising the event: the part before the delta
 * text is built once per stretch of text and reused, so a delta costs one
 * string escape and one concatenation.
 */
function deltaEncoder(type: string): (event: TextDelta, id: string) => string {
  let responseId: string | undefined;
  let itemId: string | undefined;
  let outputIndex = -1;
  let contentIndex = -1;
  let prefix = '';
  return (event, id) => {
    if (
      event.item_id !== itemId ||
      event.response_id !== responseId ||
      event.output_index !== outputIndex ||
      event.content_index !== contentIndex
    ) {
      responseId = event.response_id;
      itemId = event.item_id;
      outputIndex = event.output_index;
      contentIndex = event.content_index;
      const head = JSON.stringify({
        type,
        response_id: responseId,
        item_id: itemId,
        output_index: outputIndex,
        content_index: contentIndex,
      });
      prefix = `${head.slice(0, -1)},"delta":`;
    }
    return `${prefix}${JSON.stringify(event.delta)},"event_id":"${id}"}`;
  };
}

/** An event's JSON with `event_id` as its last member (events are objects: the text ends in `}`). */
function withEventId(json: string, id: string): string {
  return `${json.slice(0, -1)},"event_id":"${id}"}`;
}

function toBeta(event: ServerEvent): object {
  switch (event.type) {
    case 'session.created':
    case 'session.updated':
      return { ...event, session: betaSession(event.session) };
    case 'conversation.item.added':
    case 'conversation.item.done':
    case 'conversation.item.retrieved':
    case 'response.output_item.added':
    case 'response.output_item.done':
      return { ...event, item: betaItem(event.item) };
    case 'response.content_part.added':
    case 'response.content_part.done':
      return { ...event, part: { ...event.part, type: betaPartType(event.part.type) } };
    case 'response.created':
    case 'response.done': {
      const { output_modalities, output, ...rest } = event.response;
      return {
        ...event,
        response: { ...rest, modalities: output_modalities, output: output.map(betaItem) },
      };
    }
    default:
      return event;
  }
}

function betaPartType(type: string): string {
  return type === 'output_text' ? 'text' : type === 'output_audio' ? 'audio' : type;
}

function betaItem(item: Item): object {
  if (item.type !== 'message') return item;
  return { ...item, content: item.content.map((p) => ({ ...p, type: betaPartType(p.type) })) };
}

function betaSession(s: SessionObject): object {
  const { output_modalities, audio, max_output_tokens, type: _type, ...rest } = s;
  return {
    ...rest,
    modalities: output_modalities,
    voice: audio.output.voice,
    input_audio_format: ENCODING_OF_FORMAT[audio.input.format.type],
    output_audio_format: ENCODING_OF_FORMAT[audio.output.format.type],
    turn_detection: audio.input.turn_detection,
    input_audio_transcription: audio.input.transcription,
    input_audio_noise_reduction: audio.input.noise_reduction,
    speed: audio.output.speed,
    max_response_output_tokens: max_output_tokens,
  };
}
