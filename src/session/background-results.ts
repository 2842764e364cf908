/**
 * A session's background tool calls: they start from a turn (the model is
 * told "started"), report progress to the client (and speak it when the tool
 * asks), and their outcome joins the conversation, after which the session
 * queues a response so the character tells the user at the next pause.
 */
import type { Logger } from 'pino';
import type { LoadedCharacter } from '../characters/types.js';
import type { SessionMetrics } from '../metrics/index.js';
import {
  BackgroundCalls,
  type BackgroundDone,
  type BackgroundPending,
} from '../tools/background.js';
import type { ToolContext, ToolResult } from '../tools/types.js';
import type { ParkedCalls } from './background-handover.js';
import type { Conversation } from './conversation.js';
import type { ServerEvent } from './events.js';
import { conversationId, endedResponse, inProgressResponse, messageItem, round } from './items.js';
import type { ResponseQueue, RunningResponse } from './response-queue.js';
import { recordToolCall } from './response-report.js';
import { speakPart, type SpeechPlace } from './speech-output.js';
import type { VoiceOutput } from './voice-output.js';

/** Options of {@link sessionBackgroundCalls}. */
export interface SessionBackgroundOptions {
  send: (event: ServerEvent) => void;
  log: () => Logger;
  character: () => LoadedCharacter;
  session: () => ToolContext['session'];
  conversation: Conversation;
  metrics: SessionMetrics | undefined;
  /** Whether the session has closed: outcomes are still counted and logged, nothing is queued. */
  closed: () => boolean;
  /** An outcome joined the conversation: queue the response that tells the user. */
  followUp: () => void;
  /** A progress line the tool wants spoken: speak it if nothing else is said now. */
  speak: (text: string) => void;
  /** Cap on each output the model sees. */
  maxOutputBytes?: number;
}

/** The background calls of one session, wired to its conversation, client and metrics. */
export function sessionBackgroundCalls(o: SessionBackgroundOptions): BackgroundCalls {
  return new BackgroundCalls({
    session: o.session,
    log: o.log,
    ...(o.maxOutputBytes !== undefined ? { maxOutputBytes: o.maxOutputBytes } : {}),
    // The client hears of a call ("started") before any of its progress.
    progressAfterStarted: true,
    onProgress: (p) => {
      o.send({
        type: 'troupe.background_tool.progress',
        call_id: p.callId,
        name: p.name,
        text: p.text,
      });
      if (p.speak && !o.closed()) o.speak(p.text);
    },
    onEnd: ({ result }) => {
      const character = o.character();
      if (o.metrics) recordToolCall(o.metrics, character, result, 'background');
      const fields = {
        tool: result.name,
        callId: result.callId,
        outcome: result.outcome,
        variant: result.variant,
        durationMs: round(result.durationMs),
      };
      if (result.outcome === 'ok') o.log().info(fields, 'background tool call done');
      // Stopped by the client (it closed, or the conversation was replaced): not a fault.
      else if (result.outcome === 'cancelled')
        o.log().info(fields, 'background tool call cancelled');
      else o.log().warn({ ...fields, err: result.error }, 'background tool call failed');
    },
    onDone: (done) => deliverOutcome(o, done),
  });
}

/**
 * A background call's outcome joins the conversation: an `mcp_call` item and
 * the message the model reads, `troupe.background_tool.done`, then the
 * follow-up response (none once the session has closed).
 */
export function deliverOutcome(
  o: Pick<SessionBackgroundOptions, 'send' | 'character' | 'conversation' | 'closed' | 'followUp'>,
  done: Pick<BackgroundDone, 'arguments' | 'character' | 'dropped'> & {
    result: Pick<ToolResult, 'callId' | 'name' | 'outcome' | 'output' | 'durationMs'>;
  },
): void {
  const { result, arguments: args } = done;
  const serving = o.character().id;
  const caller = done.character ?? serving;
  // Its conversation was replaced: the client hears how it ended; no history, no follow-up.
  // Otherwise history keeps the one outcome even when the session is closing (a resumed one shows it).
  const item = done.dropped
    ? undefined
    : o.conversation.addBackgroundResult(
        result,
        args,
        caller,
        caller !== serving ? caller : undefined,
      );
  o.send({
    type: 'troupe.background_tool.done',
    call_id: result.callId,
    name: result.name,
    item_id: item?.id ?? null,
    outcome: result.outcome,
    output: result.output,
    duration_ms: round(result.durationMs),
  });
  if (item && !o.closed()) o.followUp();
}

