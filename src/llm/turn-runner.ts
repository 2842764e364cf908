import { randomUUID } from 'node:crypto';
import { LlmStreamError, LlmTruncatedError, TroupeError, TurnAbortedError } from '../errors.js';
import { executeToolCalls, parseToolArguments, type BackgroundStarter } from '../tools/executor.js';
import type { Toolset } from '../tools/library.js';
import type {
  ToolCall,
  ToolContext,
  ToolDescription,
  ToolLogger,
  ToolResult,
} from '../tools/types.js';
import type { AssembledCall } from './assembler.js';
import {
  LLM_SILENT,
  type AssistantToolCall,
  type ChatMessage,
  type ChunkLike,
  type ChunkSink,
  type UsageLike,
} from './chunk.js';
import type { ChatRequest, LlmClient, ToolFormat, ToolMode } from './client.js';
import {
  DEFAULT_MAX_TOOL_ROUNDS,
  DEFAULT_SLOW_NOTICE_MS,
  DEFAULT_ROUND_LIMIT_FALLBACK,
  PROMPT_MODE_FINAL_NOTE,
} from './constants.js';
import {
  promptToolResultsMessage,
  promptToolsInstructions,
  type PromptCall,
} from './prompt-tools.js';
import { RoundReader } from './round-reader.js';
import { estimateRoundUsage } from './token-estimate.js';
import { TurnState, epochNow, runningCalls, type TurnProgress } from './turn-state.js';

/** Options of {@link runTurn}. */
export interface TurnOptions {
  llm: LlmClient;
  /** History before this turn (system prompt first), ending with the user's message. */
  messages: readonly ChatMessage[];
  toolset: Toolset;
  /** The turn's signal: stops the HTTP stream and cancellable tools. */
  signal: AbortSignal;
  session: ToolContext['session'];
  log: ToolLogger;
  /** Per character; else the backend's (`llm.toolMode`), else 'native'. */
  toolMode?: ToolMode;
  /** Per character; else the backend's (`llm.toolFormat`), else 'tools'. */
  toolFormat?: ToolFormat;
  /** Tool rounds before the model must answer without tools. @defaultValue 10 */
  maxToolRounds?: number;
  /** Timeout of tools that set none. @defaultValue 100 */
  toolTimeoutMs?: number;
  /** Cap on each tool output the model sees. @defaultValue 16384 */
  maxToolOutputBytes?: number;
  /** Sampling settings passed through to the request. */
  request?: Pick<ChatRequest, 'temperature' | 'max_tokens' | 'model' | 'tool_choice'>;
  /** Said when the model still calls tools after the round limit. */
  roundLimitFallback?: string;
  /**
   * Tools the client runs (Realtime `session.tools`): offered to the model
   * beside the toolset's; a round that calls one ends the turn with the calls
   * in `clientCalls`, after the round's server-side calls have run.
   */
  clientTools?: readonly ToolDescription[];
  /**
   * Called before each request after the first with the messages the turn
   * has added so far; returns the history to send before them (e.g. trimmed
   * again so tool rounds do not push the request past a context budget).
   */
  fitHistory?: (added: readonly ChatMessage[]) => readonly ChatMessage[];
  /**
   * Call ids the conversation holds beyond `messages` (e.g. calls trimmed
   * from the request, client calls still waiting): a new call whose id is
   * taken gets a fresh one. Ids in `messages` are always avoided.
   */
  callIdTaken?: (id: string) => boolean;
  /**
   * Silence of the LLM (no chunk) after which the turn emits `llm.slow`, and
   * again each time as long; 0 = never. Else the client's `slowNoticeMs`.
   * @defaultValue 5000
   */
  slowNoticeMs?: number;
  /**
   * Asked after each round's tools have run: true ends the turn there, as
   * `completed` (a transfer to another character was made).
   */
  endTurn?: () => boolean;
  /**
   * Runs `background: true` tools beside the conversation: the model gets a
   * "started" result at once and the turn goes on. Unset = they run inline.
   */
  background?: BackgroundStarter;
  /**
   * Takes the turn's `text.delta` events as they come, instead of the event
   * stream: no async step per chunk on the hot path (a transport that takes
   * a sink calls it from its read of the body). Called while the turn runs,
   * after every event yielded before it was handled (the stream's reader
   * handles an event before asking for the next). What it throws ends the
   * turn as failed, as a broken stream does.
   */
  onTextDelta?: (event: Extract<TurnEvent, { type: 'text.delta' }>) => void;
  /**
   * Handed the turn's running state once, as the turn starts: what it has
   * said and added so far can be read while it runs (a checkpoint of a reply
   * under way). Read only.
   */
  onStart?: (turn: TurnProgress) => void;
}

