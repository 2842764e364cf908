import OpenAI from 'openai';
import {
  ConfigError,
  LlmStreamError,
  LlmTruncatedError,
  TurnAbortedError,
  redactSecrets,
  redactUrl,
} from '../errors.js';
import type { ToolLogger } from '../tools/types.js';
import type { ChatMessage, ChunkLike, ChunkSink, LLM_SILENT } from './chunk.js';
import { createHttpTransport } from './http-transport.js';

/**
 * How chat completions are streamed: `http`, Troupe's lean client on undici's
 * dispatcher (the default: about half the CPU per request), or `openai`, the `openai`
 * package's own client (for custom fetch, proxies or provider quirks it knows).
 */
export type LlmTransport = 'http' | 'openai';

/** How tools reach the model: the API's tool calling, or instructions in the prompt. */
export type ToolMode = 'native' | 'prompt';
/** Wire format of native tool calling: `tools` (current) or legacy `functions`. */
export type ToolFormat = 'tools' | 'functions';

/** Options of {@link createLlmClient}. */
export interface LlmClientOptions {
  /** @defaultValue 'http' */
  transport?: LlmTransport;
  /** OpenAI-compatible base URL, e.g. `http://127.0.0.1:8000/v1`. */
  baseURL: string;
  /** Bearer key; servers that need none get a placeholder. */
  apiKey?: string;
  /** The model to use; when absent, the only model of `GET /models`. */
  model?: string;
  /** Retries of a request that failed before streaming (429, 5xx, connection). @defaultValue 1 */
  maxRetries?: number;
  /** Longest silence: no chunk for this long fails the request (comments do not count). @defaultValue 60000 */
  timeoutMs?: number;
  /** Longest one request may take in all; 0 = no limit. @defaultValue 0 */
  totalTimeoutMs?: number;
  /** Longest event-stream line (`http` transport). @defaultValue 4 MiB */
  maxLineBytes?: number;
  /**
   * Silence after which turns tell their client the model is slow (a
   * `llm.slow` turn event); 0 = never. @defaultValue 5000
   */
  slowNoticeMs?: number;
  /** Ask for a final usage chunk (`stream_options.include_usage`). @defaultValue true */
  includeUsage?: boolean;
  /** Signal for the model lookup. */
  signal?: AbortSignal;
  /** Where the SDK's own warnings go (e.g. an unparsable chunk); silent when absent. */
  log?: ToolLogger;
  /** The backend's way of calling tools; characters may override it. @defaultValue 'native' */
  toolMode?: ToolMode;
  /** The backend's tool-calling wire format. @defaultValue 'tools' */
  toolFormat?: ToolFormat;
}

/** The body of a chat-completions request, minus `model` and `stream`. */
export interface ChatRequest {
  messages: ChatMessage[];
  tools?: Array<{
    type: 'function';
    function: { name: string; description?: string; parameters?: object };
  }>;
  tool_choice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };
  /** Legacy function calling. */
  functions?: Array<{ name: string; description?: string; parameters?: object }>;
  function_call?: 'auto' | 'none' | { name: string };
  temperature?: number;
  max_tokens?: number;
  model?: string;
}

/** A streaming chat-completions client bound to one model. */
export interface LlmClient {
  readonly model: string;
  readonly baseURL: string;
  /** How this backend calls tools, when it is not the native `tools` API. */
  readonly toolMode?: ToolMode;
  readonly toolFormat?: ToolFormat;
  /** Silence after which a turn reports `llm.slow` (0 = never); see {@link LlmClientOptions.slowNoticeMs}. */
  readonly slowNoticeMs?: number;
  /**
   * Streams raw chunks; throws {@link LlmStreamError} or {@link TurnAbortedError}.
   * A transport may hand chunks to `sink` as it reads them and yield only
   * those the sink declines; one that ignores `sink` yields them all.
   */
  stream(request: ChatRequest, signal: AbortSignal, sink?: ChunkSink): AsyncIterable<ChunkLike>;
  /**
   * Like `stream`, with `LLM_SILENT` among the chunks each time `slowNoticeMs`
   * pass without one, kept by the transport's own clock (no timer race per
   * chunk). Transports without it get the turn's own watch instead.
   */
  streamWatched?(
    request: ChatRequest,
    signal: AbortSignal,
    slowNoticeMs: number,
    sink?: ChunkSink,
  ): AsyncIterable<ChunkLike | typeof LLM_SILENT>;
}

/** Default retries of a request that failed before streaming. */
export const DEFAULT_LLM_MAX_RETRIES = 1;
/** Default whole-request timeout. */
export const DEFAULT_LLM_TIMEOUT_MS = 60_000;

