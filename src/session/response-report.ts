/**
 * A response's report: the `response.done` it ends with (status, usage,
 * Troupe's timings and tools) and the metrics it records.
 */
import type { LoadedCharacter } from '../characters/types.js';
import type { TroupeError } from '../errors.js';
import type { RoundTiming, TurnSummary } from '../llm/turn-runner.js';
import type { SessionMetrics } from '../metrics/index.js';
import type { ToolCallMode, ToolResult } from '../tools/types.js';
import type { Logger } from 'pino';
import type { Item, ResponseObject, ResponseRound, ServerEvent, VoiceTimings } from './events.js';
import { inProgressResponse, newId, responseUsage, round } from './items.js';

/** What a finished response reports. */
export interface ResponseOutcome {
  base: ResponseObject;
  status: ResponseObject['status'];
  summary: TurnSummary | undefined;
  failure: TroupeError | undefined;
  stoppedBy: string | undefined;
  items: Item[];
  character: LoadedCharacter;
  variant: string;
  receivedAt: number;
  ttftMs: number | null;
  llmTtftMs: number | null;
  firstAudioMs: number | undefined;
  voice: VoiceTimings | undefined;
}

/** The `response.done` response of a conversation response. */
export function doneResponse(o: ResponseOutcome): ResponseObject {
  const { summary } = o;
  return {
    ...o.base,
    status: o.status,
    status_details: statusDetails(o.status, summary?.reason, o.failure, o.stoppedBy),
    output: o.items,
    // Zeros when no request got an answer (the LLM down from the start): every
    // response.done carries a usage object, as the Realtime schema has it.
    usage: responseUsage(summary?.usage),
    troupe: {
      character: o.character.id,
      variant: o.variant,
      ttft_ms: o.ttftMs === null ? null : round(o.ttftMs),
      llm_ttft_ms: o.llmTtftMs === null ? null : round(o.llmTtftMs),
      duration_ms: round(performance.now() - o.receivedAt),
      ...(o.firstAudioMs !== undefined ? { first_audio_ms: round(o.firstAudioMs) } : {}),
      ...(o.voice ? { voice: o.voice } : {}),
      ...(summary?.usageEstimated ? { usage_estimated: true as const } : {}),
      tool_rounds: summary?.toolRounds ?? 0,
      llm_requests: summary?.requests ?? 0,
      rounds: responseRounds(summary?.rounds ?? []),
      tools: [
        ...(summary?.toolCalls ?? []).map((t) => ({
          call_id: t.callId,
          name: t.name,
          outcome: t.background === 'started' ? ('background_started' as const) : t.outcome,
          duration_ms: round(t.durationMs),
        })),
        ...(summary?.clientCalls ?? []).map((c) => ({
          call_id: c.id,
          name: c.name,
          outcome: 'pending_client' as const,
          duration_ms: 0,
        })),
      ],
    },
  };
}

/** Records a finished response in the session metrics. */
export function recordResponse(
  metrics: SessionMetrics | undefined,
  o: Pick<ResponseOutcome, 'status' | 'summary' | 'ttftMs' | 'llmTtftMs' | 'character' | 'variant'>,
): void {
  if (!metrics) return;
  const c = o.character.id;
  const { summary } = o;
  metrics.turns.inc({ character: c, status: o.status });
  if (o.ttftMs !== null) metrics.ttft.observe({ character: c }, o.ttftMs / 1000);
  if (o.llmTtftMs !== null) metrics.llmTtft.observe({ character: c }, o.llmTtftMs / 1000);
  if (!summary) return;
  metrics.toolRounds.observe({ character: c }, summary.toolRounds);
  metrics.tokens.inc({ character: c, kind: 'prompt' }, summary.usage.prompt_tokens);
  metrics.tokens.inc({ character: c, kind: 'completion' }, summary.usage.completion_tokens);
  // A background call is counted once, when it ends (recordToolCall, mode="background").
  for (const t of summary.toolCalls) {
    if (t.background !== 'started') recordToolCall(metrics, o.character, t, 'inline');
  }
  // A client-side call has no outcome yet: the client runs it and answers later.
  for (const _ of summary.clientCalls) {
    metrics.toolCalls.inc({
      character: c,
      tool: 'client',
      variant: o.variant,
      outcome: 'pending_client',
      mode: 'client',
    });
  }
}

