/**
 * The chat renderer's voice lines: discreet `[vad]` lines when the server
 * hears speech start and stop, the user's words as the server heard them
 * (`you (spoken): …`), a failed transcription, and a spoken reply cut short.
 */
import type { ChatLayout } from './chat-layout.js';
import {
  formatDuration,
  record,
  str,
  type Output,
  type Paint,
  type ServerEvent,
  type Style,
} from './chat-text.js';

/** The voice events of one connection, as lines. */
export class VoiceLines {
  /** Where the speech the server is hearing started (ms of input audio), by item. */
  #speechStarts = new Map<string, number>();
  #layout: ChatLayout;
  #paint: Record<Style, Paint>;

  constructor(layout: ChatLayout, paint: Record<Style, Paint>) {
    this.#layout = layout;
    this.#paint = paint;
  }

  /** `[vad]` lines: dim and indented, so they stay out of the way of the conversation. */
  vadLine(event: ServerEvent): Output[] {
    const paint = this.#paint;
    const itemId = str(event.item_id) ?? '';
    if (event.type === 'input_audio_buffer.speech_started') {
      if (typeof event.audio_start_ms === 'number') {
        this.#speechStarts.set(itemId, event.audio_start_ms);
      }
      return this.#layout.line(`  ${paint.dim('[vad] speech started')}`);
    }
    const start = this.#speechStarts.get(itemId);
    this.#speechStarts.delete(itemId);
    const end = event.audio_end_ms;
    const took =
      start !== undefined && typeof end === 'number' && end >= start
        ? ` (${formatDuration(end - start)})`
        : '';
    return this.#layout.line(`  ${paint.dim(`[vad] speech stopped${took}`)}`);
  }

  /** The user's words as the server's speech recognition heard them. */
  spokenLine(event: ServerEvent): Output[] {
    const paint = this.#paint;
    const said = (str(event.transcript) ?? '').trim();
    const who = paint.bold('you (spoken):');
    return this.#layout.line(
      said === '' ? `${who} ${paint.dim('(no words recognised)')}` : `${who} ${said}`,
    );
  }

  /** `conversation.item.input_audio_transcription.failed`: the user's speech was not understood. */
  transcriptionFailedLine(event: ServerEvent): Output[] {
    const error = record(event.error);
    const code = str(error.code) ?? 'stt_failed';
    const message = str(error.message) ?? 'speech recognition failed';
    return this.#layout.errLine(
      `${this.#paint.red(`error [${code}]:`)} your speech was not understood: ${message}`,
    );
  }

  /** `conversation.item.truncated`: a spoken reply cut short, and where. */
  truncatedLine(event: ServerEvent): Output[] {
    const ms = typeof event.audio_end_ms === 'number' ? event.audio_end_ms : undefined;
    return this.#layout.line(
      this.#paint.dim(
        ms === undefined ? '(reply cut short)' : `(reply cut after ${formatDuration(ms)})`,
      ),
    );
  }
}