/**
 * Connects to an OpenAI-compatible endpoint (vLLM, OpenAI, Ollama, llama.cpp,
 * Groq…) and picks the model: the configured one, else the only one the
 * server lists. Several or none listed is a {@link ConfigError}.
 *
 * @example
 * const llm = await createLlmClient({ baseURL: 'http://127.0.0.1:8000/v1' });
 * for await (const chunk of llm.stream({ messages }, signal)) …
 */
export async function createLlmClient(options: LlmClientOptions): Promise<LlmClient> {
  const doneSeen = new WeakMap<Response, { done: boolean }>();
  // fetch refuses URLs with `user:pass@`: the SDK gets them as a Basic header.
  const basic = basicAuth(options.baseURL);
  const openai = new OpenAI({
    fetch: watchDoneFetch(doneSeen),
    baseURL: basic?.url ?? options.baseURL,
    ...(basic && !options.apiKey ? { defaultHeaders: { authorization: basic.header } } : {}),
    apiKey: options.apiKey || 'no-key',
    maxRetries: options.maxRetries ?? DEFAULT_LLM_MAX_RETRIES,
    timeout: options.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS,
    // The SDK prints to the console by default; route it to our logger instead.
    ...(options.log
      ? { logger: sdkLogger(options.log), logLevel: 'warn' as const }
      : { logLevel: 'off' as const }),
  });
  const model = options.model || (await resolveModel(openai, options.baseURL, options.signal));
  const includeUsage = options.includeUsage ?? true;
  const baseURL = options.baseURL;

  const backend = {
    model,
    baseURL,
    ...(options.toolMode ? { toolMode: options.toolMode } : {}),
    ...(options.toolFormat ? { toolFormat: options.toolFormat } : {}),
    ...(options.slowNoticeMs !== undefined ? { slowNoticeMs: options.slowNoticeMs } : {}),
  };
  const idleMs = options.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS;
  const totalMs = options.totalTimeoutMs ?? 0;
  const bodyOf = (request: ChatRequest) => ({
    ...request,
    model: request.model ?? model,
    stream: true as const,
    ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
  });

  if ((options.transport ?? 'http') === 'http') {
    const transport = createHttpTransport({
      baseURL,
      ...(options.apiKey ? { apiKey: options.apiKey } : {}),
      maxRetries: options.maxRetries ?? DEFAULT_LLM_MAX_RETRIES,
      timeoutMs: idleMs,
      totalTimeoutMs: totalMs,
      ...(options.maxLineBytes !== undefined ? { maxLineBytes: options.maxLineBytes } : {}),
    });
    return {
      ...backend,
      // Without a notice interval the transport puts no LLM_SILENT in.
      stream: (request, signal, sink) =>
        transport(bodyOf(request), signal, 0, sink) as AsyncIterable<ChunkLike>,
      streamWatched: (request, signal, slowNoticeMs, sink) =>
        transport(bodyOf(request), signal, slowNoticeMs, sink),
    };
  }

  return {
    ...backend,
    stream: async function* streamChat(request, outer) {
      const body = bodyOf(request);
      // Deadlines the SDK does not keep: silence between chunks, and the whole request.
      const deadline = new AbortController();
      const silent = setTimeout(
        () =>
          deadline.abort(
            new LlmStreamError(`The LLM was silent for ${idleMs} ms.`, {
              retryable: true,
              detail: `${redactUrl(baseURL)} sent no chunk for ${idleMs} ms`,
            }),
          ),
        idleMs,
      );
      const total =
        totalMs > 0
          ? setTimeout(
              () =>
                deadline.abort(
                  new LlmStreamError(`The LLM took longer than ${totalMs} ms in all.`, {
                    retryable: true,
                    detail: `${redactUrl(baseURL)} still streaming after ${totalMs} ms`,
                  }),
                ),
              totalMs,
            )
          : undefined;
      const signal = AbortSignal.any([outer, deadline.signal]);
      const late = (err: unknown): unknown =>
        deadline.signal.aborted && !outer.aborted ? deadline.signal.reason : err;
      let stream: AsyncIterable<ChunkLike> & { controller: AbortController };
      let seen: { done: boolean } | undefined;
      try {
        // The SDK's types are stricter than what real servers take and send
        // (legacy `functions`, loose chunks); the body is built to the wire format.
        const { data, response } = await openai.chat.completions
          .create(body as never, { signal })
          .withResponse();
        stream = data as never;
        seen = doneSeen.get(response);
      } catch (err) {
        clearTimeout(silent);
        clearTimeout(total);
        throw toLlmError(late(err), outer, baseURL);
      }
      let complete = false;
      try {
        let finished = false;
        for await (const chunk of stream) {
          silent.refresh();
          finished ||= chunk.choices?.some((c) => c?.finish_reason) ?? false;
          yield chunk;
        }
        if (deadline.signal.aborted && !outer.aborted) throw deadline.signal.reason;
        // Neither [DONE] nor a finish_reason: the body was cut, not complete.
        if (seen && !seen.done && !finished && !signal.aborted) throw new LlmTruncatedError();
        complete = true;
      } catch (err) {
        throw toLlmError(late(err), outer, baseURL);
      } finally {
        clearTimeout(silent);
        clearTimeout(total);
        // Stops the HTTP stream when the consumer leaves early (cancel, error).
        if (!complete) stream.controller.abort();
      }
    },
  };
}

