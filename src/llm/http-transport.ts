import { setTimeout as sleep } from 'node:timers/promises';
import {
  LlmStreamError,
  LlmTruncatedError,
  TurnAbortedError,
  redactPaths,
  redactSecrets,
  redactUrl,
} from '../errors.js';
import { LLM_SILENT, type ChunkLike, type ChunkSink } from './chunk.js';
import { Connections, Exchange, type BodySink } from './http-exchange.js';
import { QuietClock } from './quiet-clock.js';
import { requestBody } from './request-body.js';
import { SseParser } from './sse.js';

/** Options of {@link createHttpTransport}. */
export interface HttpTransportOptions {
  /** OpenAI-compatible base URL, e.g. `http://127.0.0.1:8000/v1`. */
  baseURL: string;
  apiKey?: string;
  /** Retries of a request that failed before streaming. @defaultValue 1 */
  maxRetries?: number;
  /**
   * Longest silence: connecting, waiting for headers, or between chunks.
   * Only chunks count once the stream runs (a server sending nothing but
   * `: keep-alive` comments is silent). @defaultValue 60000
   */
  timeoutMs?: number;
  /** Longest one request may take in all, retries excluded; 0 = no limit. @defaultValue 0 */
  totalTimeoutMs?: number;
  /** Longest event-stream line. @defaultValue 4 MiB */
  maxLineBytes?: number;
}

/**
 * Streams the chunks of one chat-completions request; with `slowNoticeMs`
 * (> 0), {@link LLM_SILENT} each time that long passes without a chunk.
 * With `sink`, each chunk of the event stream goes to it as it is parsed,
 * and only those it declines are yielded.
 */
export type StreamChat = (
  body: object,
  signal: AbortSignal,
  slowNoticeMs?: number,
  sink?: ChunkSink,
) => AsyncGenerator<ChunkLike | typeof LLM_SILENT, void, undefined>;

/** Statuses worth another try: rate limits, timeouts, conflicts, server errors. */
const RETRYABLE_STATUS = new Set([408, 409, 429, 500, 502, 503, 504]);
/** First backoff between retries; doubles each time, with jitter. */
const RETRY_BASE_DELAY_MS = 500;
/** Longest wait between retries, whatever `retry-after` says. */
const RETRY_MAX_DELAY_MS = 8_000;
/** How long a response may stay open after `[DONE]` before its connection is dropped. */
const DONE_GRACE_MS = 100;
/** How long an idle kept-alive connection waits for the next request. */
const KEEP_ALIVE_MS = 60_000;
/** Most of an error body kept for the message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * A lean streaming client for `POST /chat/completions`: undici's dispatcher
 * with kept-alive connections, the request body written once, the event
 * stream parsed from each piece of the body as undici reads it (no streams
 * in between). It is the hot path of every turn, so it does only what a
 * stream needs: retries before the first byte (429/5xx/connection errors,
 * honouring `retry-after`), one timeout for any silence, abort on the turn's
 * signal. A server that answers `stream:true` with a plain JSON completion is
 * read as one chunk.
 */
