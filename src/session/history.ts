/**
 * Conversation history: items the client sees and messages the model sees, in groups (a user
 * message and all that answers it), so trimming never parts a tool call from its result.
 */
import type { ChatMessage } from '../llm/chunk.js';
import type { Item } from './events.js';
import type { HistoryState, MessagePlace } from './session-state.js';

/** One exchange: a user message (absent for the opening) and what followed. */
export interface HistoryGroup {
  items: Item[];
  messages: ChatMessage[];
}

/** Tokens counted for an image, whatever its size (a high-detail tile set is ~765). */
const IMAGE_TOKENS = 765;
/** Per-message overhead of the chat format. */
const MESSAGE_TOKENS = 4;

/** A cheap, provider-neutral estimate: about 4 characters per token. */
export function estimateTokens(message: ChatMessage): number {
  let chars = 0;
  let images = 0;
  const content = message.content;
  if (typeof content === 'string') chars += content.length;
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (part.type === 'text') chars += part.text.length;
      else images++;
    }
  }
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) {
      chars += call.function.name.length + call.function.arguments.length + 16;
    }
    if (message.function_call) chars += message.function_call.arguments.length + 16;
  }
  return MESSAGE_TOKENS + Math.ceil(chars / 4) + images * IMAGE_TOKENS;
}

/** The messages of a history within a budget, and what had to go. */
export interface TrimResult {
  messages: ChatMessage[];
  estimatedTokens: number;
  droppedGroups: number;
  droppedItems: number;
}

/** Items and messages of one conversation. */
export class History {
  #groups: HistoryGroup[] = [];
  /** Messages that stand for exactly one item (client messages, the greeting): deletable. */
  #single = new Map<string, ChatMessage>();

  /** A history from its data (see {@link History.toState}); the data is taken, not copied. */
  static fromState(state: HistoryState): History {
    const history = new History();
    history.#groups = state.groups;
    for (const s of state.singles) {
      const message = state.groups[s.group]?.messages[s.message];
      if (message) history.#single.set(s.item, message);
    }
    return history;
  }

