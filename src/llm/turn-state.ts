/**
 * A turn's bookkeeping while it runs: the text it streamed (this round's and
 * the earlier rounds'), its first-token time, usage, calls, timings and the
 * messages it adds to history, and the summary it ends with.
 */
import { TOOL_INTERRUPTED_OUTPUT } from '../tools/constants.js';
import type { ToolCall, ToolResult } from '../tools/types.js';
import type { ChatMessage } from './chunk.js';
import type {
  RoundTiming,
  TurnEndReason,
  TurnEvent,
  TurnSummary,
  TurnUsage,
} from './turn-runner.js';

/** Wall-clock now in epoch ms with sub-ms precision (comparable across processes). */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

type TextDelta = Extract<TurnEvent, { type: 'text.delta' }>;

/** What a turn under way can tell of itself (see `TurnOptions.onStart`). */
export interface TurnProgress {
  soFar(): ChatMessage[] | undefined;
}

/** A call's outcome as the model reads it. */
export type CallOutcome = Pick<ToolResult, 'callId' | 'name' | 'outcome' | 'output'>;

/**
 * A round's calls of the server's own tools while they run: each one's
 * result once in, in call order, and how results read as messages.
 */
export interface RunningCalls {
  results: Map<string, CallOutcome>;
  messages: (results: readonly CallOutcome[]) => ChatMessage[];
}

/**
 * The calls as they read while they run: each ends as interrupted until its
 * result is in ({@link TurnState.resultIn}).
 */
export function runningCalls(
  calls: readonly ToolCall[],
  messages: RunningCalls['messages'],
): RunningCalls {
  const results = new Map<string, CallOutcome>();
  for (const call of calls) {
    results.set(call.id, {
      callId: call.id,
      name: call.name,
      outcome: 'error',
      output: TOOL_INTERRUPTED_OUTPUT,
    });
  }
  return { results, messages };
}

/** What one turn has made so far. */
export class TurnState implements TurnProgress {
  /** Text of the round under way. */
  roundText = '';
  ttftMs: number | null = null;
  toolRounds = 0;
  /** Messages to append to history. */
  readonly added: ChatMessage[] = [];
  readonly toolCalls: ToolResult[] = [];
  readonly clientCalls: ToolCall[] = [];
  readonly rounds: RoundTiming[] = [];
  readonly usage: TurnUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  /** Some of {@link usage} is estimated: a round was cut before its count came. */
  usageEstimated = false;
  /** Text of the rounds before this one. */
  #earlier = '';
  /** This round's text is in {@link added} already (with its calls, or as the last round's reply). */
  #roundKept = false;
  /** This round's calls are in {@link added}, their results not yet. */
  #callsOpen = false;
  /** The round's running calls: their results so far, {@link TOOL_INTERRUPTED_OUTPUT} for the rest. */
  #running: RunningCalls | undefined;
  readonly #started = performance.now();
  readonly #onText: ((event: TextDelta) => void) | undefined;

  /** `onText` takes the text deltas as they come (see `TurnOptions.onTextDelta`). */
  constructor(onText?: (event: TextDelta) => void) {
    this.#onText = onText;
  }

  /** All reply text streamed so far. */
  get text(): string {
    return this.#earlier + this.roundText;
  }

  /** A round's request goes out: its timings start and its text is empty. */
  startRound(): RoundTiming {
    this.#earlier += this.roundText;
    this.roundText = '';
    this.#roundKept = false;
    const timing: RoundTiming = {
      requestAt: epochNow(),
      firstTokenAt: null,
      lastChunkAt: null,
      handlerMs: 0,
    };
    this.rounds.push(timing);
    return timing;
  }

  /**
   * Reply text for the user: counted, and handed to `onText`. Returns the
   * event to yield when there is no `onText` (or nothing, for empty text).
   */
  say(round: number, delta: string): TextDelta | undefined {
    if (delta === '') return undefined;
    this.ttftMs ??= performance.now() - this.#started;
    this.roundText += delta;
    const event: TextDelta = { type: 'text.delta', round, delta };
    if (this.#onText === undefined) return event;
    this.#onText(event);
    return undefined;
  }

  /** The round's text, if any, as the assistant message history keeps. */
  keepRoundText(): void {
    if (this.roundText !== '') this.added.push({ role: 'assistant', content: this.roundText });
    this.#roundKept = true;
  }

  /**
   * The round's assistant message that makes its calls (their results
   * follow, {@link keepResults}). With `running`, the turn can be cut while
   * they run ({@link soFar}).
   */
  keepCalls(message: ChatMessage, running?: RunningCalls): void {
    this.added.push(message);
    this.#roundKept = true;
    this.#callsOpen = true;
    this.#running = running;
  }

  /** One running call's result, before the round's others are in. */
  resultIn(result: CallOutcome): void {
    this.#running?.results.set(result.callId, result);
  }

  /** The results of the round's calls. */
  keepResults(messages: readonly ChatMessage[]): void {
    this.added.push(...messages);
    this.#callsOpen = false;
    this.#running = undefined;
  }

  /**
   * The messages the turn would leave in history if it were cut now: those
   * added so far and the round's text. While the round's calls run, each
   * one still running reads as interrupted ({@link runningCalls}); without
   * them (calls the client answers), undefined: a call without its result
   * is not a history the model can read.
   */
  soFar(): ChatMessage[] | undefined {
    if (this.#callsOpen) {
      const running = this.#running;
      if (running === undefined) return undefined;
      return [...this.added, ...running.messages([...running.results.values()])];
    }
    if (this.#roundKept || this.roundText === '') return this.added.slice();
    return [...this.added, { role: 'assistant', content: this.roundText }];
  }

  summarize(status: TurnSummary['status'], reason?: TurnEndReason): TurnSummary {
    const summary: TurnSummary = {
      status,
      text: this.text,
      messages: this.added,
      requests: this.rounds.length,
      toolRounds: this.toolRounds,
      toolCalls: this.toolCalls,
      clientCalls: this.clientCalls,
      usage: this.usage,
      ttftMs: this.ttftMs,
      rounds: this.rounds,
      durationMs: performance.now() - this.#started,
    };
    if (reason) summary.reason = reason;
    if (this.usageEstimated) summary.usageEstimated = true;
    return summary;
  }
}