/** Records one tool call's outcome; `mode` says how it ran. */
export function recordToolCall(
  metrics: SessionMetrics,
  character: LoadedCharacter,
  t: ToolResult,
  mode: ToolCallMode,
): void {
  // A name the model made up is not a label value: it could be anything.
  const tool = t.outcome === 'unknown_tool' ? 'unknown' : t.name;
  const labels = { character: character.id, tool, variant: t.variant };
  metrics.toolCalls.inc({ ...labels, outcome: t.outcome, mode });
  metrics.toolLatency.observe({ ...labels, outcome: t.outcome }, t.durationMs / 1000);
  metrics.unmute.toolCalls.inc({ character_name: character.name, tool_name: tool });
  metrics.unmute.toolLatency.observe({ tool_name: tool }, t.durationMs / 1000);
  if (t.outcome !== 'ok') metrics.unmute.toolErrors.inc({ error_type: t.outcome });
}

function statusDetails(
  status: ResponseObject['status'],
  reason: string | undefined,
  failure: TroupeError | undefined,
  stoppedBy: string | undefined,
): ResponseObject['status_details'] {
  if (status === 'completed' || status === 'in_progress') return null;
  if (status === 'cancelled') return { type: 'cancelled', reason: stoppedBy ?? 'client_cancelled' };
  if (status === 'incomplete') {
    const r = reason === 'length' ? 'max_output_tokens' : (reason ?? 'unknown');
    return { type: 'incomplete', reason: r };
  }
  return {
    type: 'failed',
    error: {
      type: 'llm_error',
      code: failure?.code === 'E_CONFIG' ? 'llm_unavailable' : 'llm_stream_error',
      message: failure?.message ?? 'the response failed',
    },
  };
}

/** Rounds of a response as `response.done` reports them, to the microsecond (overheads are sub-ms). */
function responseRounds(rounds: readonly RoundTiming[]): ResponseRound[] {
  const us = (ms: number): number => Math.round(ms * 1000) / 1000;
  return rounds.map((r, i) => {
    const next = rounds[i + 1];
    return {
      llm_ttft_ms: r.firstTokenAt === null ? null : us(r.firstTokenAt - r.requestAt),
      llm_ms: r.lastChunkAt === null ? null : us(r.lastChunkAt - r.requestAt),
      handler_ms: us(r.handlerMs),
      overhead_ms:
        next === undefined || r.lastChunkAt === null
          ? null
          : us(Math.max(0, next.requestAt - r.lastChunkAt - r.handlerMs)),
    };
  });
}

/** Where an empty response goes, and what it is like. */
export interface EmptyResponseTarget {
  send: (event: ServerEvent) => void;
  log: Logger;
  modalities: ResponseObject['output_modalities'];
  conversation: string;
}

/**
 * Answers a `response.create` with an empty, completed response (no model
 * request) whose `metadata` says why (`troupe`), logged as `why`: a
 * follow-up to calls a response answered already (`answered`, naming it in
 * `answered_by`), or a turn whose speech had no words (`nothing_heard`).
 * Nothing is left to tell the client (no error).
 */
export function answerEmpty(
  o: EmptyResponseTarget,
  metadata: Record<string, string>,
  why: string,
  id = newId('resp'),
): undefined {
  const base = inProgressResponse(id, o.modalities, metadata, o.conversation);
  o.send({ type: 'response.created', response: base });
  o.send({
    type: 'response.done',
    response: { ...base, status: 'completed', usage: responseUsage() },
  });
  o.log.info({ response: id, ...metadata }, why);
  return undefined;
}