export function createHttpTransport(options: HttpTransportOptions): StreamChat {
  const base = new URL(options.baseURL.endsWith('/') ? options.baseURL : `${options.baseURL}/`);
  const target = new URL('chat/completions', base);
  const connections = new Connections(target.origin, {
    // The exchange keeps its own deadlines (only chunks count, not comments).
    headersTimeout: 0,
    bodyTimeout: 0,
    // A connection waits for the session's next turn (users think for seconds),
    // unless the server's Keep-Alive header says it closes sooner.
    keepAliveTimeout: KEEP_ALIVE_MS,
    keepAliveMaxTimeout: KEEP_ALIVE_MS,
  });
  const path = `${target.pathname}${target.search}`;
  const maxRetries = options.maxRetries ?? 1;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    'user-agent': 'troupe',
  };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  const where = redactUrl(target.href);
  const totalMs = options.totalTimeoutMs ?? 0;

  function open(payload: Buffer, signal: AbortSignal): Promise<Exchange> {
    // An aborted signal sends no event: the exchange would wait for the answer.
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    const client = connections.take();
    const exchange = new Exchange({
      where,
      timeoutMs,
      totalMs,
      signal,
      onOver: (complete) => connections.give(client, complete),
    });
    try {
      client.dispatch({ path, method: 'POST', headers, body: payload }, exchange);
    } catch (err) {
      exchange.destroy(err as Error);
    }
    return exchange.answered;
  }

  return async function* streamChat(body, signal, slowNoticeMs = 0, sink) {
    const payload = requestBody(body);
    // Slow notices: from the request on, through retries, until the last chunk.
    const watch = slowNoticeMs > 0 ? new SilenceWatch(slowNoticeMs) : undefined;
    let exchange: Exchange | undefined;
    try {
      exchange = yield* answer({ open, maxRetries, where }, payload, signal, watch);
    } finally {
      if (exchange === undefined) watch?.stop();
    }

    let complete = false;
    try {
      if (!(exchange.headers['content-type'] ?? '').includes('text/event-stream')) {
        // Some servers ignore `stream:true` and answer with the whole completion.
        yield completionToChunk(JSON.parse(await readAll(exchange)) as Record<string, unknown>);
      } else {
        // Parsed as the bytes arrive rather than through readSseChunks or an
        // async iterator, and handed to the sink as they are parsed while the
        // reader waits (no async step at all per chunk then), and the
        // silence clocks keep a timestamp instead of resetting a timer per
        // chunk. Not destroyed when the reader stops at [DONE]: the
        // connection goes back to the pool.
        const parser = new SseParser({ maxLineBytes: options.maxLineBytes });
        const inbox = new ChunkInbox(exchange, parser, watch, sink);
        try {
          for (;;) {
            const next = inbox.take();
            if (next !== undefined) {
              yield next;
              continue;
            }
            if (inbox.failure !== undefined) throw inbox.failure;
            if (inbox.ended) break;
            await inbox.arrival();
          }
        } finally {
          inbox.close();
        }
        const sawDone = parser.done;
        let finished = inbox.finished;
        for (const chunk of parser.end()) {
          finished ||= hasFinish(chunk);
          yield chunk;
        }
        // Neither [DONE] nor a finish_reason: the body was cut, not complete.
        if (!sawDone && !finished) throw new LlmTruncatedError();
        // Drop whatever follows [DONE] so the answer ends and the connection is reused.
        if (!exchange.complete) await exchange.finish(DONE_GRACE_MS);
      }
      complete = true;
    } catch (err) {
      if (signal.aborted) throw new TurnAbortedError(undefined, { cause: err });
      const silent = exchange.silence();
      if (silent) throw silent;
      if (err instanceof LlmStreamError) throw err;
      throw new LlmStreamError('The LLM stream broke off.', {
        cause: err,
        retryable: true,
        detail: `${where}: ${(err as Error).message}`,
      });
    } finally {
      exchange.stop();
      watch?.stop();
      // A stream left early (cancel, barge-in) must not go back to the pool half read.
      if (!complete) exchange.destroy();
    }
  };
}

/**
 * Sends the request until it is answered with a 2xx: retries before the
 * first byte (connection errors, retryable statuses, honouring
 * `retry-after`), with the watch's notices while it waits. An LLM that took
 * the request and stayed silent past the deadline is not asked again: it may
 * be working on it (a second request would be paid for twice), and the
 * client would wait twice `LLM_IDLE_TIMEOUT_MS`.
 */
async function* answer(
  request: {
    open: (payload: Buffer, signal: AbortSignal) => Promise<Exchange>;
    maxRetries: number;
    where: string;
  },
  payload: Buffer,
  signal: AbortSignal,
  watch: SilenceWatch | undefined,
): AsyncGenerator<typeof LLM_SILENT, Exchange, undefined> {
  for (let attempt = 0; ; attempt++) {
    let failure: LlmStreamError;
    let answered: Exchange;
    try {
      answered = yield* whileWaiting(
        request.open(payload, signal),
        watch,
        // Left during a notice (the reader stopped): the answer is not read.
        (late) => late.destroy(),
      );
    } catch (err) {
      if (signal.aborted) throw new TurnAbortedError(undefined, { cause: err });
      // The exchange's own deadlines (silent, too long in all).
      if (err instanceof LlmStreamError) throw err;
      failure = new LlmStreamError('The LLM could not be reached.', {
        cause: err,
        retryable: true,
        detail: `${request.where}: ${(err as Error).message}`,
      });
      if (attempt >= request.maxRetries) throw failure;
      yield* whileWaiting(backoff(attempt, {}, signal), watch);
      continue;
    }
    const status = answered.status;
    if (status >= 200 && status < 300) return answered;
    answered.stop();
    const detail = yield* whileWaiting(readErrorBody(answered), watch);
    failure = new LlmStreamError(clientMessage(status, detail), {
      status,
      retryable: RETRYABLE_STATUS.has(status),
      detail: `${request.where} answered HTTP ${status}: ${detail}`,
    });
    if (!failure.retryable || attempt >= request.maxRetries) throw failure;
    yield* whileWaiting(backoff(attempt, answered.headers, signal), watch);
  }
}

function hasFinish(chunk: ChunkLike): boolean {
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return false;
  for (let i = 0; i < choices.length; i++) if (choices[i]?.finish_reason) return true;
  return false;
}

/**
 * Slow notices: due each time `ms` pass without a chunk (counted from the
 * request, then from the last chunk or notice).
 */
