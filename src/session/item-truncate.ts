/**
 * `conversation.item.truncate`: the client played only part of a spoken
 * item, so history keeps what was heard. Any spoken assistant message still
 * in the conversation can be cut, as in OpenAI's API: one still speaking,
 * the last reply's, or an older one whose word timing the conversation kept.
 */
import { ProtocolError } from '../errors.js';
import { MAX_SPOKEN_ITEMS, type Conversation } from './conversation.js';
import type { Item, ServerEvent } from './events.js';
import { itemNotFound } from './items.js';
import type { RunningResponse } from './response-queue.js';
import type { SpeechOutput } from './speech-output.js';
import { heardBy } from './spoken-timing.js';

/** What {@link truncateItem} works on. */
export interface TruncateParts {
  /** The response running now, if any. */
  active: RunningResponse | undefined;
  /** The speech of the last response that spoke. */
  lastSpeech: SpeechOutput | undefined;
  conversation: Conversation;
  send: (event: ServerEvent) => void;
  changed: () => void;
  /** Stops the running response: the client cut an item it is still speaking. */
  stop: () => void;
}

/** A spoken item's audio as the client has it, and what was heard of it by a point. */
interface SpokenAudio {
  ms: number;
  /** Whether more of it is still to come (it is being spoken now). */
  speaking: boolean;
  /** Whether it is the running response's. */
  live: boolean;
  heard: (audioEndMs: number) => string;
  /** Keeps the cut where the speech is: a response still running ends the item with it. */
  cut: (audioEndMs: number) => void;
}

/** Cuts a spoken item to what the client played; returns the error to send, if any. */
export function truncateItem(
  p: TruncateParts,
  event: { item_id: string; content_index: number; audio_end_ms: number },
  eventId: string | null,
): ProtocolError | undefined {
  const id = event.item_id;
  const active = p.active?.speech;
  const live = active?.audioOf(id) !== undefined;
  const item = p.conversation.find(id);
  if (!live && !item) return itemNotFound('conversation.item.truncate', id, eventId);
  const audio = spokenAudio(p, id, live);
  if (!audio) {
    const why =
      item && spoken(item)
        ? `its word timing is no longer kept (only the ${MAX_SPOKEN_ITEMS} most recent spoken items of a session can be truncated, and none spoken before a resume)`
        : 'only spoken assistant messages do';
    return new ProtocolError(
      'invalid_value',
      `conversation.item.truncate: item "${id}" has no audio to truncate (${why}).`,
      { param: 'item_id', eventId },
    );
  }
  if (event.content_index !== 0) {
    return new ProtocolError(
      'invalid_value',
      `conversation.item.truncate: content_index: a spoken message's audio is its part 0, not ${event.content_index}.`,
      { param: 'content_index', eventId },
    );
  }
  // As in OpenAI's API: the client cannot have played more than it was sent, or than it kept.
  if (event.audio_end_ms > Math.ceil(audio.ms)) {
    return new ProtocolError(
      'invalid_value',
      `conversation.item.truncate: audio_end_ms: item "${id}" has ${Math.ceil(audio.ms)} ms of audio${audio.speaking ? ' so far' : ''}, shorter than ${event.audio_end_ms} ms.`,
      { param: 'audio_end_ms', eventId },
    );
  }
  const heard = audio.heard(event.audio_end_ms);
  audio.cut(event.audio_end_ms);
  p.conversation.cutToHeard(id, heard, event.audio_end_ms);
  p.send({
    type: 'conversation.item.truncated',
    item_id: id,
    content_index: event.content_index,
    audio_end_ms: event.audio_end_ms,
  });
  // What follows the cut is not to be heard: the reply stops there.
  if (audio.live && audio.speaking) p.stop();
  p.changed();
  return undefined;
}

/**
 * Where a spoken item's audio is known: the running response's speech, the
 * last response's, or the timing the conversation kept of an older reply.
 */
function spokenAudio(p: TruncateParts, id: string, live: boolean): SpokenAudio | undefined {
  const speech = live ? p.active!.speech! : p.lastSpeech;
  const audio = speech?.audioOf(id);
  if (speech && audio) {
    return {
      ...audio,
      live,
      heard: (ms) => speech.heardUntil(id, ms) ?? '',
      cut: (ms) => speech.truncate(id, ms),
    };
  }
  const timing = p.conversation.spokenTiming(id);
  if (!timing) return undefined;
  return {
    ms: timing.ms,
    speaking: false,
    live: false,
    heard: (ms) => heardBy(timing, ms),
    cut: () => undefined,
  };
}

/** Whether an item is an assistant message that was spoken. */
function spoken(item: Item): boolean {
  return (
    item.type === 'message' &&
    item.role === 'assistant' &&
    item.content.some((part) => part.type === 'output_audio')
  );
}
