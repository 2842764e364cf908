/**
 * `conversation.item.truncate`: the client played only part of a spoken
 * item, so history keeps what was heard.
 */
import { ProtocolError } from '../errors.js';
import type { Conversation } from './conversation.js';
import type { ServerEvent } from './events.js';
import { itemNotFound } from './items.js';
import type { RunningResponse } from './response-queue.js';
import type { SpeechOutput } from './speech-output.js';

/** What {@link truncateItem} works on. */
export interface TruncateParts {
  /** The response running now, if any. */
  active: RunningResponse | undefined;
  /** The speech of the last response that spoke (when none is running). */
  lastSpeech: SpeechOutput | undefined;
  conversation: Conversation;
  send: (event: ServerEvent) => void;
  changed: () => void;
  /** Stops the running response: the client cut an item it is still speaking. */
  stop: () => void;
}

/** Cuts a spoken item to what the client played; returns the error to send, if any. */
export function truncateItem(
  p: TruncateParts,
  event: { item_id: string; content_index: number; audio_end_ms: number },
  eventId: string | null,
): ProtocolError | undefined {
  const speech = p.active?.speech ?? p.lastSpeech;
  const audio = speech?.audioOf(event.item_id);
  if (!speech || !audio) {
    if (!p.conversation.find(event.item_id)) {
      return itemNotFound('conversation.item.truncate', event.item_id, eventId);
    }
    return new ProtocolError(
      'invalid_value',
      `conversation.item.truncate: item "${event.item_id}" has no audio to truncate (only spoken assistant messages do).`,
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
      `conversation.item.truncate: audio_end_ms: item "${event.item_id}" has ${Math.ceil(audio.ms)} ms of audio${audio.speaking ? ' so far' : ''}, shorter than ${event.audio_end_ms} ms.`,
      { param: 'audio_end_ms', eventId },
    );
  }
  const heard = speech.heardUntil(event.item_id, event.audio_end_ms) ?? '';
  speech.truncate(event.item_id, event.audio_end_ms);
  const live = p.active?.speech === speech;
  p.conversation.cutToHeard(event.item_id, heard);
  p.send({
    type: 'conversation.item.truncated',
    item_id: event.item_id,
    content_index: event.content_index,
    audio_end_ms: event.audio_end_ms,
  });
  // What follows the cut is not to be heard: the reply stops there.
  if (live && audio.speaking) p.stop();
  p.changed();
  return undefined;
}
