/**
 * Conversation history: items the client sees and messages the model sees, in groups (a user
 * message and all that answers it), so trimming never parts a tool call from its result.
 */
import type { ChatMessage } from '../llm/chunk.js';
import { keepMessageJson } from '../llm/request-body.js';
import { estimateTokens } from '../llm/token-estimate.js';
import type { Item } from './events.js';
import type { HistoryState, MessagePlace } from './session-state.js';

/** One exchange: a user message (absent for the opening) and what followed. */
export interface HistoryGroup {
  items: Item[];
  messages: ChatMessage[];
}

/** The messages of a history within a budget, and what had to go. */
export interface TrimResult {
  messages: ChatMessage[];
  estimatedTokens: number;
  droppedGroups: number;
  droppedItems: number;
  /** The ids of the items dropped, oldest first (empty when none). */
  droppedIds: string[];
}

/** Groups read back from their stored JSON ({@link parseGroup}), with that JSON. */
const readFrom = new WeakMap<HistoryGroup, string>();

/**
 * A group parsed from its stored JSON (one of {@link History.groupsJson}).
 * A history made from it ({@link History.fromState}) keeps that text as the
 * group's JSON, so a restored conversation's first save serialises none of
 * its groups again.
 */
export function parseGroup(json: string): HistoryGroup {
  const group = JSON.parse(json) as HistoryGroup;
  if (typeof group === 'object' && group !== null) readFrom.set(group, json);
  return group;
}

/** Items and messages of one conversation. */
export class History {
  #groups: HistoryGroup[] = [];
  /** Messages that stand for exactly one item (client messages, the greeting): deletable. */
  #single = new Map<string, ChatMessage>();
  /**
   * A response's assistant message items and the model's message that holds
   * their words (null: one the model never wrote, a tool's filler line).
   * Deletable when no response runs: the message loses their words, and
   * keeps its tool calls.
   */
  #replies = new Map<string, ChatMessage | null>();
  /** Every item by id, and the call ids in history: look-ups stay O(1) however long it grows. */
  #byId = new Map<string, Item>();
  #callIds = new Set<string>();
  /** What the messages weigh (their JSON), as they were when they joined. */
  #bytes = 0;
  #sizes = new WeakMap<ChatMessage, number>();
  /** Each message's estimated tokens, and their sum ({@link trim} runs at every request). */
  #tokens = new WeakMap<ChatMessage, number>();
  #tokenTotal = 0;
  /** The group each item is in. */
  #groupOf = new Map<string, HistoryGroup>();
  /**
   * Each group's JSON while the group is unchanged: a resume store write
   * serialises only the groups a change touched. Every change to a group
   * drops its entry — History's own, and {@link touch} for items changed in
   * place (a cut to what was heard).
   */
  #json = new WeakMap<HistoryGroup, string>();
  /**
   * Where the messages of {@link #single} are ({@link toState}), kept while
   * the history only grows at its ends; undefined after a change that may
   * move them (a deletion, a trim, results put between messages, a reply's
   * items added).
   */
  #places: Places | undefined = { singles: [], replies: [] };

  /**
   * Checks every cached group JSON against a fresh serialisation: a
   * difference (a change that did not call {@link touch}) is noted in
   * {@link staleJson} and the fresh JSON used. For tests.
   */
  static verifyJson = false;
  /** What {@link verifyJson} found. */
  static readonly staleJson: string[] = [];