/** Lists the server's models and returns the only one; otherwise a ConfigError. */
export async function resolveModel(
  openai: OpenAI,
  baseURL: string,
  signal?: AbortSignal,
): Promise<string> {
  let ids: string[];
  try {
    const page = await openai.models.list({ signal });
    ids = page.data.map((m) => m.id);
  } catch (err) {
    throw new ConfigError(
      `LLM at ${redactUrl(baseURL)}: could not list models (${redactSecrets((err as Error).message)}). ` +
        'Check LLM_BASE_URL, or set LLM_MODEL to skip the lookup.',
      { cause: err },
    );
  }
  if (ids.length === 1) return ids[0]!;
  if (ids.length === 0) {
    throw new ConfigError(
      `LLM at ${redactUrl(baseURL)} lists no models. Set LLM_MODEL to the model to use.`,
    );
  }
  throw new ConfigError(
    `LLM at ${redactUrl(baseURL)} serves ${ids.length} models (${ids.join(', ')}); set LLM_MODEL to one of them.`,
  );
}

function sdkLogger(log: ToolLogger) {
  const to =
    (level: 'warn' | 'error' | 'info' | 'debug') =>
    (message: string, ...detail: unknown[]): void =>
      log[level]({ sdkMessage: message, detail }, 'llm client message');
  return { error: to('error'), warn: to('warn'), info: to('info'), debug: to('debug') };
}

/** A base URL's `user:pass@` as a Basic authorization header, and the URL without it. */
function basicAuth(baseURL: string): { url: string; header: string } | undefined {
  let url: URL;
  try {
    url = new URL(baseURL);
  } catch {
    return undefined;
  }
  if (url.username === '' && url.password === '') return undefined;
  const pair = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  url.username = '';
  url.password = '';
  return { url: url.href, header: `Basic ${Buffer.from(pair).toString('base64')}` };
}

/** The SSE end marker, as servers write it (with or without the space). */
const DONE_MARKERS = [Buffer.from('data: [DONE]'), Buffer.from('data:[DONE]')];

/**
 * A fetch that notes, per event-stream response, whether `[DONE]` went by:
 * the SDK ends a cut stream quietly, and only the bytes tell.
 */
function watchDoneFetch(seen: WeakMap<Response, { done: boolean }>) {
  return async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(url, init);
    if (!res.body || !(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      return res;
    }
    const state = { done: false };
    let tail = Buffer.alloc(0);
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(piece, out) {
          if (!state.done) {
            const window = Buffer.concat([tail, piece]);
            state.done = DONE_MARKERS.some((m) => window.includes(m));
            tail = window.subarray(Math.max(0, window.length - 12));
          }
          out.enqueue(piece);
        },
      }),
    );
    const wrapped = new Response(body, {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
    seen.set(wrapped, state);
    return wrapped;
  };
}

function toLlmError(err: unknown, signal: AbortSignal, baseURL: string): Error {
  if (signal.aborted || err instanceof OpenAI.APIUserAbortError) {
    return new TurnAbortedError('The turn was cancelled.', { cause: err });
  }
  if (err instanceof LlmStreamError) return err;
  if (err instanceof OpenAI.APIError) {
    const status = err.status;
    const retryable = status === undefined || status === 429 || status >= 500;
    return new LlmStreamError(
      status ? `The LLM answered HTTP ${status}.` : 'The LLM could not be reached.',
      {
        cause: err,
        retryable,
        ...(status !== undefined ? { status } : {}),
        detail: `${redactUrl(baseURL)}: ${err.message}`,
      },
    );
  }
  return new LlmStreamError('The LLM stream broke off.', {
    cause: err,
    retryable: true,
    detail: `${redactUrl(baseURL)}: ${(err as Error)?.message ?? String(err)}`,
  });
}
