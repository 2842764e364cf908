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
}

/** Cuts a spoken item to what the client played; returns the error to send, if any. */
export function truncateItem(
  p: TruncateParts,
  event: { item_id: string; content_index: number; audio_end_ms: number },
  eventId: string | null,
): ProtocolError | undefined {
  const speech = p.active?.speech ?? p.lastSpeech;
  const heard = speech?.heardUntil(event.item_id, event.audio_end_ms);
  if (heard === undefined) {
    if (!p.conversation.find(event.item_id)) {
      return itemNotFound('conversation.item.truncate', event.item_id, eventId);
    }
    return new ProtocolError(
      'invalid_value',
      `conversation.item.truncate: item "${event.item_id}" has no audio to truncate (only spoken assistant messages do).`,
      { param: 'item_id', eventId },
    );
  }
  if (p.active?.speech === speech) p.active!.truncations.set(event.item_id, heard);
  p.conversation.cutToHeard(event.item_id, heard);
  p.send({
    type: 'conversation.item.truncated',
    item_id: event.item_id,
    content_index: event.content_index,
    audio_end_ms: event.audio_end_ms,
  });
  p.changed();
  return undefined;
}