class SilenceWatch {
  /** A notice is due and not yet taken. */
  due = false;
  /** Called when a notice falls due. */
  onDue: (() => void) | undefined;
  readonly #clock: QuietClock;

  constructor(ms: number) {
    this.#clock = new QuietClock(ms, () => {
      this.due = true;
      this.onDue?.();
    });
  }

  /** A chunk came: the silence starts again. */
  heard(at: number): void {
    this.#clock.heard(at);
  }

  /** Takes the due notice, if any. */
  take(): boolean {
    if (!this.due) return false;
    this.due = false;
    return true;
  }

  stop(): void {
    this.#clock.stop();
    this.onDue = undefined;
  }
}

/**
 * Awaits `pending`, putting {@link LLM_SILENT} in the stream each time a
 * notice falls due meanwhile (connecting, waiting for headers, retrying).
 * A reader that leaves during a notice leaves `pending` to `abandon`.
 */
async function* whileWaiting<T>(
  pending: Promise<T>,
  watch: SilenceWatch | undefined,
  abandon?: (late: T) => void,
): AsyncGenerator<typeof LLM_SILENT, T, undefined> {
  if (watch === undefined) return await pending;
  let settled = false;
  const result = pending.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  try {
    for (;;) {
      if (watch.take()) {
        yield LLM_SILENT;
        continue;
      }
      const due = new Promise<undefined>((resolve) => (watch.onDue = () => resolve(undefined)));
      const step = await Promise.race([result, due]);
      watch.onDue = undefined;
      if (step === undefined) continue;
      settled = true;
      if ('error' in step) throw step.error;
      return step.value;
    }
  } finally {
    watch.onDue = undefined;
    if (!settled && abandon) void pending.then(abandon, () => {});
  }
}

/**
 * The chunks of an event-stream answer, parsed as its bytes arrive, for
 * one reader to take in order (with the watch's notices when no chunk
 * waits). Ends at `[DONE]` (or a bad event: {@link SseParser.end} throws
 * it), at the end of the body, or with the exchange's error.
 */
class ChunkInbox implements BodySink {
  /** The answer failed (or closed before its end): the reader throws this. */
  failure: unknown = undefined;
  /** No chunk will come any more. */
  ended = false;
  /** A chunk with a `finish_reason` came (the stream was complete, [DONE] or not). */
  finished = false;
  #chunks: ChunkLike[] = [];
  #head = 0;
  /** Offered to the sink as it came and declined: the reader's next chunk. */
  #declined: ChunkLike | undefined;
  #wake: (() => void) | undefined;
  readonly #exchange: Exchange;
  readonly #parser: SseParser;
  readonly #watch: SilenceWatch | undefined;
  readonly #sink: ChunkSink | undefined;

  constructor(
    exchange: Exchange,
    parser: SseParser,
    watch: SilenceWatch | undefined,
    sink: ChunkSink | undefined,
  ) {
    this.#exchange = exchange;
    this.#parser = parser;
    this.#watch = watch;
    this.#sink = sink;
    if (watch) watch.onDue = this.#notify;
    exchange.attach(this);
  }