  /** The history as data (messages that stand for one item are told by place). */
  toState(): HistoryState {
    const singles: HistoryState['singles'] = [];
    for (const [item, message] of this.#single) {
      const place = this.placeOf(message);
      if (place) singles.push({ item, ...place });
    }
    return { groups: this.#groups, singles };
  }

  /** Where a message is: its group and index. */
  placeOf(message: ChatMessage): MessagePlace | undefined {
    for (const [group, g] of this.#groups.entries()) {
      const at = g.messages.indexOf(message);
      if (at !== -1) return { group, message: at };
    }
    return undefined;
  }

  /** The one message an item stands for (client messages, the greeting). */
  messageOf(itemId: string): ChatMessage | undefined {
    return this.#single.get(itemId);
  }

  /** The message at a place. */
  messageAt(place: MessagePlace): ChatMessage | undefined {
    return this.#groups[place.group]?.messages[place.message];
  }

  /** Every item, oldest first. */
  get items(): Item[] {
    return this.#groups.flatMap((g) => g.items);
  }

  /** The id of the newest item, null when empty. */
  lastItemId(): string | null {
    // The newest group may have no items yet (a user message just started it).
    for (let i = this.#groups.length - 1; i >= 0; i--) {
      const last = this.#groups[i]!.items.at(-1);
      if (last) return last.id;
    }
    return null;
  }

  /** The newest group, created when there is none. */
  current(): HistoryGroup {
    return this.#groups.at(-1) ?? this.startGroup();
  }

  /** Starts a new group (a user message begins one). */
  startGroup(): HistoryGroup {
    const group: HistoryGroup = { items: [], messages: [] };
    this.#groups.push(group);
    return group;
  }

  /** Adds an item that maps to exactly one message. */
  addMessageItem(group: HistoryGroup, item: Item, message: ChatMessage): void {
    group.items.push(item);
    group.messages.push(message);
    this.#single.set(item.id, message);
  }

  /** Finds an item by id. */
  find(id: string): Item | undefined {
    for (const g of this.#groups) {
      const item = g.items.find((i) => i.id === id);
      if (item) return item;
    }
    return undefined;
  }

  /**
   * Puts tool results right after the assistant message that made the call
   * (and its other results), so the history stays valid to send back. The
   * message is found by call id, or is `owner` (legacy `functions` and prompt
   * mode carry no ids). Returns the id of the item the result now follows.
   */
  insertToolResults(
    callId: string,
    item: Item,
    messages: readonly ChatMessage[],
    owner?: ChatMessage,
  ): string | null {
    for (const g of this.#groups) {
      let at = g.messages.findIndex(
        (m) => m.role === 'assistant' && m.tool_calls?.some((c) => c.id === callId),
      );
      if (at === -1 && owner !== undefined) at = g.messages.indexOf(owner);
      if (at === -1) continue;
      // Skip the call's other results: what follows it up to the next assistant
      // message or message of the client's (a user message may come later).
      const clients = new Set(this.#single.values());
      let end = at + 1;
      while (
        end < g.messages.length &&
        g.messages[end]!.role !== 'assistant' &&
        !clients.has(g.messages[end]!)
      ) {
        end++;
      }
      g.messages.splice(end, 0, ...messages);
      const callItem = g.items.findIndex((i) => i.type === 'function_call' && i.call_id === callId);
      let itemEnd = callItem === -1 ? g.items.length : callItem + 1;
      while (itemEnd < g.items.length && g.items[itemEnd]!.type !== 'message') itemEnd++;
      const previous = this.#itemBefore(g, itemEnd);
      g.items.splice(itemEnd, 0, item);
      return previous;
    }
    // The call is gone (never in history): the results follow the latest exchange.
    const previous = this.lastItemId();
    const g = this.current();
    g.items.push(item);
    g.messages.push(...messages);
    return previous;
  }

  /** The id of the item before position `index` of group `g`, looking into earlier groups. */
  #itemBefore(g: HistoryGroup, index: number): string | null {
    if (index > 0) return g.items[index - 1]!.id;
    for (let i = this.#groups.indexOf(g) - 1; i >= 0; i--) {
      const last = this.#groups[i]!.items.at(-1);
      if (last) return last.id;
    }
    return null;
  }

  /**
   * Deletes a message item that stands for one chat message. Items of a
   * response (text beside tool calls, calls, results) stay: removing one
   * would part a call from its result. Returns false when not deletable.
   */
  delete(id: string): boolean {
    const message = this.#single.get(id);
    if (message === undefined) return false;
    for (const g of this.#groups) {
      const i = g.items.findIndex((it) => it.id === id);
      if (i === -1) continue;
      g.items.splice(i, 1);
      g.messages.splice(g.messages.indexOf(message), 1);
      this.#single.delete(id);
      if (g.items.length === 0) this.#groups.splice(this.#groups.indexOf(g), 1);
      return true;
    }
    return false;
  }

  /** Removes everything; returns the items that were there. */
  clear(): Item[] {
    const items = this.items;
    this.#groups = [];
    this.#single.clear();
    return items;
  }

  /**
   * The messages to send, oldest groups dropped (for good) until the rest and
   * `reservedTokens` (system prompt) fit `budgetTokens`. The newest group is
   * always kept, even alone over budget: the model's error then says so.
   */
  trim(budgetTokens: number, reservedTokens: number): TrimResult {
    const sizes = this.#groups.map((g) => g.messages.reduce((n, m) => n + estimateTokens(m), 0));
    let total = reservedTokens + sizes.reduce((a, b) => a + b, 0);
    let drop = 0;
    let droppedItems = 0;
    while (total > budgetTokens && drop < this.#groups.length - 1) {
      total -= sizes[drop]!;
      droppedItems += this.#groups[drop]!.items.length;
      for (const item of this.#groups[drop]!.items) this.#single.delete(item.id);
      drop++;
    }
    if (drop > 0) this.#groups.splice(0, drop);
    return {
      messages: this.#groups.flatMap((g) => g.messages),
      estimatedTokens: total,
      droppedGroups: drop,
      droppedItems,
    };
  }
}