/** Token counts of a turn, summed over its requests. */
export interface TurnUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Wall-clock stamps of one LLM request (epoch ms, sub-ms precision). */
export interface RoundTiming {
  requestAt: number;
  /** The first chunk that carried output (text, reasoning or a tool call). */
  firstTokenAt: number | null;
  lastChunkAt: number | null;
  /** Longest handler of the round's tools (they run in parallel). */
  handlerMs: number;
}

/** Why tool calls were not run: cut off by the token limit or the filter, or past the round limit. */
export type DiscardReason = 'length' | 'content_filter' | 'max_tool_rounds';

/** Why a turn did not simply complete. */
export type TurnEndReason = DiscardReason | 'cancelled' | 'llm_error' | 'stream_truncated';

/** How a turn ended and what it added to history. */
export interface TurnSummary {
  status: 'completed' | 'cancelled' | 'incomplete' | 'failed';
  reason?: TurnEndReason;
  /** All reply text streamed this turn (tool-call text excluded). */
  text: string;
  /** Messages to append to history: always valid to send back to the LLM. */
  messages: ChatMessage[];
  /** LLM requests made. */
  requests: number;
  toolRounds: number;
  toolCalls: ToolResult[];
  /** Calls of client-side tools awaiting the client's output (the last assistant message holds them). */
  clientCalls: ToolCall[];
  usage: TurnUsage;
  /**
   * Part of `usage` is estimated (about 4 characters a token): a round the
   * model began was cut before the server's own count, which comes last.
   */
  usageEstimated?: true;
  /** Turn start → first reply text, ms; null when no text came. */
  ttftMs: number | null;
  rounds: RoundTiming[];
  durationMs: number;
}

/** The typed event stream of a turn, for the session layer to map onto the wire. */
export type TurnEvent =
  | { type: 'round.start'; round: number; final: boolean }
  | { type: 'text.delta'; round: number; delta: string }
  | { type: 'reasoning.delta'; round: number; delta: string }
  | { type: 'tool_call.start'; round: number; callId: string; name: string }
  | { type: 'tool_call.arguments.delta'; round: number; callId: string; delta: string }
  | { type: 'tool_call.done'; round: number; call: ToolCall }
  | {
      type: 'tool_calls.discarded';
      round: number;
      calls: ToolCall[];
      reason: DiscardReason;
    }
  | { type: 'tool.result'; round: number; result: ToolResult }
  | { type: 'usage'; round: number; usage: UsageLike }
  /**
   * The LLM has sent nothing for `silentMs` this round (before its first chunk
   * or between two): the place to tell the client the model is slow.
   */
  | { type: 'llm.slow'; round: number; silentMs: number }
  | { type: 'round.end'; round: number; finishReason: string | null; toolCalls: number }
  | { type: 'error'; error: TroupeError }
  | { type: 'finish'; summary: TurnSummary };

export { epochNow } from './turn-state.js';

/**
 * Runs one turn: stream → tool calls? → run them → resume with the results →
 * … until a reply without tool calls or the round limit. Text streams out as
 * it arrives, before, between and after tool calls. Never throws: failures
 * are `error` events and a `finish` with status `failed`.
 *
 * At the round limit the model gets one last request with `tool_choice:"none"`
 * (prompt mode: a note); tool calls it still makes are discarded, reported, and
 * replaced by `roundLimitFallback` when it said nothing.
 *
 * @example
 * for await (const e of runTurn({ llm, messages, toolset, signal, session, log })) {
 *   if (e.type === 'text.delta') send(e.delta);
 * }
 */
