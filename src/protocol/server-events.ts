/**
 * Encoding of session events onto the wire: an `event_id` on each, and the
 * names and shapes of the connection's dialect.
 */
import type { Item, ServerEvent, SessionObject } from '../session/events.js';

/** The wire dialects (`unmute` comes with voice). */
export const DIALECTS = ['openai', 'openai-beta'] as const;
/** A wire dialect: GA OpenAI Realtime names, or the beta names. */
export type Dialect = (typeof DIALECTS)[number];

/** Beta names of GA output events; absent = the same name. */
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
};

/** Encodes session events as JSON text frames. */
export interface EventEncoder {
  readonly dialect: Dialect;
  /** The frame, or null when the dialect has no such event. */
  encode(event: ServerEvent): string | null;
}

/**
 * Creates the encoder of one connection: event ids are unique within it.
 *
 * @example
 * const encoder = createEncoder('openai');
 * ws.send(encoder.encode({ type: 'error', error })!);
 */
export function createEncoder(dialect: Dialect): EventEncoder {
  let next = 0;
  const prefix = `event_${Math.random().toString(36).slice(2, 8)}`;
  return {
    dialect,
    encode: function encodeEvent(event) {
      const eventId = `${prefix}${(next++).toString(36)}`;
      if (dialect === 'openai') return JSON.stringify({ ...event, event_id: eventId });
      const renamed = BETA_NAMES[event.type];
      if (renamed === null) return null;
      return JSON.stringify({ ...toBeta(event), type: renamed ?? event.type, event_id: eventId });
    },
  };
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

const BETA_FORMATS: Record<string, string> = {
  'audio/pcm': 'pcm16',
  'audio/pcmu': 'g711_ulaw',
  'audio/pcma': 'g711_alaw',
  'audio/ogg': 'ogg_opus',
};

function betaSession(s: SessionObject): object {
  const { output_modalities, audio, max_output_tokens, type: _type, ...rest } = s;
  return {
    ...rest,
    modalities: output_modalities,
    voice: audio.output.voice,
    input_audio_format: BETA_FORMATS[audio.input.format.type],
    output_audio_format: BETA_FORMATS[audio.output.format.type],
    turn_detection: audio.input.turn_detection,
    max_response_output_tokens: max_output_tokens,
  };
}