  /**
   * The next chunk the sink declined or (without a sink) the next chunk,
   * else a due notice, else undefined (then see `failure` and `ended`).
   */
  take(): ChunkLike | typeof LLM_SILENT | undefined {
    const declined = this.#declined;
    if (declined !== undefined) {
      this.#declined = undefined;
      return declined;
    }
    while (this.#head < this.#chunks.length) {
      const chunk = this.#chunks[this.#head]!;
      this.#chunks[this.#head++] = undefined as never;
      if (this.#head === this.#chunks.length) {
        this.#chunks.length = 0;
        this.#head = 0;
      }
      // Chunks that came while the reader was busy: offered now, in order.
      if (this.#sink?.(chunk) !== true) return chunk;
    }
    if (this.#watch?.take()) return LLM_SILENT;
    return undefined;
  }

  /** Resolves when there may be something to take. */
  arrival(): Promise<void> {
    return new Promise((resolve) => (this.#wake = resolve));
  }

  /** Stops listening (the reader is done): what else comes is dropped. */
  close(): void {
    this.#exchange.attach(undefined);
    if (this.#watch) this.#watch.onDue = undefined;
  }

  data(piece: Buffer): void {
    if (this.ended) return;
    const chunks = this.#parser.push(piece);
    if (chunks.length > 0) {
      // One clock read for both silence clocks.
      const now = performance.now();
      this.#exchange.heard(now);
      this.#watch?.heard(now);
      // A reader waiting with nothing left to take has handled every chunk
      // before these: the sink takes them here, in order, up to one it declines.
      // A chunk it declines was offered: it goes to the reader as it is.
      let sinking = this.#sink !== undefined && this.#wake !== undefined;
      for (const chunk of chunks) {
        this.finished ||= hasFinish(chunk);
        if (sinking) {
          sinking = this.#sink!(chunk);
          if (!sinking) this.#declined = chunk;
        } else {
          this.#chunks.push(chunk);
        }
      }
    }
    // [DONE] or a bad event: the rest of the body carries nothing.
    if (this.#parser.done) this.ended = true;
    if (this.#declined !== undefined || this.#head < this.#chunks.length || this.ended) {
      this.#notify();
    }
  }

  end(): void {
    this.ended = true;
    this.#notify();
  }

  fail(err: unknown): void {
    this.failure ??= err;
    this.#notify();
  }

  #notify = (): void => {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  };
}

async function backoff(
  attempt: number,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<void> {
  let delay = RETRY_BASE_DELAY_MS * 2 ** attempt * (0.75 + Math.random() * 0.5);
  const afterMs = Number(headers['retry-after-ms']);
  const afterS = Number(headers['retry-after']);
  if (Number.isFinite(afterMs) && headers['retry-after-ms'] !== undefined) delay = afterMs;
  else if (Number.isFinite(afterS) && headers['retry-after'] !== undefined) delay = afterS * 1000;
  try {
    await sleep(Math.min(Math.max(delay, 0), RETRY_MAX_DELAY_MS), undefined, { signal });
  } catch (err) {
    throw new TurnAbortedError(undefined, { cause: err });
  }
}

/** The answer's body as text; past `limit` bytes the rest is not read (the exchange is stopped). */
function readAll(exchange: Exchange, limit = Infinity): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const text = () => Buffer.concat(parts).toString('utf8');
    exchange.attach({
      data(piece) {
        if (size > limit) return;
        size += piece.length;
        if (size > limit) {
          exchange.destroy();
          resolve(text());
          return;
        }
        parts.push(piece);
      },
      end: () => resolve(text()),
      fail: (err) => (size > limit ? undefined : reject(err)),
    });
  });
}

/** The server's own words from an error body (OpenAI, vLLM and plain-text shapes). */
/** Statuses whose LLM message is about the request the client shaped (a tool's schema, an image, the context's length). */
const REQUEST_STATUS = new Set([400, 413, 422]);

/** The longest LLM message a client is told. */
const MAX_CLIENT_DETAIL_CHARS = 300;

/** Web addresses: the LLM's, or any it names, are not the client's to know. */
const ADDRESSES = /\b[a-z][a-z0-9+.-]*:\/\/[^\s'"]+/gi;

/**
 * What the client is told of an LLM's refusal: its own message when it is
 * about the request (the client can mend what it sent), without
 * credentials, addresses or file paths; the status alone otherwise
 * (credentials and the LLM's own faults are the operator's, and logged).
 */
export function clientMessage(status: number, detail: string): string {
  if (!REQUEST_STATUS.has(status)) return `The LLM answered HTTP ${status}.`;
  const said = redactPaths(redactSecrets(detail).replace(ADDRESSES, '[address]'))
    .replace(/\s+/g, ' ')
    .trim();
  const cut =
    said.length > MAX_CLIENT_DETAIL_CHARS ? `${said.slice(0, MAX_CLIENT_DETAIL_CHARS)}…` : said;
  return `The LLM answered HTTP ${status}: ${cut.replace(/[.\s]+$/, '')}.`;
}

async function readErrorBody(exchange: Exchange): Promise<string> {
  let text: string;
  try {
    text = await readAll(exchange, MAX_ERROR_BODY_BYTES);
  } catch {
    return 'the error body could not be read';
  }
  try {
    const json = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const message =
      typeof json.error === 'object' ? json.error?.message : (json.error ?? json.message);
    if (typeof message === 'string' && message !== '') return message;
  } catch {
    // Not JSON: use the text as it is.
  }
  return text.trim().slice(0, 500) || '(empty body)';
}

/** Reads a whole `chat.completion` as the one chunk a stream would have carried. */
export function completionToChunk(completion: Record<string, unknown>): ChunkLike {
  const choices = Array.isArray(completion.choices) ? completion.choices : [];
  const choice = (choices[0] ?? {}) as {
    message?: {
      content?: string | null;
      tool_calls?: Array<Record<string, unknown>>;
      function_call?: object;
    };
    finish_reason?: string | null;
  };
  const message = choice.message ?? {};
  const chunk: ChunkLike = {
    choices: [
      {
        index: 0,
        delta: {
          role: 'assistant',
          content: message.content ?? null,
          ...(Array.isArray(message.tool_calls)
            ? { tool_calls: message.tool_calls.map((tc, index) => ({ index, ...tc })) }
            : {}),
          ...(message.function_call ? { function_call: message.function_call } : {}),
        },
        finish_reason: choice.finish_reason ?? null,
      },
    ],
  };
  if (completion.usage && typeof completion.usage === 'object') chunk.usage = completion.usage;
  return chunk;
}