/** What the model is told of a background call that a reconnection cut off. */
export function interruptedText(name: string): string {
  return (
    `${name} was interrupted: the conversation was resumed (its connection dropped, or its ` +
    'server stopped) before it finished, so its result is lost. Tell the user and offer to run it again.'
  );
}

/**
 * A resumed session's background calls: the ones still running (or ended)
 * in this process are taken over; each one the snapshot lists that is not
 * ends here as interrupted (history, `troupe.background_tool.done`, a
 * counter, a log line), so every call still has exactly one outcome.
 */
export function resumeBackground(
  o: SessionBackgroundOptions,
  calls: BackgroundCalls,
  listed: readonly BackgroundPending[],
  parked: ParkedCalls | undefined,
): void {
  const here = new Set<string>();
  if (parked) {
    for (const p of calls.adopt(parked.calls)) here.add(p.callId);
    for (const done of parked.ended) {
      here.add(done.result.callId);
      deliverOutcome(o, done);
    }
  }
  for (const p of listed) {
    if (here.has(p.callId)) continue;
    const character = o.character();
    o.metrics?.backgroundInterrupted?.inc({ character: character.id, tool: p.name });
    o.log().warn(
      { tool: p.name, callId: p.callId, startedAt: new Date(p.startedAt).toISOString() },
      'background tool call lost on resume',
    );
    deliverOutcome(o, {
      arguments: p.arguments,
      ...(p.character !== undefined ? { character: p.character } : {}),
      result: {
        callId: p.callId,
        name: p.name,
        outcome: 'cancelled',
        output: interruptedText(p.name),
        durationMs: Math.max(0, Date.now() - p.startedAt),
      },
    });
  }
}

/** A progress line spoken now, if the character is silent and the user is not speaking. */
export function speakProgress(
  o: {
    voice: VoiceOutput | undefined;
    queue: ResponseQueue;
    userTurn: () => boolean;
    /** Whether the session speaks its replies now. */
    audio: () => boolean;
    send: (event: ServerEvent) => void;
    log: () => Logger;
    conversation: Conversation;
    /** The conversation changed (`settled`: a response ended): the resume store is written. */
    changed: (settled?: boolean) => void;
  },
  sessionId: string,
  text: string,
): void {
  const voice = o.voice;
  if (!voice?.canSpeak || o.queue.busy || o.userTurn() || !o.audio()) return;
  o.queue.request({
    kind: 'background',
    run: (response) => runProgressLine({ ...o, voice }, sessionId, response, text),
    onError: (err) => o.log().error({ err }, 'progress line failed unexpectedly'),
  });
}

/**
 * Speaks a background tool's progress line as a response of its own (no LLM):
 * an assistant item the client hears; the model never sees it, like a filler.
 */
export async function runProgressLine(
  o: {
    send: (event: ServerEvent) => void;
    log: () => Logger;
    voice: VoiceOutput;
    conversation: Conversation;
    changed: (settled?: boolean) => void;
  },
  sessionId: string,
  response: RunningResponse,
  text: string,
): Promise<void> {
  const base = inProgressResponse(
    response.id,
    ['audio'],
    { troupe: 'background_progress' },
    conversationId(sessionId),
  );
  o.send({ type: 'response.created', response: base });
  const item = messageItem('assistant', [], undefined, 'in_progress');
  const speech = o.voice.speechFor(response, o.log(), performance.now());
  const place: SpeechPlace = { response_id: response.id, item_id: item.id, output_index: 0 };
  const previous = o.conversation.lastItemId();
  o.send({ type: 'response.output_item.added', response_id: response.id, output_index: 0, item });
  o.send({ type: 'conversation.item.added', previous_item_id: previous, item });
  const spoken = await speakPart(o.send, speech, place, text);
  item.content = [{ type: 'output_audio', transcript: spoken.transcript }];
  item.status = spoken.interrupted ? 'incomplete' : 'completed';
  o.send({ type: 'response.output_item.done', response_id: response.id, output_index: 0, item });
  o.send({ type: 'conversation.item.done', previous_item_id: previous, item });
  // The client's history shows it; the model's does not (no message stands for it).
  o.conversation.addResponse(o.conversation.responseGroup(), [], [item], [], undefined);
  // Written to the resume store before the client hears the response end, as a reply's end is.
  o.changed(true);
  o.send({ type: 'response.done', response: endedResponse(base, response.stoppedBy, [item]) });
}
