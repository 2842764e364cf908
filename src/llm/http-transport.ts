import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { LlmStreamError, LlmTruncatedError, TurnAbortedError, redactUrl } from '../errors.js';
import type { ChunkLike } from './chunk.js';
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

/** Streams the chunks of one chat-completions request. */
export type StreamChat = (
  body: object,
  signal: AbortSignal,
) => AsyncGenerator<ChunkLike, void, undefined>;

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

  return async function* streamChat(body, signal) {
    const payload = JSON.stringify(body);
    let res: http.IncomingMessage;
    let silence: Attempt['silence'];
    let heard: Attempt['chunk'];
    let stopClocks: Attempt['stop'];
    for (let attempt = 0; ; attempt++) {
      let failure: LlmStreamError;
      try {
        ({ res, silence, chunk: heard, stop: stopClocks } = await open(payload, signal));
      } catch (err) {
        if (signal.aborted) throw new TurnAbortedError(undefined, { cause: err });
        failure =
          err instanceof LlmStreamError
            ? err
            : new LlmStreamError('The LLM could not be reached.', {
                cause: err,
                retryable: true,
                detail: `${where}: ${(err as Error).message}`,
              });
        if (attempt >= maxRetries) throw failure;
        await backoff(attempt, undefined, signal);
        continue;
      }
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) break;
      stopClocks();
      const detail = await readErrorBody(res);
      failure = new LlmStreamError(`The LLM answered HTTP ${status}.`, {
        status,
        retryable: RETRYABLE_STATUS.has(status),
        detail: `${where} answered HTTP ${status}: ${detail}`,
      });
      if (!failure.retryable || attempt >= maxRetries) throw failure;
      await backoff(attempt, res.headers, signal);
    }

    let complete = false;
    try {
      if (!String(res.headers['content-type'] ?? '').includes('text/event-stream')) {
        // Some servers ignore `stream:true` and answer with the whole completion.
        yield completionToChunk(JSON.parse(await readAll(res)) as Record<string, unknown>);
      } else {
        // Parsed here rather than through readSseChunks: one async layer less
        // per chunk on the hot path. Not destroyed when the reader stops at
        // [DONE]: the socket goes back to the pool.
        const parser = new SseParser({ maxLineBytes: options.maxLineBytes });
        let finished = false;
        for await (const piece of res.iterator({ destroyOnReturn: false })) {
          for (const chunk of parser.push(piece as Buffer)) {
            heard();
            finished ||= hasFinish(chunk);
            yield chunk;
          }
          if (parser.done) break;
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
      // A stream left early (cancel, barge-in) must not go back to the pool half read.
      if (!complete) res.destroy();
    }
  };
}

function hasFinish(chunk: ChunkLike): boolean {
  const choices = chunk.choices;
  return choices !== undefined && choices.some((c) => c?.finish_reason);
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
      // From here only chunks count as news.
      req.setTimeout(0);
      idle = setTimeout(() => fail(silentFor()), timeoutMs);
      return { silence: () => silence, chunk: () => idle?.refresh(), stop };
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