export async function* runTurn(options: TurnOptions): AsyncGenerator<TurnEvent, TurnSummary> {
  const { llm, toolset, signal } = options;
  const turn = new TurnState(options.onTextDelta);
  options.onStart?.(turn);
  const toolMode = options.toolMode ?? llm.toolMode ?? 'native';
  const legacy = (options.toolFormat ?? llm.toolFormat) === 'functions';
  const maxToolRounds = options.maxToolRounds ?? DEFAULT_MAX_TOOL_ROUNDS;
  const clientTools = options.clientTools ?? [];
  const clientNames = new Set(clientTools.map((t) => t.name));
  const descriptions = toolset.descriptions.concat(clientTools);
  const hasTools = descriptions.length > 0;
  const withTools = (messages: readonly ChatMessage[]) =>
    toolMode === 'prompt' && hasTools ? withPromptTools(messages, descriptions) : messages;
  let base = withTools(options.messages);

  // TOOL_CALL lines carry no ids; these tell calls apart across rounds and
  // turns (the session keys items and client outputs by call id).
  const promptIds = `prompt_call_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const slowMs = options.slowNoticeMs ?? llm.slowNoticeMs ?? DEFAULT_SLOW_NOTICE_MS;
  // Read from the history only when a call's id is checked: most turns call nothing,
  // and the list is as long as the conversation.
  let usedIds: Set<string> | undefined;
  const used = (): Set<string> => (usedIds ??= callIdsOf(options.messages));
  const idTaken = (id: string): boolean => used().has(id) || (options.callIdTaken?.(id) ?? false);

  for (let round = 0; ; round++) {
    if (signal.aborted) return yield* finish(turn.summarize('cancelled', 'cancelled'));
    // The limit holds whatever is offered: a model may call tools it was never given.
    const final = turn.toolRounds >= maxToolRounds;
    if (round > 0 && options.fitHistory) base = withTools(options.fitHistory(turn.added));
    const request = buildRequest(options, descriptions, base, turn.added, toolMode, legacy, final);
    yield { type: 'round.start', round, final };

    const timing = turn.startRound();
    const reader = new RoundReader({
      turn,
      round,
      timing,
      signal,
      idTaken,
      promptTools: toolMode === 'prompt' && hasTools,
      textTaken: options.onTextDelta !== undefined,
    });
    const { filter, promptCalls } = reader;
    let failure: unknown;

    try {
      for await (const chunk of chunksOf(llm, request, signal, slowMs, reader.sink)) {
        if (chunk === LLM_SILENT) {
          yield {
            type: 'llm.slow',
            round,
            silentMs: epochNow() - (timing.lastChunkAt ?? timing.requestAt),
          };
          continue;
        }
        const begun = reader.begin(chunk);
        if (begun === null) break;
        if (begun.first) yield begun.first;
        for (const ev of begun.rest) {
          const event = reader.event(ev);
          if (event) yield event;
        }
      }
    } catch (err) {
      failure = err;
    }
    // The SDK ends an aborted stream quietly, so the signal is the truth here.
    if (failure === undefined && signal.aborted) failure = new TurnAbortedError();
    timing.lastChunkAt = epochNow();
    const done = reader.asm.finish();
    if (filter) {
      const out = filter.end();
      promptCalls.push(...out.calls);
      const event = turn.say(round, out.text);
      if (event) yield event;
    }
    if (done.usage) {
      addUsage(turn.usage, done.usage);
      yield { type: 'usage', round, usage: done.usage };
    } else if (failure !== undefined && done.chunks > 0) {
      // Cut (a cancel, barge-in, a dropped stream) after the model began: it
      // read the request and wrote this much, though no count came.
      const usage = estimateRoundUsage(request.messages, done);
      addUsage(turn.usage, usage);
      turn.usageEstimated = true;
      yield { type: 'usage', round, usage };
    }
    if (failure !== undefined) {
      return yield* failedRound(turn, failure, signal, options.log, round, done.chunks);
    }

    const calls: ToolCall[] = filter
      ? promptCalls.map((c, i) => promptCallToToolCall(c, `${promptIds}_${round}_${i}`))
      : (legacy ? done.toolCalls.slice(0, 1) : done.toolCalls).map(toToolCall);
    const cutOff = done.finishReason === 'length' || done.finishReason === 'content_filter';
    if (calls.length === 0 || cutOff || final) {
      return yield* lastRound(turn, round, calls, done.finishReason, cutOff, options);
    }

    for (const call of calls) {
      used().add(call.id);
      yield { type: 'tool_call.done', round, call };
    }
    // Client-side calls go back to the client; the round's server-side calls still run.
    const serverIdx = calls.flatMap((c, i) => (clientNames.has(c.name) ? [] : [i]));
    const serverCalls = serverIdx.map((i) => calls[i]!);
    // Prompt mode replays the raw text (tool-call lines included) so the model sees what it wrote.
    turn.keepCalls(
      assistantMessage(calls, filter ? done.text : turn.roundText, toolMode, legacy),
      // Cut while they run, the calls read as interrupted; with the client's, not at all.
      serverCalls.length === calls.length
        ? runningCalls(serverCalls, (r) => toolResultMessages(r, toolMode, legacy))
        : undefined,
    );
    for (const call of calls) if (clientNames.has(call.name)) turn.clientCalls.push(call);
    const results = runCalls(
      serverCalls,
      filter ? serverIdx.map((i) => promptCalls[i]!) : [],
      filter !== undefined,
      toolset,
      options,
    );
    // Each result goes out as its call ends; history keeps call order.
    for await (const result of inCompletionOrder(results)) {
      timing.handlerMs = Math.max(timing.handlerMs, result.handlerMs);
      turn.resultIn(result);
      yield { type: 'tool.result', round, result };
    }
    const ordered = await Promise.all(results);
    turn.toolCalls.push(...ordered);
    turn.keepResults(toolResultMessages(ordered, toolMode, legacy));
    turn.toolRounds++;
    yield { type: 'round.end', round, finishReason: done.finishReason, toolCalls: calls.length };
    if (turn.clientCalls.length > 0 || options.endTurn?.()) {
      return yield* finish(turn.summarize('completed'));
    }
  }
}

/** The turn's last event: its summary, which is also the turn's result. */
async function* finish(summary: TurnSummary): AsyncGenerator<TurnEvent, TurnSummary> {
  yield { type: 'finish', summary };
  return summary;
}

/**
 * A round whose stream failed, was cut or was cancelled: what the user
 * already saw stays in history, the calls of a broken stream never run.
 */
async function* failedRound(
  turn: TurnState,
  failure: unknown,
  signal: AbortSignal,
  log: ToolLogger,
  round: number,
  chunks: number,
): AsyncGenerator<TurnEvent, TurnSummary> {
  turn.keepRoundText();
  const aborted = signal.aborted || failure instanceof TurnAbortedError;
  // Neither [DONE] nor a finish_reason: cut short, not complete, and not an error.
  const truncated = !aborted && failure instanceof LlmTruncatedError;
  if (!aborted) {
    const error = asTroupeError(failure);
    logFailure(log, round, error, chunks);
    if (!truncated) yield { type: 'error', error };
  }
  if (aborted) return yield* finish(turn.summarize('cancelled', 'cancelled'));
  if (truncated) return yield* finish(turn.summarize('incomplete', 'stream_truncated'));
  return yield* finish(turn.summarize('failed', 'llm_error'));
}

/**
 * The round that ends the turn: no tool calls, or calls that do not run
 * (cut off by the token limit or the filter, or past the round limit: then
 * the fallback line is said if the model said nothing).
 */
async function* lastRound(
  turn: TurnState,
  round: number,
  calls: ToolCall[],
  finishReason: string | null,
  cutOff: boolean,
  options: TurnOptions,
): AsyncGenerator<TurnEvent, TurnSummary> {
  let reason: DiscardReason | undefined;
  if (calls.length > 0) {
    reason = cutOff ? (finishReason as DiscardReason) : 'max_tool_rounds';
    yield { type: 'tool_calls.discarded', round, calls, reason };
    options.log.warn({ round, calls: calls.map((c) => c.name), reason }, 'tool calls discarded');
    if (reason === 'max_tool_rounds' && turn.roundText === '') {
      const event = turn.say(round, options.roundLimitFallback ?? DEFAULT_ROUND_LIMIT_FALLBACK);
      if (event) yield event;
    }
  } else if (cutOff) {
    reason = finishReason as DiscardReason;
  }
  turn.keepRoundText();
  yield { type: 'round.end', round, finishReason, toolCalls: 0 };
  return yield* finish(turn.summarize(reason ? 'incomplete' : 'completed', reason));
}

/**
 * The history messages that hand tool results back to the model: one `tool`
 * message per call (legacy: `function`), or in prompt mode one user message
 * listing them all.
 */
export function toolResultMessages(
  results: readonly Pick<ToolResult, 'callId' | 'name' | 'outcome' | 'output'>[],
  toolMode: ToolMode,
  legacy: boolean,
): ChatMessage[] {
  if (results.length === 0) return [];
  if (toolMode === 'prompt') {
    return [{ role: 'user', content: promptToolResultsMessage(results) }];
  }
  return results.map((r) =>
    legacy
      ? { role: 'function', name: r.name || 'unnamed_tool', content: r.output }
      : { role: 'tool', tool_call_id: r.callId, content: r.output },
  );
}

function buildRequest(
  options: TurnOptions,
  descriptions: readonly ToolDescription[],
  base: readonly ChatMessage[],
  added: readonly ChatMessage[],
  toolMode: ToolMode,
  legacy: boolean,
  final: boolean,
): ChatRequest {
  const messages = base.concat(added);
  const req: ChatRequest = { messages };
  const r = options.request;
  if (r?.temperature !== undefined) req.temperature = r.temperature;
  if (r?.max_tokens !== undefined) req.max_tokens = r.max_tokens;
  if (r?.model !== undefined) req.model = r.model;
  if (descriptions.length === 0) return req;
  if (toolMode === 'prompt') {
    if (final) req.messages = messages.concat({ role: 'system', content: PROMPT_MODE_FINAL_NOTE });
    return req;
  }
  if (legacy) {
    req.functions = descriptions.map((d) => ({ ...d }));
    if (final) req.function_call = 'none';
    return req;
  }
  req.tools = descriptions.map((d) => ({ type: 'function', function: { ...d } }));
  if (final) req.tool_choice = 'none';
  else if (r?.tool_choice !== undefined) req.tool_choice = r.tool_choice;
  return req;
}

function withPromptTools(
  messages: readonly ChatMessage[],
  descriptions: readonly ToolDescription[],
): ChatMessage[] {
  const section = promptToolsInstructions(descriptions);
  const first = messages[0];
  if (first && first.role === 'system') {
    return [{ role: 'system', content: `${first.content}\n\n${section}` }, ...messages.slice(1)];
  }
  return [{ role: 'system', content: section }, ...messages];
}

function toToolCall(c: AssembledCall): ToolCall {
  return { id: c.id, name: c.name, arguments: c.arguments };
}

function promptCallToToolCall(c: PromptCall, id: string): ToolCall {
  return c.ok ? { id, name: c.name, arguments: c.arguments } : { id, name: '', arguments: c.raw };
}

/** The arguments as replayed to the LLM: canonical JSON of an object, `{}` when unusable. */
export function canonicalArguments(raw: string): string {
  const parsed = parseToolArguments(raw);
  return parsed.ok ? JSON.stringify(parsed.value) : '{}';
}

/** The assistant message that makes `calls`, in the character's tool format. */
export function assistantMessage(
  calls: readonly ToolCall[],
  content: string,
  toolMode: ToolMode,
  legacy: boolean,
): ChatMessage {
  if (toolMode === 'prompt') return { role: 'assistant', content };
  if (legacy) {
    const c = calls[0]!;
    return {
      role: 'assistant',
      content: content === '' ? null : content,
      function_call: { name: c.name || 'unnamed_tool', arguments: canonicalArguments(c.arguments) },
    };
  }
  const toolCalls: AssistantToolCall[] = calls.map((c) => ({
    id: c.id,
    type: 'function',
    function: { name: c.name || 'unnamed_tool', arguments: canonicalArguments(c.arguments) },
  }));
  return { role: 'assistant', content: content === '' ? null : content, tool_calls: toolCalls };
}

function runCalls(
  calls: readonly ToolCall[],
  promptCalls: readonly PromptCall[],
  promptMode: boolean,
  toolset: Toolset,
  options: TurnOptions,
): Promise<ToolResult>[] {
  const executorOptions = {
    signal: options.signal,
    session: options.session,
    log: options.log,
    ...(options.toolTimeoutMs !== undefined ? { defaultTimeoutMs: options.toolTimeoutMs } : {}),
    ...(options.maxToolOutputBytes !== undefined
      ? { maxOutputBytes: options.maxToolOutputBytes }
      : {}),
    ...(options.background ? { background: options.background } : {}),
  };
  if (!promptMode) return executeToolCalls(calls, toolset, executorOptions);
  // A TOOL_CALL line that could not be read is an invalid_args outcome, told to the model.
  return calls.map((call, i) => {
    const pc = promptCalls[i]!;
    if (pc.ok) return executeToolCalls([call], toolset, executorOptions)[0]!;
    return Promise.resolve<ToolResult>({
      callId: call.id,
      name: '',
      outcome: 'invalid_args',
      output: `Error: could not read your ${'TOOL_CALL'} line: ${pc.reason}. Write it as TOOL_CALL: {"tool_name": "<name>", "parameters": {...}}.`,
      durationMs: 0,
      handlerMs: 0,
      variant: toolset.variant,
    });
  });
}

/** Logs a failed round: the upstream detail goes here, never to the client. */
function logFailure(log: ToolLogger, round: number, error: TroupeError, chunks: number): void {
  if (error instanceof LlmTruncatedError) {
    log.warn({ round, chunks }, 'llm stream ended early');
    return;
  }
  const e = error as LlmStreamError;
  log.warn(
    { round, code: error.code, status: e.status, detail: e.detail ?? error.message },
    'llm request failed',
  );
}

/**
 * A round's chunks with {@link LLM_SILENT} each time `slowMs` pass without
 * one (0 = never): the transport's own watch when it has one (the default
 * http transport), else {@link withSlowNotices}.
 */
function chunksOf(
  llm: LlmClient,
  request: ChatRequest,
  signal: AbortSignal,
  slowMs: number,
  sink: ChunkSink | undefined,
): AsyncIterable<ChunkLike | typeof LLM_SILENT> {
  if (slowMs <= 0) return llm.stream(request, signal, sink);
  if (llm.streamWatched) return llm.streamWatched(request, signal, slowMs, sink);
  // The watch must see every chunk to know the stream is not silent: no sink.
  return withSlowNotices(llm.stream(request, signal), slowMs);
}

/**
 * The chunks of `stream`, with {@link LLM_SILENT} put in each time `afterMs`
 * pass without one. One timer per stream, re-armed per chunk, and a race
 * per chunk: for transports that cannot watch for silence themselves.
 */
async function* withSlowNotices<T>(
  stream: AsyncIterable<T>,
  afterMs: number,
): AsyncGenerator<T | typeof LLM_SILENT, void, undefined> {
  const it = stream[Symbol.asyncIterator]();
  let ring!: () => void;
  let rang = new Promise<typeof LLM_SILENT>((r) => (ring = () => r(LLM_SILENT)));
  const timer = setTimeout(() => ring(), afterMs);
  let pending = false;
  try {
    for (;;) {
      const next = it.next();
      pending = true;
      for (;;) {
        const step = await Promise.race([next, rang]);
        if (step === LLM_SILENT) {
          rang = new Promise<typeof LLM_SILENT>((r) => (ring = () => r(LLM_SILENT)));
          timer.refresh();
          yield LLM_SILENT;
          continue;
        }
        pending = false;
        if (step.done) return;
        timer.refresh();
        yield step.value;
        break;
      }
    }
  } finally {
    clearTimeout(timer);
    // Left early (cancel, error): the stream must stop too. With a chunk still
    // awaited, the stop waits behind it: do not wait for that here.
    if (pending) void it.return?.()?.catch(() => {});
    else await it.return?.();
  }
}

/** The results of `pending` as each settles (they never reject). */
async function* inCompletionOrder(
  pending: readonly Promise<ToolResult>[],
): AsyncGenerator<ToolResult, void, undefined> {
  if (pending.length === 1) {
    yield await pending[0]!;
    return;
  }
  const waiting = new Map(pending.map((p, i) => [i, p.then((result) => ({ i, result }))]));
  while (waiting.size > 0) {
    const { i, result } = await Promise.race(waiting.values());
    waiting.delete(i);
    yield result;
  }
}

/** Every call id a history already holds (assistant calls and tool results). */
function callIdsOf(messages: readonly ChatMessage[]): Set<string> {
  const ids = new Set<string>();
  for (const m of messages) {
    if (m.role === 'assistant') for (const c of m.tool_calls ?? []) ids.add(c.id);
    else if (m.role === 'tool') ids.add(m.tool_call_id);
  }
  return ids;
}

function addUsage(total: TurnUsage, u: UsageLike): void {
  total.prompt_tokens += u.prompt_tokens ?? 0;
  total.completion_tokens += u.completion_tokens ?? 0;
  total.total_tokens += u.total_tokens ?? (u.prompt_tokens ?? 0) + (u.completion_tokens ?? 0);
}

function asTroupeError(err: unknown): TroupeError {
  if (err instanceof TroupeError) return err;
  return new LlmStreamError('The LLM stream failed.', {
    detail: (err as Error)?.message ?? String(err),
    cause: err,
  });
}
