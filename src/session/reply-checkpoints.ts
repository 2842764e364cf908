/**
 * Checkpoints of a reply under way, for a resume store that writes outside
 * the process (the primary's with workers, Redis): from the reply's first
 * text, the session is told it changed every `everyMs` in which what
 * history would keep of the reply grew (more text; of a spoken reply, more
 * played), and its snapshot then carries the reply as history would keep
 * it if it were cut there. A process killed before the reply ends leaves
 * that much of it in the store, not nothing: all but its last `everyMs`.
 * A reply that ends within `everyMs` of its first text is never written
 * this way. The deltas themselves never write: the timer does, at most
 * once a period. A round of the server's own tool calls is written as soon
 * as its results are in (once the next round's request is out, so the
 * write is not in the tool round's time), text or not: a tool has done its
 * work, and a resumed conversation must not lead the model to do it again.
 * So is a round whose calls start running (once they have started), and
 * each call that ends while others run: a process stopped while they run
 * leaves those still running failed as interrupted, not gone, so the model
 * reads that they may have done their work, and those that ended as they
 * ended.
 */
import type { TurnEvent } from '../llm/turn-runner.js';
import type { TurnProgress } from '../llm/turn-state.js';
import type { Item, McpCallItem } from './events.js';
import type { HistoryGroup } from './history.js';
import type { RunningResponse } from './response-queue.js';
import { INTERRUPTED_CALL, type ReplyCheckpoint, type ResponseWriter } from './response-writer.js';

/** What a response runner tells its checkpoints. */
export interface ReplyWatch {
  /** The turn's running state (`TurnOptions.onStart`). */
  onStart(turn: TurnProgress): void;
  /** The reply's first text: the timer starts. */
  begin(): void;
  /**
   * A turn's event, after the writer sent its own. A call that ended is
   * written now, before the client's socket sends its
   * `response.mcp_call.completed` (its frames leave at the end of this
   * tick), so a process killed as the client reads that the tool ran
   * leaves the store with its result: the model does not run it again. A
   * round's calls starting, and its end, are written at the end of this
   * turn of the event loop (once the calls have started, or the next
   * round's request is out). Either starts the timer.
   */
  turnEvent(e: TurnEvent): void;
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
  /**
   * Tells the session the conversation changed: a write follows, debounced,
   * or at once when `now`.
   */
  changed: (now: boolean) => void;
}

/** Gives the response its checkpoint and starts the timer that asks for writes. */
export function watchReply(o: ReplyWatchOptions): ReplyWatch {
  if (o.everyMs <= 0) {
    const none = (): void => {};
    return { onStart: none, begin: none, turnEvent: none, stop: none };
  }
  let turn: TurnProgress | undefined;
  // While a call streams or awaits the client, the reply cannot be cut: the last one stands.
  let kept: ReplyCheckpoint | undefined;
  const now = (): ReplyCheckpoint | undefined => {
    const cut = turn === undefined ? undefined : o.out.checkpoint(turn);
    if (cut) kept = cut;
    return kept;
  };
  o.response.checkpoint = () => {
    const cut = now();
    return cut && { group: o.group, ...cut };
  };
  let told = sizeOf(undefined);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tell = (atOnce: boolean): void => {
    const size = sizeOf(now());
    if (size === told) return;
    told = size;
    o.changed(atOnce);
  };
  const begin = (): void => {
    if (timer !== undefined || stopped) return;
    timer = setInterval(() => tell(false), o.everyMs);
    timer.unref();
  };
  let soon = false;
  // After this turn of the event loop: the calls start first, or the next
  // round's request goes out. Calls that start together make one write.
  const toolsRan = (): void => {
    if (stopped || soon) return;
    begin();
    soon = true;
    setImmediate(() => {
      soon = false;
      if (!stopped) tell(true);
    });
  };
  return {
    onStart: (t) => {
      turn = t;
    },
    begin,
    turnEvent: (e) => {
      if (e.type === 'tool.result' && !stopped) {
        begin();
        tell(true);
      } else if (e.type === 'tool_call.done' || (e.type === 'round.end' && e.toolCalls > 0)) {
        toolsRan();
      }
    },
    stop: () => {
      stopped = true;
      clearInterval(timer);
      delete o.response.checkpoint;
    },
  };
}

/**
 * How much a checkpoint holds: it grows as the reply says (or plays) more,
 * and as its running calls end.
 */
function sizeOf(cut: ReplyCheckpoint | undefined): string {
  if (cut === undefined) return '';
  let chars = 0;
  let running = 0;
  for (const item of cut.items) {
    if (cutOff(item)) running++;
    if (item.type !== 'message') continue;
    for (const part of item.content) {
      if (part.type === 'output_text') chars += part.text.length;
      else if (part.type === 'output_audio') chars += part.transcript?.length ?? 0;
    }
  }
  return `${cut.items.length} ${cut.messages.length} ${chars} ${running}`;
}

/**
 * The tools of a stored reply's calls that were cut off as they ran
 * ({@link INTERRUPTED_CALL}); read from a record not checked yet, so
 * anything else reads as none.
 */
export function interruptedTools(reply: ReplyCheckpoint | undefined | null): string[] {
  const items: unknown = reply?.items;
  if (!Array.isArray(items)) return [];
  const tools: string[] = [];
  for (const item of items as Array<Partial<Item> | null>) {
    if (cutOff(item)) tools.push(String((item as McpCallItem).name));
  }
  return tools;
}

/** Whether an item is a call cut off as it ran: a live checkpoint's copy or a stored one. */
function cutOff(item: Partial<Item> | null | undefined): boolean {
  if (item?.type !== 'mcp_call') return false;
  return (item as Partial<McpCallItem>).error?.message === INTERRUPTED_CALL.message;
}