  /** A history from its data (see {@link History.toState}); the data is taken, not copied. */
  static fromState(state: HistoryState): History {
    const history = new History();
    history.#groups = state.groups;
    history.#places = undefined;
    for (const g of state.groups) {
      history.#indexGroup(g, g.items, g.messages);
      // The text it was parsed from is its JSON: it has not changed since.
      const json = readFrom.get(g);
      if (json !== undefined) history.#json.set(g, json);
    }
    for (const s of state.singles) {
      const message = state.groups[s.group]?.messages[s.message];
      if (message) history.#single.set(s.item, message);
    }
    // Older states have none: their replies' items stay as they are.
    for (const r of state.replies ?? []) {
      if (!history.#byId.has(r.item)) continue;
      const message = r.message === null ? null : state.groups[r.group]?.messages[r.message];
      if (message !== undefined) history.#replies.set(r.item, message);
    }
    return history;
  }

  /** How many items there are. */
  get size(): number {
    return this.#byId.size;
  }

  /** What the messages weigh, in bytes of JSON. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Whether a tool call with this id is in history. */
  hasCall(callId: string): boolean {
    return this.#callIds.has(callId);
  }

  /**
   * Adds a response's items and messages to a group; `replies` says which
   * message holds each of its message items' words (see {@link deleteReply}).
   */
  addItems(
    group: HistoryGroup,
    items: readonly Item[],
    messages: readonly ChatMessage[],
    replies?: ReadonlyMap<string, ChatMessage | null>,
  ): void {
    group.items.push(...items);
    group.messages.push(...messages);
    this.#indexGroup(group, items, messages);
    if (!replies?.size) return;
    const at = this.#groups.lastIndexOf(group);
    for (const [item, message] of replies) {
      this.#replies.set(item, message);
      // Known places stay known: the group only grew at its end.
      const index = message === null ? -1 : group.messages.indexOf(message);
      this.#places?.replies.push({ item, group: at, message: index === -1 ? null : index });
    }
    if (at === -1) this.#places = undefined;
  }

  /** An item of history was changed in place: its group (and its messages, for requests) is serialised again. */
  touch(itemId: string): void {
    const group = this.#groupOf.get(itemId);
    if (!group) return;
    this.#json.delete(group);
    for (const m of group.messages) {
      keepMessageJson(m, JSON.stringify(m));
      this.#weighAnew(m);
    }
  }

  /** Every group as JSON, oldest first: cached for the groups no change has touched. */
  groupsJson(): string[] {
    const out: string[] = [];
    for (const [i, g] of this.#groups.entries()) {
      let json = this.#json.get(g);
      if (json !== undefined && History.verifyJson && json !== JSON.stringify(g)) {
        History.staleJson.push(`group ${i} changed without touch(): was ${json}`);
        json = undefined;
      }
      if (json === undefined) {
        json = JSON.stringify(g);
        this.#json.set(g, json);
      }
      out.push(json);
    }
    return out;
  }

  #indexGroup(group: HistoryGroup, items: readonly Item[], messages: readonly ChatMessage[]): void {
    this.#json.delete(group);
    for (const item of items) {
      this.#groupOf.set(item.id, group);
      this.#byId.set(item.id, item);
      if (item.type === 'function_call') this.#callIds.add(item.call_id);
    }
    for (const m of messages) {
      const json = JSON.stringify(m);
      keepMessageJson(m, json);
      this.#sizes.set(m, json.length);
      this.#weighAnew(m);
      this.#bytes += json.length;
    }
  }

