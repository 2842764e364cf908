import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { LlmStreamError, LlmTruncatedError, TurnAbortedError, redactUrl } from '../errors.js';
import { LLM_SILENT, type ChunkLike } from './chunk.js';
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
 */
export type StreamChat = (
  body: object,
  signal: AbortSignal,
  slowNoticeMs?: number,
) => AsyncGenerator<ChunkLike | typeof LLM_SILENT, void, undefined>;

/** Statuses worth another try: rate limits, timeouts, conflicts, server errors. */
const RETRYABLE_STATUS = new Set([408, 409, 429, 500, 502, 503, 504]);
/** First backoff between retries; doubles each time, with jitter. */
const RETRY_BASE_DELAY_MS = 500;
/** Longest wait between retries, whatever `retry-after` says. */
const RETRY_MAX_DELAY_MS = 8_000;
/** How long a response may stay open after `[DONE]` before its socket is dropped. */
const DONE_GRACE_MS = 100;
/** Most of an error body kept for the message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * A lean streaming client for `POST /chat/completions`: node:http(s) with
 * keep-alive, the request body written once, the event stream parsed straight
 * from the socket. It is the hot path of every turn, so it does only what a
 * stream needs: retries before the first byte (429/5xx/connection errors,
 * honouring `retry-after`), one timeout for any silence, abort on the turn's
 * signal. A server that answers `stream:true` with a plain JSON completion is
 * read as one chunk.
 */
