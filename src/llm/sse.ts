import { StringDecoder } from 'node:string_decoder';
import { LlmStreamError } from '../errors.js';
import type { ChunkLike } from './chunk.js';

/**
 * Reads a chat-completions event stream (Server-Sent Events) and yields each
 * `data:` payload parsed as JSON, until `[DONE]` or the end of the body.
 * Multi-byte characters split across reads are kept whole; `\r\n` and `\n`
 * line ends both work; comments and other fields are skipped. A payload with
 * an `error` member (vLLM, LiteLLM and OpenAI send these mid-stream) or one
 * that is not JSON ends the stream with an {@link LlmStreamError}.
 *
 * @example
 * for await (const chunk of readSseChunks(response.body)) assembler.push(chunk);
 */
export async function* readSseChunks(
  body: AsyncIterable<Uint8Array | string>,
  options: SseParserOptions = {},
): AsyncGenerator<ChunkLike, void, undefined> {
  const parser = new SseParser(options);
  for await (const piece of body) {
    yield* parser.push(piece);
    if (parser.done) break;
  }
  yield* parser.end();
}

/** Options of {@link SseParser}. */
export interface SseParserOptions {
  /**
   * Longest line (and longest event) in characters; past it the stream fails
   * with an {@link LlmStreamError} instead of growing a buffer without end.
   * @defaultValue DEFAULT_LLM_MAX_LINE_BYTES (4 MiB)
   */
  maxLineBytes?: number;
}

/** Longest line by default (4 MiB): far above any real chunk, far below trouble. */
export const DEFAULT_SSE_MAX_LINE = 4 * 1024 * 1024;

/**
 * The event-stream parser behind {@link readSseChunks}, fed piece by piece:
 * the hot path of every streamed reply uses it without an async generator
 * per layer.
 *
 * @example
 * const parser = new SseParser();
 * res.on('data', (piece) => parser.push(piece).forEach(handle));
 */
export class SseParser {
  /** `[DONE]` (or a bad event) was read: the rest of the body carries nothing; call {@link end}. */
  done = false;
  /** A bad event, thrown by {@link end} once the chunks before it are out. */
  #failure: unknown;
  readonly #decoder = new StringDecoder('utf8');
  #buffer = '';
  /** Lines of the event being read; most events are one `data:` line. */
  #data: string | undefined;
  readonly #maxLine: number;

  constructor(options: SseParserOptions = {}) {
    this.#maxLine = options.maxLineBytes ?? DEFAULT_SSE_MAX_LINE;
  }

  /** The chunks this piece of the body completes (none after `[DONE]`). */
  push(piece: Uint8Array | string): ChunkLike[] {
    const out: ChunkLike[] = [];
    if (this.done) return out;
    const held = this.#buffer.length;
    let buffer =
      this.#buffer + (typeof piece === 'string' ? piece : this.#decoder.write(piece as Buffer));
    let start = 0;
    // The held part has no line end: search only what is new.
    for (let nl = buffer.indexOf('\n', held); nl >= 0; nl = buffer.indexOf('\n', start)) {
      const end = nl > start && buffer.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      const from = start;
      start = nl + 1;
      if (end === from) {
        // Blank line: the event is complete.
        const data = this.#data;
        if (data !== undefined) {
          this.#data = undefined;
          if (data === '[DONE]') {
            this.done = true;
            break;
          }
          try {
            out.push(parsePayload(data));
          } catch (err) {
            this.#failure = err;
            this.done = true;
            break;
          }
        }
      } else if (buffer.startsWith('data:', from)) {
        // The value is cut straight from the buffer: no string for the whole line.
        const value = buffer.slice(buffer.charCodeAt(from + 5) === 32 ? from + 6 : from + 5, end);
        this.#data = this.#data === undefined ? value : `${this.#data}\n${value}`;
      }
      // Anything else (`event:`, `id:`, `retry:`, `: comment`) carries nothing for chat completions.
    }
    buffer = start === 0 ? buffer : buffer.slice(start);
    this.#buffer = this.done ? '' : buffer;
    if (
      !this.done &&
      (buffer.length > this.#maxLine || (this.#data?.length ?? 0) > this.#maxLine)
    ) {
      // A line (or event) without end: stop before it holds the server's memory.
      this.#failure = new LlmStreamError(
        `The LLM sent an event-stream line longer than ${this.#maxLine} bytes.`,
        { detail: `line of ${Math.max(buffer.length, this.#data?.length ?? 0)} characters so far` },
      );
      this.#buffer = '';
      this.#data = undefined;
      this.done = true;
    }
    return out;
  }

  /**
   * The body ended (or {@link done} is set): the last event, if a server
   * ended without its blank line.
   *
   * @throws LlmStreamError for a bad event (not JSON, or an `error` member).
   */
  end(): ChunkLike[] {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.done) return [];
    const buffer = this.#buffer + this.#decoder.end();
    let data = this.#data;
    // A server that ends without a final blank line still meant its last event.
    if (buffer.startsWith('data:')) {
      const value = buffer.charCodeAt(5) === 32 ? buffer.slice(6) : buffer.slice(5);
      data = data === undefined ? value.trimEnd() : `${data}\n${value.trimEnd()}`;
    }
    this.done = true;
    return data !== undefined && data !== '[DONE]' ? [parsePayload(data)] : [];
  }
}

function parsePayload(data: string): ChunkLike {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch (err) {
    throw new LlmStreamError('The LLM sent a chunk that is not JSON.', {
      cause: err,
      retryable: true,
      detail: `${(err as Error).message}: ${preview(data)}`,
    });
  }
  if (value === null || typeof value !== 'object') {
    throw new LlmStreamError('The LLM sent a chunk that is not a JSON object.', {
      detail: preview(data),
    });
  }
  const error = (value as { error?: unknown }).error;
  if (error !== undefined && error !== null) {
    const message =
      typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string'
        ? (error as { message: string }).message
        : JSON.stringify(error);
    const code = (error as { code?: unknown }).code;
    throw new LlmStreamError('The LLM reported an error mid-stream.', {
      retryable: true,
      detail: message,
      ...(typeof code === 'number' ? { status: code } : {}),
    });
  }
  return value as ChunkLike;
}

function preview(text: string): string {
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}
