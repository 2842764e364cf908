/**
 * Checkpoints of a reply under way, for a resume store that writes outside
 * the process (the primary's with workers, Redis): while a response runs,
 * the session is told it changed every `everyMs` in which the reply said
 * more (a spoken reply: played more), and its snapshot then carries the
 * reply as history would keep it if it were cut there. A process killed
 * before the reply ends leaves that much of it in the store, not nothing.
 * The deltas themselves never write: the timer does, at most once a period.
 */
import type { TurnProgress } from '../llm/turn-state.js';
import type { HistoryGroup } from './history.js';
import type { RunningResponse } from './response-queue.js';
import type { ReplyCheckpoint, ResponseWriter } from './response-writer.js';

/** What a response runner tells its checkpoints. */
export interface ReplyWatch {
  /** The turn's running state (`TurnOptions.onStart`). */
  onStart(turn: TurnProgress): void;
  /** The reply said more (a text delta). */
  said(): void;
  /** History takes the reply (or it ends): no more checkpoints. */
  stop(): void;
}

/** Options of {@link watchReply}. */
export interface ReplyWatchOptions {
  response: RunningResponse;
  out: ResponseWriter;
  /** The exchange the reply joins. */
  group: HistoryGroup;
  /** How often at most; 0 = never (the response then has no checkpoint either). */
  everyMs: number;
  /** A spoken reply goes on playing after its text is all there. */
  spoken: boolean;
  /** Tells the session the conversation changed (a write follows, debounced). */
  changed: () => void;
}

/** Gives the response its checkpoint and starts the timer that asks for writes. */
export function watchReply(o: ReplyWatchOptions): ReplyWatch {
  if (o.everyMs <= 0) return { onStart: () => {}, said: () => {}, stop: () => {} };
  let turn: TurnProgress | undefined;
  // While a call runs the reply cannot be cut into history: the last one stands.
  let kept: ReplyCheckpoint | undefined;
  let news = false;
  o.response.checkpoint = () => {
    const now = turn === undefined ? undefined : o.out.checkpoint(turn);
    if (now) kept = now;
    return kept && { group: o.group, ...kept };
  };
  const timer = setInterval(() => {
    if (!news && !o.spoken) return;
    news = false;
    o.changed();
  }, o.everyMs);
  timer.unref();
  return {
    onStart: (t) => {
      turn = t;
    },
    said: () => {
      news = true;
    },
    stop: () => {
      clearInterval(timer);
      delete o.response.checkpoint;
    },
  };
}