  #unindexGroup(items: readonly Item[], messages: readonly ChatMessage[]): void {
    for (const item of items) {
      this.#groupOf.delete(item.id);
      this.#byId.delete(item.id);
      if (item.type === 'function_call') this.#callIds.delete(item.call_id);
    }
    for (const m of messages) {
      this.#bytes -= this.#sizes.get(m) ?? 0;
      // A kept estimate is one in the sum: a message that joined again would otherwise count only its change.
      this.#tokenTotal -= this.#tokens.get(m) ?? 0;
      this.#tokens.delete(m);
    }
  }

  /**
   * The history as data (messages that stand for one item are told by
   * place). Such a message is in its item's group: only the groups are
   * numbered, not every message, and the places are kept between calls
   * (this runs at every resume store write).
   */
  toState(): HistoryState {
    let places = this.#places;
    if (places !== undefined && History.verifyJson) {
      const fresh = JSON.stringify(this.#findPlaces());
      if (JSON.stringify(places) !== fresh) {
        History.staleJson.push(`single messages moved without a reset: ${JSON.stringify(places)}`);
        places = undefined;
      }
    }
    places ??= this.#places = this.#findPlaces();
    const state: HistoryState = { groups: this.#groups, singles: places.singles };
    if (places.replies.length > 0) state.replies = places.replies;
    return state;
  }

  /** Every message of {@link #single} and {@link #replies} by place, worked out from the groups. */
  #findPlaces(): Places {
    const places: Places = { singles: [], replies: [] };
    if (this.#single.size === 0 && this.#replies.size === 0) return places;
    const numbers = new Map<HistoryGroup, number>();
    for (const [i, g] of this.#groups.entries()) numbers.set(g, i);
    for (const [item, message] of this.#single) {
      const g = this.#groupOf.get(item);
      const group = g && numbers.get(g);
      if (g === undefined || group === undefined) continue;
      const at = g.messages.indexOf(message);
      if (at !== -1) places.singles.push({ item, group, message: at });
    }
    for (const [item, message] of this.#replies) {
      const g = this.#groupOf.get(item);
      const group = g && numbers.get(g);
      if (g === undefined || group === undefined) continue;
      // A message no longer in the group (nothing of it was heard) holds nothing the model reads.
      const at = message === null ? -1 : g.messages.indexOf(message);
      places.replies.push({ item, group, message: at === -1 ? null : at });
    }
    return places;
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
    return flat(this.#groups, (g) => g.items);
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

  /** A group's place among the groups; -1 when it is not one of them (trimmed away). */
  groupIndex(group: HistoryGroup): number {
    return this.#groups.lastIndexOf(group);
  }

  /** The group at a place ({@link groupIndex}), if there is one. */
  groupAt(index: number): HistoryGroup | undefined {
    return this.#groups[index];
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
    this.#indexGroup(group, [item], [message]);
    const places = this.#places;
    if (places === undefined) return;
    const at =
      this.#groups.at(-1) === group ? this.#groups.length - 1 : this.#groups.indexOf(group);
    if (at === -1) this.#places = undefined;
    else places.singles.push({ item: item.id, group: at, message: group.messages.length - 1 });
  }

  /**
   * Puts a message item that stands for one chat message first (`after`
   * null: a group of its own, the oldest) or right after item `after`: at
   * the end of that item's group when it is the group's last, else right
   * after it when it is a message of its own (a client's, the greeting).
   * Never between a tool call and its results. Returns why it cannot go
   * there, or undefined once it is in.
   */
  insertMessageItem(after: string | null, item: Item, message: ChatMessage): string | undefined {
    let group: HistoryGroup;
    let itemAt: number;
    let messageAt: number;
    if (after === null) {
      group = { items: [], messages: [] };
      this.#groups.unshift(group);
      itemAt = 0;
      messageAt = 0;
    } else {
      const g = this.#groupOf.get(after);
      if (g === undefined) return `no item "${after}" is in the conversation`;
      group = g;
      itemAt = g.items.findIndex((it) => it.id === after) + 1;
      const own = this.#single.get(after);
      messageAt =
        itemAt === g.items.length ? g.messages.length : own ? g.messages.indexOf(own) + 1 : 0;
      if (messageAt === 0 || g.messages[messageAt]?.role === 'tool') {
        return `"${after}" is inside a response (between its text, tool calls and their results); put the item after the response's last item or after a message`;
      }
    }
    group.items.splice(itemAt, 0, item);
    group.messages.splice(messageAt, 0, message);
    this.#single.set(item.id, message);
    this.#indexGroup(group, [item], [message]);
    this.#places = undefined;
    return undefined;
  }

  /** Finds an item by id. */
  find(id: string): Item | undefined {
    return this.#byId.get(id);
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
    this.#places = undefined;
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
      this.#indexGroup(g, [item], messages);
      const callItem = g.items.findIndex((i) => i.type === 'function_call' && i.call_id === callId);
      let itemEnd = callItem === -1 ? g.items.length : callItem + 1;
      while (itemEnd < g.items.length && g.items[itemEnd]!.type !== 'message') itemEnd++;
      const previous = this.#itemBefore(g, itemEnd);
      g.items.splice(itemEnd, 0, item);
      return previous;
    }
    // The call is gone (never in history): the results follow the latest exchange.
    const previous = this.lastItemId();
    this.addItems(this.current(), [item], messages);
    return previous;
  }

  /** A message's estimated tokens, as it was when it joined or was last touched. */
  #weigh(m: ChatMessage): number {
    const tokens = this.#tokens.get(m);
    if (tokens === undefined) return this.#weighAnew(m);
    if (History.verifyJson && tokens !== estimateTokens(m)) {
      History.staleJson.push(`a message changed without touch(): ${JSON.stringify(m)}`);
      return this.#weighAnew(m);
    }
    return tokens;
  }

  /** Estimates a message's tokens now, keeps the estimate and moves the sum by the change. */
  #weighAnew(m: ChatMessage): number {
    const tokens = estimateTokens(m);
    this.#tokenTotal += tokens - (this.#tokens.get(m) ?? 0);
    this.#tokens.set(m, tokens);
    return tokens;
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
    this.#places = undefined;
    for (const g of this.#groups) {
      const i = g.items.findIndex((it) => it.id === id);
      if (i === -1) continue;
      const [item] = g.items.splice(i, 1);
      g.messages.splice(g.messages.indexOf(message), 1);
      this.#single.delete(id);
      this.#unindexGroup([item!], [message]);
      this.#json.delete(g);
      if (g.items.length === 0) this.#groups.splice(this.#groups.indexOf(g), 1);
      return true;
    }
    return false;
  }

  /**
   * Deletes an assistant message item of a response: the model's message
   * that holds its words loses them — it leaves history when nothing else is
   * left in it, and keeps its tool calls (with their results) when it made
   * some. Returns false when the item is not such an item, or its message is
   * not its words alone (prompt-based tools write their calls into it).
   */
  deleteReply(id: string): boolean {
    const message = this.#replies.get(id);
    const g = this.#groupOf.get(id);
    if (message === undefined || g === undefined) return false;
    this.#places = undefined;
    const [item] = g.items.splice(
      g.items.findIndex((it) => it.id === id),
      1,
    );
    this.#replies.delete(id);
    this.#json.delete(g);
    const at = message === null ? -1 : g.messages.indexOf(message);
    if (message?.role === 'assistant' && at !== -1) {
      // The message's other items (its round's text on both sides of a call) keep their words.
      const rest = g.items.filter((it) => this.#replies.get(it.id) === message);
      const calls = message.tool_calls !== undefined || message.function_call !== undefined;
      if (rest.length === 0 && !calls) {
        g.messages.splice(at, 1);
        this.#unindexGroup([item!], [message]);
      } else {
        const words = rest.map(wordsOf).filter((w) => w !== '');
        const spoken = rest.some(
          (it) => it.type === 'message' && it.content[0]?.type === 'output_audio',
        );
        message.content = words.length > 0 ? words.join(spoken ? ' ' : '') : null;
        this.#unindexGroup([item!], []);
        keepMessageJson(message, JSON.stringify(message));
        this.#weighAnew(message);
      }
    } else this.#unindexGroup([item!], []);
    if (g.items.length === 0 && g.messages.length === 0)
      this.#groups.splice(this.#groups.indexOf(g), 1);
    return true;
  }

  /** Removes everything; returns the items that were there. */
  clear(): Item[] {
    const items = this.items;
    this.#groups = [];
    this.#places = { singles: [], replies: [] };
    this.#single.clear();
    this.#replies.clear();
    this.#byId.clear();
    this.#groupOf.clear();
    this.#callIds.clear();
    this.#bytes = 0;
    this.#tokens = new WeakMap();
    this.#tokenTotal = 0;
    return items;
  }

  /**
   * The messages to send, oldest groups dropped (for good) until the rest and
   * `reservedTokens` (system prompt) fit `budgetTokens`. The newest group is
   * always kept, even alone over budget: the model's error then says so.
   * With `through` (a running response's group), the groups after it are
   * left out: they began while it ran, and are the next response's.
   */
  trim(budgetTokens: number, reservedTokens: number, through?: HistoryGroup): TrimResult {
    // Exchanges after `through` (begun while a response runs) are not its to read, nor to make room for.
    const at = through === undefined ? -1 : this.#groups.indexOf(through);
    const end = at === -1 ? this.#groups.length : at + 1;
    let total = reservedTokens + this.#totalTokens();
    for (const g of this.#groups.slice(end)) for (const m of g.messages) total -= this.#weigh(m);
    let drop = 0;
    const droppedIds: string[] = [];
    while (total > budgetTokens && drop < end - 1) {
      const g = this.#groups[drop]!;
      for (const m of g.messages) total -= this.#weigh(m);
      for (const item of g.items) {
        this.#single.delete(item.id);
        this.#replies.delete(item.id);
        droppedIds.push(item.id);
      }
      this.#unindexGroup(g.items, g.messages);
      drop++;
    }
    if (drop > 0) {
      this.#groups.splice(0, drop);
      this.#places = undefined;
    }
    return {
      // Most requests read every group: no copy of the list for them.
      messages: flat(
        end - drop === this.#groups.length ? this.#groups : this.#groups.slice(0, end - drop),
        (g) => g.messages,
      ),
      estimatedTokens: total,
      droppedGroups: drop,
      droppedItems: droppedIds.length,
      droppedIds,
    };
  }

  /** The messages' estimated tokens, summed as they join and leave. */
  #totalTokens(): number {
    if (!History.verifyJson) return this.#tokenTotal;
    let fresh = 0;
    for (const g of this.#groups) for (const m of g.messages) fresh += this.#weigh(m);
    if (fresh !== this.#tokenTotal) {
      History.staleJson.push(`token total out of step: ${this.#tokenTotal}, counted ${fresh}`);
      this.#tokenTotal = fresh;
    }
    return fresh;
  }
}

/** Where the messages of single items and of replies' items are (see {@link HistoryState}). */
interface Places {
  singles: HistoryState['singles'];
  replies: NonNullable<HistoryState['replies']>;
}

/** The words of a message item: its text, or its transcript when spoken. */
function wordsOf(item: Item): string {
  if (item.type !== 'message') return '';
  const part = item.content[0];
  if (part?.type === 'output_text') return part.text;
  if (part?.type === 'output_audio') return part.transcript ?? '';
  return '';
}

/**
 * What `pick` gives of each group, in one list. A loop, not `flatMap`: in
 * Node 20 `flatMap` takes ~30 µs for 200 groups and this ~2 (it runs at
 * every request).
 */
function flat<T>(groups: readonly HistoryGroup[], pick: (g: HistoryGroup) => readonly T[]): T[] {
  const out: T[] = [];
  for (const g of groups) for (const x of pick(g)) out.push(x);
  return out;
}
