/**
 * OpenAI's events only: what a connection in OpenAI's compatibility mode
 * (`/openai/v1/realtime`, `?compat=openai`, `REALTIME_COMPAT=openai`) is
 * sent. Some clients stop at the first event or item they have no model for
 * (Pipecat's realtime service ends its receive loop; LiveKit Agents cannot
 * place the next item after one it did not keep). Such a connection gets no
 * `troupe.*` event, and the tools the server runs itself (`mcp_call` items
 * and their `response.mcp_call*` events) are not shown: the conversation
 * reads as messages, the client's own calls and their outputs. What is not
 * shown still happened: the model reads the calls and their results. A
 * failed response is told by its `response.done` alone, not also by an
 * `error` (which Pipecat takes for the end of the session).
 */
import type { Item, ServerEvent } from '../session/events.js';

/**
 * How closely a connection follows OpenAI's API: Troupe's (its `troupe.*`
 * events, the server's tool calls shown, text replies and the character's
 * greeting by default) or OpenAI's (its events only, spoken replies by
 * default where the server can speak, no greeting unless asked).
 */
export const COMPAT_MODES = ['troupe', 'openai'] as const;
export type CompatMode = (typeof COMPAT_MODES)[number];

/** Item types a client of OpenAI's events is shown. */
const SHOWN_ITEMS: ReadonlySet<Item['type']> = new Set([
  'message',
  'function_call',
  'function_call_output',
]);

/**
 * Hidden items remembered: an item is placed after the newest one, so only
 * the latest few are ever named as a previous item.
 */
const HIDDEN_KEPT = 1024;

/** An event as a client of OpenAI's events gets it: the same, changed, or null (not sent). */
export type EventFilter = (event: ServerEvent) => ServerEvent | null;

/**
 * Creates the filter of one connection. It remembers the items it kept from
 * the client, so that an item placed after one of them names the item shown
 * before it, and a response's `output_index` counts only what was shown.
 *
 * @example
 * const only = openAiOnly();
 * const shown = only(event); // null: not sent
 */
export function openAiOnly(): EventFilter {
  /** A hidden item's id → the id of the shown item before it (null: none). */
  const hidden = new Map<string, string | null>();
  /** A response's id → the output indexes of its hidden items, in order. */
  const hiddenOutputs = new Map<string, number[]>();
  const shownBefore = (id: string | null): string | null =>
    id !== null && hidden.has(id) ? (hidden.get(id) ?? null) : id;

  const shownIndex = (responseId: string, index: number): number => {
    const skipped = hiddenOutputs.get(responseId);
    if (skipped === undefined) return index;
    let before = 0;
    for (const i of skipped) if (i < index) before++;
    return index - before;
  };

  return function filter(event) {
    if (event.type.startsWith('troupe.') || event.type.startsWith('response.mcp_call')) {
      return null;
    }
    switch (event.type) {
      case 'conversation.item.added':
      case 'conversation.item.done': {
        if (!SHOWN_ITEMS.has(event.item.type)) {
          hidden.set(event.item.id, shownBefore(event.previous_item_id));
          if (hidden.size > HIDDEN_KEPT) hidden.delete(hidden.keys().next().value as string);
          return null;
        }
        return withShownPrevious(event);
      }
      case 'input_audio_buffer.committed':
        return withShownPrevious(event);
      case 'response.output_item.added':
      case 'response.output_item.done':
        if (!SHOWN_ITEMS.has(event.item.type)) {
          if (event.type === 'response.output_item.added') {
            const skipped = hiddenOutputs.get(event.response_id) ?? [];
            skipped.push(event.output_index);
            hiddenOutputs.set(event.response_id, skipped);
          }
          return null;
        }
        return withShownIndex(event);
      case 'error':
        // A failed response says it in its response.done (status_details.error);
        // OpenAI's clients take a separate error for the end of the session.
        return event.error.type === 'llm_error' ? null : event;
      case 'response.done': {
        hiddenOutputs.delete(event.response.id);
        const output = event.response.output.filter((item) => SHOWN_ITEMS.has(item.type));
        return output.length === event.response.output.length
          ? event
          : { ...event, response: { ...event.response, output } };
      }
      default:
        return 'output_index' in event && 'response_id' in event ? withShownIndex(event) : event;
    }
  };

  function withShownPrevious<E extends ServerEvent & { previous_item_id: string | null }>(
    event: E,
  ): E {
    const previous = shownBefore(event.previous_item_id);
    return previous === event.previous_item_id ? event : { ...event, previous_item_id: previous };
  }

  function withShownIndex<E extends ServerEvent & { response_id: string; output_index: number }>(
    event: E,
  ): E {
    const index = shownIndex(event.response_id, event.output_index);
    return index === event.output_index ? event : { ...event, output_index: index };
  }
}
