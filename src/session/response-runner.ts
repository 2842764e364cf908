/**
 * Runs a response the queue started: a conversation response (LLM turn →
 * writer → history → `response.done`) or the spoken greeting.
 */
import type { Logger } from 'pino';
import type { CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import type { TroupeError } from '../errors.js';
import type { ChatMessage } from '../llm/chunk.js';
import type { LlmClient } from '../llm/client.js';
import { runTurn, type TurnOptions, type TurnSummary } from '../llm/turn-runner.js';
import type { SessionMetrics } from '../metrics/index.js';
import type { Toolset } from '../tools/library.js';
import type { BackgroundStarter } from '../tools/executor.js';
import type { Conversation } from './conversation.js';
import type { ResponseHandoffs } from './handoff.js';
import type { HistoryGroup } from './history.js';
import type { ResponseOptions, ServerEvent } from './events.js';
import { estimateTokens } from '../llm/token-estimate.js';
import {
  conversationId,
  endedResponse,
  inProgressResponse,
  llmErrorPayload,
  round,
  toDescription,
} from './items.js';
import type { RunningResponse } from './response-queue.js';
import { doneResponse, recordResponse, type ResponseOutcome } from './response-report.js';
import { watchReply } from './reply-checkpoints.js';
import { FillerTimers, ResponseWriter, type SpokenEntry } from './response-writer.js';
import type { SessionConfig } from './session-settings.js';
import { speakPart, type SpeechPlace } from './speech-output.js';
import { keepHeard, voiceTimings, type VoiceOutput } from './voice-output.js';

/** How sessions run turns (from config). */
export interface SessionSettings {
  /** Handler timeout of tools that set none. @defaultValue 100 */
  toolTimeoutMs: number;
  /** Tool rounds per turn unless the character sets its own. @defaultValue 10 */
  maxToolRounds: number;
  /** History budget in estimated tokens. @defaultValue 6000 */
  contextTokens: number;
  /**
   * How often a reply under way is written to the resume store, at most
   * (a store outside the process: the primary's, Redis), and at once after
   * each round of the server's tools; absent or 0 = only when it ends.
   * @defaultValue absent
   */
  replySaveMs?: number;
}

/** What a response runs with: the session's parts, read when the response starts. */
export interface ResponseContext {
  sessionId: string;
  send: (event: ServerEvent) => void;
  settings: SessionSettings;
  llm: () => Promise<LlmClient>;
  log: () => Logger;
  character: () => LoadedCharacter;
  opening: () => CharacterOpening;
  /** `ctx.session.state` of the character's tools. */
  characterState: Record<string, unknown>;
  config: SessionConfig;
  conversation: Conversation;
  voice: VoiceOutput | undefined;
  metrics: SessionMetrics | undefined;
  content: (text: string) => string | { chars: number };
  /** Counts the response; returns its turn number. */
  nextTurn: () => number;
  /** Sends Unmute's frontend the chat history (when it asked for it). */
  shareHistory: () => void;
  /**
   * The conversation changed (items, state): the session tells its listeners;
   * `settled` at a turn's end, before its `response.done`, and when a round
   * of the server's tools has its results (a reply under way is written).
   */
  changed: (settled?: boolean) => void;
  /** Transfers to other characters: the tools offered, what the model sees. */
  handoffs?: ResponseHandoffs;
  /** Runs the character's `background: true` tools beside the conversation. */
  background?: BackgroundStarter;
}

/**
 * Runs a response to its `response.done`: a conversation response, or an
 * out-of-band one (`conversation: "none"`) whose items stay out of the
 * conversation. `input` (`response.input` as messages) replaces the
 * conversation as what the model reads.
 */
export async function runResponse(
  ctx: ResponseContext,
  response: RunningResponse,
  r: ResponseOptions,
  receivedAt: number,
  input?: readonly ChatMessage[],
): Promise<void> {
  const turnLog = ctx.log().child({ turn: ctx.nextTurn() });
  const character = ctx.character();
  const opening = ctx.opening();
  const outOfBand = r.conversation === 'none';
  // The speech channel is the conversation's: an out-of-band response is text.
  const modalities: Array<'text' | 'audio'> = outOfBand
    ? ['text']
    : (r.output_modalities ?? ctx.config.current.outputModalities);
  // Audio out needs an engine; without one the reply is text (checked at update).
  const voice = modalities.includes('audio') && ctx.voice?.canSpeak ? ctx.voice : undefined;
  const group = ctx.conversation.responseGroup();
  const systemMessage: ChatMessage = {
    role: 'system',
    content: r.instructions ?? ctx.config.systemPrompt(opening),
  };
  // Out of band, the conversation hears nothing of it: no conversation.item.* events.
  const send = outOfBand ? withoutConversationEvents(ctx.send) : ctx.send;
  const base = inProgressResponse(
    response.id,
    modalities,
    r.metadata ?? null,
    outOfBand ? null : conversationId(ctx.sessionId),
  );
  const toolset = ctx.handoffs?.toolset(character, opening.toolset, outOfBand) ?? opening.toolset;
  const history = (message: string, added?: readonly ChatMessage[]) =>
    input
      ? [...input]
      : readable(ctx, outOfBand, trimmed(ctx, turnLog, systemMessage, message, added, group));
  const messages = history('history trimmed to the context budget');
  ctx.send({ type: 'response.created', response: base });

  const speech = voice?.speechFor(response, turnLog, receivedAt);
  // Every call but the client's own tools is the server's to run (unknown ones are answered too).
  const clientNames = new Set((r.tools ?? ctx.config.current.tools).map((t) => t.name));
  const before = outOfBand ? null : ctx.conversation.responseStarts();
  const out = new ResponseWriter(response.id, send, before, speech, {
    serverLabel: character.id,
    runs: (name) => !clientNames.has(name),
    labelOf: (name) => opening.toolset.tools.get(name)?.serverLabel,
    announced: (callId) => ctx.background?.announced?.(callId),
  });
  const fillers = new FillerTimers(toolset, (text) => out.filler(text));
  let requestAt: number | undefined;
  if (!outOfBand) {
    response.lastItemId = () => out.items.at(-1)?.id ?? null;
    response.findItem = (id) => out.find(id);
  }
  let firstDeltaAt: number | null = null;
  let summary: TurnSummary | undefined;
  let failure: TroupeError | undefined;
  let spokenItems: SpokenEntry[] = [];
  // A reply under way is written at times, so a killed process leaves what it said.
  const watch = watchReply({
    response,
    out,
    group,
    everyMs: outOfBand ? 0 : (ctx.settings.replySaveMs ?? 0),
    changed: (now) => ctx.changed(now),
  });
  try {
    let llm: LlmClient | undefined;
    try {
      llm = await ctx.llm();
    } catch (err) {
      failure = err as TroupeError;
    }
    if (llm) {
      const options = turnOptions(ctx, llm, r, response, turnLog, systemMessage, messages, toolset);
      options.fitHistory = (added) => [
        systemMessage,
        ...history('history trimmed between tool rounds', added),
      ];
      options.onStart = watch.onStart;
      // Text deltas (most of a turn's events) go straight to the writer.
      options.onTextDelta = (e) => {
        out.apply(e);
        if (firstDeltaAt !== null) return;
        firstDeltaAt = performance.now();
        watch.begin();
      };
      const events = runTurn(options);
      for await (const e of events) {
        if (e.type === 'error') failure = e.error;
        if (e.type === 'finish') summary = e.summary;
        if (speech) fillers.apply(e, response.controller.signal);
        if (e.type === 'round.start' && e.round === 0) requestAt = performance.now();
        out.apply(e);
        watch.turnEvent(e);
      }
    }
    fillers.clear();
    out.finish(summary?.status ?? 'failed');
    // A spoken reply ends when its last word has played (or was cut off).
    spokenItems = await out.spoken();
  } finally {
    // History takes the reply from here.
    watch.stop();
    // Background calls it started that are still to be announced are told of now.
    ctx.background?.responseEnded?.();
  }
  // Speech cut short is a cancelled reply, even when the LLM had finished.
  const status = response.stoppedBy ? 'cancelled' : (summary?.status ?? 'failed');

  // History: the turn's messages and the items that stand for them.
  if (summary && !outOfBand) {
    // Which message holds each item's words, found before they are cut to what was heard.
    const replies = out.replies(summary.messages);
    const kept = speech
      ? keepHeard(summary.messages, spokenItems, speech.truncations(), (id, spoken) =>
          ctx.conversation.recordSpoken(id, spoken, speech.timingOf(id)),
        )
      : summary.messages;
    // A turn with client calls ends right after the round that made them: its last assistant message.
    const owner = summary.messages.findLast((m) => m.role === 'assistant');
    ctx.conversation.addResponse(group, kept, out.items, summary.clientCalls, owner, replies);
  }
  const ttftMs = firstDeltaAt === null ? null : firstDeltaAt - receivedAt;
  const first = summary?.rounds[0];
  const llmTtftMs =
    first && first.firstTokenAt !== null ? first.firstTokenAt - first.requestAt : null;
  if (failure) {
    ctx.send({ type: 'error', error: llmErrorPayload(failure) });
    turnLog.warn({ code: failure.code, err: failure.message }, 'response failed');
  }
  const outcome: ResponseOutcome = {
    base,
    status,
    summary,
    failure,
    stoppedBy: response.stoppedBy,
    items: out.items,
    character,
    variant: opening.variant,
    receivedAt,
    ttftMs,
    llmTtftMs,
    firstAudioMs: response.firstAudioMs,
    voice: speech ? voiceTimings(response, speech, requestAt) : undefined,
  };
  tellEnd(ctx, turnLog, outOfBand, outcome);
}

/**
 * A response's end: stored first (a turn the client saw end survives a
 * crash), then `response.done`, the metrics, the shared history and the log.
 */
function tellEnd(
  ctx: ResponseContext,
  turnLog: Logger,
  outOfBand: boolean,
  outcome: ResponseOutcome,
): void {
  if (!outOfBand) ctx.changed(true);
  ctx.send({ type: 'response.done', response: doneResponse(outcome) });
  recordResponse(ctx.metrics, outcome);
  if (!outOfBand) ctx.shareHistory();
  const { summary, ttftMs } = outcome;
  turnLog.info(
    {
      response: outcome.base.id,
      ...(outOfBand ? { outOfBand } : {}),
      status: outcome.status,
      ttftMs: ttftMs === null ? null : round(ttftMs),
      toolRounds: summary?.toolRounds ?? 0,
      tools: summary?.toolCalls.map((t) => `${t.name}:${t.outcome}`),
      text: ctx.content(summary?.text ?? ''),
    },
    'response done',
  );
}

/** Sends everything but `conversation.item.*` (an out-of-band response's items are not the conversation's). */
function withoutConversationEvents(send: (e: ServerEvent) => void): (e: ServerEvent) => void {
  return (e) => {
    if (!e.type.startsWith('conversation.item.')) send(e);
  };
}

/**
 * The conversation as an out-of-band response may read it: calls still
 * awaiting the client's output get stand-ins in the copy sent (the
 * conversation keeps waiting for the real ones).
 */
function readable(
  ctx: ResponseContext,
  outOfBand: boolean,
  messages: ChatMessage[],
): ChatMessage[] {
  return outOfBand ? ctx.conversation.withStandIns(messages) : messages;
}

/** History within the context budget, the system prompt reserved. */
function trimmed(
  ctx: ResponseContext,
  log: Logger,
  system: ChatMessage,
  message: string,
  added: readonly ChatMessage[] = [],
  through?: HistoryGroup,
): ChatMessage[] {
  const reserved = [system, ...added].reduce((n, m) => n + estimateTokens(m), 0);
  // What began after this response did is the next one's to read.
  const trim = ctx.conversation.trim(ctx.settings.contextTokens, reserved, through);
  if (trim.droppedGroups > 0) {
    log.info(
      {
        droppedTurns: trim.droppedGroups,
        droppedItems: trim.droppedItems,
        budget: ctx.settings.contextTokens,
      },
      message,
    );
    // Not silently: the client learns which of its items the server let go.
    ctx.send({
      type: 'troupe.conversation.trimmed',
      item_ids: trim.droppedIds,
      context_tokens: ctx.settings.contextTokens,
    });
  }
  return ctx.handoffs ? ctx.handoffs.view(trim.messages) : trim.messages;
}

/** The turn runner's options: the character's, the session's, the response's. */
function turnOptions(
  ctx: ResponseContext,
  llm: LlmClient,
  r: ResponseOptions,
  response: RunningResponse,
  log: Logger,
  system: ChatMessage,
  messages: ChatMessage[],
  toolset: Toolset,
): TurnOptions {
  const s = ctx.config.current;
  const opening = ctx.opening();
  const max = r.max_output_tokens ?? s.maxOutputTokens;
  const temp = r.temperature ?? s.temperature ?? undefined;
  const choice = r.tool_choice ?? s.toolChoice;
  const request: TurnOptions['request'] = {
    ...opening.turn.request,
    ...(temp !== undefined ? { temperature: temp } : {}),
    ...(max !== 'inf' ? { max_tokens: max } : {}),
    ...(choice !== 'auto'
      ? {
          tool_choice:
            typeof choice === 'object'
              ? { type: 'function' as const, function: { name: choice.name } }
              : choice,
        }
      : {}),
  };
  return {
    llm,
    messages: [system, ...messages],
    toolset,
    // A model that reuses call ids (llama.cpp, some proxies) must not file a
    // new call under one still waiting or already in the conversation.
    callIdTaken: (id) => ctx.conversation.callIdTaken(id),
    signal: response.controller.signal,
    session: { id: ctx.sessionId, character: ctx.character().id, state: ctx.characterState },
    log,
    toolTimeoutMs: ctx.settings.toolTimeoutMs,
    maxToolRounds: ctx.settings.maxToolRounds,
    ...opening.turn,
    request,
    // `response.tools` replace the session's client tools for this response.
    clientTools: (r.tools ?? s.tools).map(toDescription),
    ...(ctx.handoffs ? { endTurn: () => ctx.handoffs!.requested() } : {}),
    ...(ctx.background ? { background: ctx.background } : {}),
  };
}

/** Speaks the greeting (a voice session hears it once, before anything else is said). */
export async function runGreeting(ctx: ResponseContext, response: RunningResponse): Promise<void> {
  const item = ctx.conversation.greetingToSpeak()!;
  ctx.conversation.markGreetingSpoken();
  const base = inProgressResponse(
    response.id,
    ['audio'],
    { troupe: 'greeting' },
    conversationId(ctx.sessionId),
  );
  ctx.send({ type: 'response.created', response: base });
  const speech = ctx.voice!.speechFor(response, ctx.log(), performance.now());
  const place: SpeechPlace = { response_id: response.id, item_id: item.id, output_index: 0 };
  // Announced like any response's item (in progress, its audio to come), so
  // clients know what its audio belongs to.
  const speaking = { ...item, status: 'in_progress' as const, content: [] };
  ctx.send({
    type: 'response.output_item.added',
    response_id: response.id,
    output_index: 0,
    item: speaking,
  });
  const spoken = await speakPart(ctx.send, speech, place, ctx.character().greeting ?? '');
  // History keeps what the user heard of the greeting, now spoken audio.
  ctx.conversation.greetingHeard(spoken.transcript, spoken.interrupted);
  ctx.send({ type: 'response.output_item.done', response_id: response.id, output_index: 0, item });
  // The conversation listed it as text when the session opened: it says what it is now.
  ctx.conversation.doneAgain(item);
  ctx.changed(true);
  ctx.send({ type: 'response.done', response: endedResponse(base, response.stoppedBy, [item]) });
}