export function createHttpTransport(options: HttpTransportOptions): StreamChat {
  const base = new URL(options.baseURL.endsWith('/') ? options.baseURL : `${options.baseURL}/`);
  const target = new URL('chat/completions', base);
  const secure = target.protocol === 'https:';
  const lib = secure ? https : http;
  const agent = new lib.Agent({ keepAlive: true });
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

  function open(payload: string, signal: AbortSignal): Promise<Attempt> {
    return new Promise((resolve, reject) => {
      const req = lib.request(
        target,
        {
          method: 'POST',
          agent,
          headers: { ...headers, 'content-length': Buffer.byteLength(payload) },
          signal,
        },
        (res) => resolve({ res, ...clocks.streaming() }),
      );
      const clocks = watchDeadlines(req, where, timeoutMs, totalMs);
      req.on('error', reject);
      req.end(payload);
    });
  }

  return async function* streamChat(body, signal, slowNoticeMs = 0) {
    const payload = JSON.stringify(body);
    // Slow notices: from the request on, through retries, until the last chunk.
    const watch = slowNoticeMs > 0 ? new SilenceWatch(slowNoticeMs) : undefined;
    let answered: Attempt | undefined;
    try {
      answered = yield* answer({ open, maxRetries, where }, payload, signal, watch);
    } finally {
      if (answered === undefined) watch?.stop();
    }
    const { res, silence, chunk: heard, stop: stopClocks } = answered;

    let complete = false;
    try {
      if (!String(res.headers['content-type'] ?? '').includes('text/event-stream')) {
        // Some servers ignore `stream:true` and answer with the whole completion.
        yield completionToChunk(JSON.parse(await readAll(res)) as Record<string, unknown>);
      } else {
        // Parsed as the bytes arrive rather than through readSseChunks or the
        // response's async iterator: one async step per chunk on the hot path,
        // and the silence clocks keep a timestamp instead of resetting a timer
        // per chunk. Not destroyed when the reader stops at [DONE]: the socket
        // goes back to the pool.
        const parser = new SseParser({ maxLineBytes: options.maxLineBytes });
        const inbox = new ChunkInbox(res, parser, heard, watch);
        let finished = false;
        try {
          for (;;) {
            const next = inbox.take();
            if (next !== undefined) {
              if (next !== LLM_SILENT) finished ||= hasFinish(next);
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
        for (const chunk of parser.end()) {
          finished ||= hasFinish(chunk);
          yield chunk;
        }
        // Neither [DONE] nor a finish_reason: the body was cut, not complete.
        if (!sawDone && !finished) throw new LlmTruncatedError();
        // Drain whatever follows [DONE] so the response ends and the socket is reused.
        if (!res.readableEnded) {
          res.resume();
          await endOrGiveUp(res);
        }
      }
      complete = true;
    } catch (err) {
      if (signal.aborted) throw new TurnAbortedError(undefined, { cause: err });
      const silent = silence();
      if (silent) throw silent;
      if (err instanceof LlmStreamError) throw err;
      throw new LlmStreamError('The LLM stream broke off.', {
        cause: err,
        retryable: true,
        detail: `${where}: ${(err as Error).message}`,
      });
    } finally {
      stopClocks();
      watch?.stop();
      // A stream left early (cancel, barge-in) must not go back to the pool half read.
      if (!complete) res.destroy();
    }
  };
}

/**
 * Sends the request until it is answered with a 2xx: retries before the
 * first byte (connection errors, retryable statuses, honouring
 * `retry-after`), with the watch's notices while it waits.
 */
async function* answer(
  request: {
    open: (payload: string, signal: AbortSignal) => Promise<Attempt>;
    maxRetries: number;
    where: string;
  },
  payload: string,
  signal: AbortSignal,
  watch: SilenceWatch | undefined,
): AsyncGenerator<typeof LLM_SILENT, Attempt, undefined> {
  for (let attempt = 0; ; attempt++) {
    let failure: LlmStreamError;
    let answered: Attempt;
    try {
      answered = yield* whileWaiting(
        request.open(payload, signal),
        watch,
        // Left during a notice (the reader stopped): the answer is not read.
        (late) => late.res.destroy(),
      );
    } catch (err) {
      if (signal.aborted) throw new TurnAbortedError(undefined, { cause: err });
      failure =
        err instanceof LlmStreamError
          ? err
          : new LlmStreamError('The LLM could not be reached.', {
              cause: err,
              retryable: true,
              detail: `${request.where}: ${(err as Error).message}`,
            });
      if (attempt >= request.maxRetries) throw failure;
      yield* whileWaiting(backoff(attempt, undefined, signal), watch);
      continue;
    }
    const { res } = answered;
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return answered;
    answered.stop();
    const detail = yield* whileWaiting(readErrorBody(res), watch);
    failure = new LlmStreamError(`The LLM answered HTTP ${status}.`, {
      status,
      retryable: RETRYABLE_STATUS.has(status),
      detail: `${request.where} answered HTTP ${status}: ${detail}`,
    });
    if (!failure.retryable || attempt >= request.maxRetries) throw failure;
    yield* whileWaiting(backoff(attempt, res.headers, signal), watch);
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
 * request, then from the last chunk or notice). One timer, looked at when it
 * fires and set again for the rest: a chunk only notes the time.
 */
class SilenceWatch {
  /** A notice is due and not yet taken. */
  due = false;
  /** Called when a notice falls due. */
  onDue: (() => void) | undefined;
  readonly #ms: number;
  #since = performance.now();
  #timer: NodeJS.Timeout | undefined;

  constructor(ms: number) {
    this.#ms = ms;
    this.#timer = setTimeout(this.#check, ms);
  }

  /** A chunk came: the silence starts again. */
  heard(at: number): void {
    this.#since = at;
  }

  /** Takes the due notice, if any. */
  take(): boolean {
    if (!this.due) return false;
    this.due = false;
    return true;
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.onDue = undefined;
  }

  #check = (): void => {
    const now = performance.now();
    const quiet = now - this.#since;
    if (quiet < this.#ms) {
      this.#timer = setTimeout(this.#check, this.#ms - quiet);
      return;
    }
    this.#since = now;
    this.due = true;
    this.#timer = setTimeout(this.#check, this.#ms);
    this.onDue?.();
  };
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
 * The chunks of an event-stream response, parsed as its bytes arrive, for
 * one reader to take in order (with the watch's notices when no chunk
 * waits). Ends at `[DONE]` (or a bad event: {@link SseParser.end} throws
 * it), at the end of the body, or with the response's error.
 */
class ChunkInbox {
  /** The response failed (or closed before its end): the reader throws this. */
  failure: unknown = undefined;
  /** No chunk will come any more. */
  ended = false;
  #chunks: ChunkLike[] = [];
  #head = 0;
  #wake: (() => void) | undefined;
  readonly #res: http.IncomingMessage;
  readonly #parser: SseParser;
  readonly #heard: () => void;
  readonly #watch: SilenceWatch | undefined;

  constructor(
    res: http.IncomingMessage,
    parser: SseParser,
    heard: () => void,
    watch: SilenceWatch | undefined,
  ) {
    this.#res = res;
    this.#parser = parser;
    this.#heard = heard;
    this.#watch = watch;
    if (watch) watch.onDue = this.#notify;
    res.on('data', this.#onData);
    res.on('end', this.#onEnd);
    res.on('error', this.#onError);
    res.on('close', this.#onClose);
  }

  /** The next chunk, else a due notice, else undefined (then see `failure` and `ended`). */
  take(): ChunkLike | typeof LLM_SILENT | undefined {
    if (this.#head < this.#chunks.length) {
      const chunk = this.#chunks[this.#head]!;
      this.#chunks[this.#head++] = undefined as never;
      if (this.#head === this.#chunks.length) {
        this.#chunks.length = 0;
        this.#head = 0;
      }
      return chunk;
    }
    if (this.#watch?.take()) return LLM_SILENT;
    return undefined;
  }

  /** Resolves when there may be something to take. */
  arrival(): Promise<void> {
    return new Promise((resolve) => (this.#wake = resolve));
  }

  /** Stops listening (the reader is done); the response itself is left as it is. */
  close(): void {
    const res = this.#res;
    res.off('data', this.#onData);
    res.off('end', this.#onEnd);
    res.off('error', this.#onError);
    res.off('close', this.#onClose);
    if (this.#watch) this.#watch.onDue = undefined;
    // Not flowing any more: whoever reads on (the drain after [DONE]) resumes it.
    res.pause();
  }

  #notify = (): void => {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  };

  #onData = (piece: Buffer): void => {
    if (this.ended) return;
    const chunks = this.#parser.push(piece);
    if (chunks.length > 0) {
      this.#heard();
      this.#watch?.heard(performance.now());
      for (const chunk of chunks) this.#chunks.push(chunk);
    }
    // [DONE] or a bad event: the rest of the body carries nothing.
    if (this.#parser.done) this.ended = true;
    if (chunks.length > 0 || this.ended) this.#notify();
  };

  #onEnd = (): void => {
    this.ended = true;
    this.#notify();
  };

  #onError = (err: unknown): void => {
    this.failure ??= err;
    this.#notify();
  };

  #onClose = (): void => {
    if (!this.ended) this.failure ??= new Error('the response closed before its end');
    this.#notify();
  };
}

/**
 * The response of one attempt; `silence` says whether a deadline ended it,
 * `chunk` restarts the silence clock, `stop` ends the clocks.
 */
interface Attempt {
  res: http.IncomingMessage;
  silence: () => LlmStreamError | undefined;
  chunk: () => void;
  stop: () => void;
}

/**
 * A request's deadlines: `timeoutMs` of socket silence until the answer
 * starts, then `timeoutMs` without a chunk (bytes may be comments: only
 * `chunk()` counts), and `totalMs` in all (0 = none). A deadline that passes
 * destroys the request with its {@link LlmStreamError}.
 */
function watchDeadlines(
  req: http.ClientRequest,
  where: string,
  timeoutMs: number,
  totalMs: number,
): { streaming: () => Omit<Attempt, 'res'> } {
  let silence: LlmStreamError | undefined;
  let idle: NodeJS.Timeout | undefined;
  const fail = (error: LlmStreamError) => {
    silence = error;
    stop();
    req.destroy(error);
  };
  const silentFor = () =>
    new LlmStreamError(`The LLM was silent for ${timeoutMs} ms.`, {
      retryable: true,
      detail: `${where} sent no chunk for ${timeoutMs} ms`,
    });
  const total =
    totalMs > 0
      ? setTimeout(
          () =>
            fail(
              new LlmStreamError(`The LLM took longer than ${totalMs} ms in all.`, {
                retryable: true,
                detail: `${where} still streaming after ${totalMs} ms`,
              }),
            ),
          totalMs,
        )
      : undefined;
  function stop(): void {
    clearTimeout(idle);
    clearTimeout(total);
  }
  req.setTimeout(timeoutMs, () => fail(silentFor()));
  req.on('close', stop);
  return {
    streaming() {
      // From here only chunks count as news. The clock is looked at when
      // its timer fires (and set again for the rest), not reset per chunk.
      req.setTimeout(0);
      let heardAt = performance.now();
      const check = (): void => {
        const quiet = performance.now() - heardAt;
        if (quiet >= timeoutMs) fail(silentFor());
        else idle = setTimeout(check, timeoutMs - quiet);
      };
      idle = setTimeout(check, timeoutMs);
      return {
        silence: () => silence,
        chunk: () => {
          heardAt = performance.now();
        },
        stop,
      };
    },
  };
}

/**
 * Waits briefly for a response to end after its `[DONE]`: a well-behaved
 * server ends it in the same packet, and only an ended response frees its
 * kept-alive socket for the next round. A server that holds the stream open
 * loses the socket instead of stalling the turn.
 */
function endOrGiveUp(res: http.IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      res.off('end', done);
      res.destroy();
      resolve();
    }, DONE_GRACE_MS);
    function done(): void {
      clearTimeout(timer);
      resolve();
    }
    res.once('end', done);
  });
}

async function backoff(
  attempt: number,
  headers: http.IncomingHttpHeaders | undefined,
  signal: AbortSignal,
): Promise<void> {
  let delay = RETRY_BASE_DELAY_MS * 2 ** attempt * (0.75 + Math.random() * 0.5);
  const afterMs = Number(headers?.['retry-after-ms']);
  const afterS = Number(headers?.['retry-after']);
  if (Number.isFinite(afterMs) && headers?.['retry-after-ms'] !== undefined) delay = afterMs;
  else if (Number.isFinite(afterS) && headers?.['retry-after'] !== undefined) delay = afterS * 1000;
  try {
    await sleep(Math.min(Math.max(delay, 0), RETRY_MAX_DELAY_MS), undefined, { signal });
  } catch (err) {
    throw new TurnAbortedError(undefined, { cause: err });
  }
}

async function readAll(res: http.IncomingMessage, limit = Infinity): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of res as AsyncIterable<Buffer>) {
    size += part.length;
    if (size > limit) {
      res.destroy();
      break;
    }
    parts.push(part);
  }
  return Buffer.concat(parts).toString('utf8');
}

/** The server's own words from an error body (OpenAI, vLLM and plain-text shapes). */
async function readErrorBody(res: http.IncomingMessage): Promise<string> {
  let text: string;
  try {
    text = await readAll(res, MAX_ERROR_BODY_BYTES);
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
