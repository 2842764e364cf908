/**
 * The send window of one connection's text deltas: with a window, a text
 * delta that follows another of the same item by less than the window waits
 * for the window's end, and the deltas that arrive meanwhile go out with it
 * as one `response.output_text.delta` event. Fewer frames mean fewer socket
 * writes, encodings and client parses per delta of the LLM.
 */
import type { ServerEvent } from '../session/events.js';

type TextDelta = Extract<ServerEvent, { type: 'response.output_text.delta' }>;

/** Sends a connection's events, holding text deltas for at most the window. */
export interface DeltaWindow {
  send(event: ServerEvent): void;
  /** Sends what is held now (e.g. before the socket closes). */
  flush(): void;
  /** Drops what is held and stops the clock (the socket is gone). */
  close(): void;
}

/**
 * Creates the window of one connection in front of `emit`. Never held: an
 * item's first delta (a reply's first text leaves at once), a delta that
 * comes `windowMs` or more after the last delta frame (a stream slower than
 * the window is never delayed), and every other event — which first sends
 * the deltas held before it, so the order stays the same. A held delta
 * waits at most `windowMs`. Only text deltas are joined: audio transcript
 * deltas are paced by the speech, and Unmute's dialect shows each as a word.
 * `windowMs` ≤ 0 sends everything at once.
 *
 * @example
 * const window = createDeltaWindow(10, (event) => frames.write(encode(event)));
 * window.send(event);
 */
export function createDeltaWindow(
  windowMs: number,
  emit: (event: ServerEvent) => void,
): DeltaWindow {
  if (!(windowMs > 0)) return { send: emit, flush() {}, close() {} };
  /** The item whose deltas are joined: its first delta has gone out. */
  let itemId: string | undefined;
  /** When the last delta frame of that item went out. */
  let sentAt = 0;
  let held: TextDelta | undefined;
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    const event = held;
    if (event === undefined) return;
    held = undefined;
    sentAt = performance.now();
    emit(event);
  };
  const onTimer = (): void => {
    timer = undefined;
    flush();
  };

  return {
    send(event) {
      if (event.type !== 'response.output_text.delta') {
        if (held !== undefined) flush();
        emit(event);
        return;
      }
      if (held !== undefined) {
        if (
          held.item_id === event.item_id &&
          held.content_index === event.content_index &&
          held.response_id === event.response_id &&
          held.output_index === event.output_index
        ) {
          held.delta += event.delta;
          return;
        }
        flush();
      }
      const now = performance.now();
      if (event.item_id !== itemId || now - sentAt >= windowMs) {
        itemId = event.item_id;
        sentAt = now;
        emit(event);
        return;
      }
      held = { ...event };
      timer = setTimeout(onTimer, sentAt + windowMs - now);
    },
    flush,
    close() {
      clearTimeout(timer);
      timer = undefined;
      held = undefined;
    },
  };
}
