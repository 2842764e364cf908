/**
 * The conversation: its items and history, client calls awaiting output, the
 * greeting, and `conversation.item.*` (create, retrieve, delete, truncate).
 */
import type { Logger } from 'pino';
import type { CharacterTurnSettings } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';
import type { ChatMessage } from '../llm/chunk.js';
import { toolResultMessages } from '../llm/turn-runner.js';
import type {
  ClientFunctionCallItem,
  ClientItem,
  FunctionCallItem,
  FunctionCallOutputItem,
  Item,
  McpCallItem,
  MessageItem,
  ServerEvent,
} from './events.js';
import { backgroundResultMessage } from '../tools/background.js';
import type { ToolResult } from '../tools/types.js';
import { History, type HistoryGroup, type TrimResult } from './history.js';
import { checkMessage, duplicateCallId } from './item-checks.js';
import { ITEM_HEAP_SHARE, memoryShare } from './memory.js';
import {
  finishedMcpCall,
  heardText,
  itemNotFound,
  messageItem,
  newId,
  plainMessage,
  spokenAsText,
  textOf,
  withoutAudio,
  toChatMessage,
} from './items.js';
import { callMessage, MISSING_OUTPUT, outputMessages } from './response-input.js';
import type { ExchangeCheckpoint } from './response-writer.js';
import type { ConversationState } from './session-state.js';
import type { SpokenTiming } from './spoken-timing.js';

/**
 * Most items one conversation keeps. Each response trims history to the
 * context budget, but items a client adds between responses would otherwise
 * pile up without end.
 */
export const MAX_CONVERSATION_ITEMS = 5_000;
/** Most bytes (as JSON) the conversation's messages may weigh, for the same reason. */
export const MAX_CONVERSATION_BYTES = 32 * 1024 * 1024;

/** Options of {@link Conversation}. */
export interface ConversationOptions {
  send: (event: ServerEvent) => void;
  /** The session's logger now (it changes with the character). */
  log: () => Logger;
  /** Text as logs may show it. */
  content: (text: string) => string | { chars: number };
  /** The newest item of the running response, if one runs and has items. */
  responseLastItemId: () => string | null | undefined;
  /** Whether the running response has an item of this id. */
  responseHas: (itemId: string) => boolean;
  /** The running response as history would keep it if it were cut now, if it has said anything. */
  responseCheckpoint?: () => ExchangeCheckpoint | undefined;
}

/** A client-side call awaiting output, and the assistant message that made it. */
interface PendingCall {
  name: string;
  owner: ChatMessage | undefined;
}

/** An assistant message whose text was spoken in one or more items. */
export interface SpokenRound {
  message: ChatMessage;
  items: Array<{ item: MessageItem; transcript: string }>;
}

/**
 * Spoken items a late `conversation.item.truncate` can still cut: the most
 * recent ones keep their word timing (two numbers a word), older ones none.
 */
export const MAX_SPOKEN_ITEMS = 64;

/** A spoken item's round, and its word timing once its response has ended. */
interface SpokenRecord {
  round: SpokenRound;
  timing?: SpokenTiming | undefined;
}

/** A conversation's items and what the model sees of them. */
export class Conversation {
  readonly #o: ConversationOptions;
  #history: History;
  /** Legacy and prompt tool formats carry no call ids: outputs follow their owner message. */
  readonly #pending = new Map<string, PendingCall>();
  /** The greeting as history holds it, so a barge-in can cut it to what was heard. */
  #greeting: { item: MessageItem; message: ChatMessage } | undefined;
  #greetingSpoken = false;
  /** Spoken items and the message that holds their text, for truncation after the fact. */
  readonly #spoken = new Map<string, SpokenRecord>();
  /** The character's turn settings: tool results are written in its tool format. */
  #turn: CharacterTurnSettings = {};
  /** The newest user item that joined while the running response runs. */
  #late: string | undefined;

  constructor(options: ConversationOptions, state?: ConversationState) {
    this.#o = options;
    this.#history = state ? History.fromState(state.history) : new History();
    if (!state) return;
    for (const p of state.pendingCalls) {
      const owner = p.owner ? this.#history.messageAt(p.owner) : undefined;
      this.#pending.set(p.callId, { name: p.name, owner });
    }
    if (state.reply) this.#restoreReply(state.reply);
    if (state.greeting) {
      const item = this.#history.find(state.greeting.itemId);
      const message = this.#history.messageOf(state.greeting.itemId);
      if (item?.type === 'message' && message) this.#greeting = { item, message };
      this.#greetingSpoken = state.greeting.spoken;
    }
  }

  /** The conversation as data (the live objects: clone before keeping). */
  toState(): ConversationState {
    const pendingCalls: ConversationState['pendingCalls'] = [];
    for (const [callId, { name, owner }] of this.#pending) {
      pendingCalls.push({
        callId,
        name,
        owner: owner ? (this.#history.placeOf(owner) ?? null) : null,
      });
    }
    const g = this.#greeting;
    const state: ConversationState = {
      history: this.#history.toState(),
      pendingCalls,
      greeting: g ? { itemId: g.item.id, spoken: this.#greetingSpoken } : null,
    };
    const reply = this.#o.responseCheckpoint?.();
    const group = reply ? this.#history.groupIndex(reply.group) : -1;
    if (reply && group !== -1) {
      state.reply = { group, messages: reply.messages, items: reply.items };
    }
    return state;
  }

  /** A reply that was under way when the state was written joins history as cut there. */
  #restoreReply(reply: NonNullable<ConversationState['reply']>): void {
    const group = this.#history.groupAt(reply.group);
    if (!group || !Array.isArray(reply.items) || !Array.isArray(reply.messages)) {
      throw new Error(
        `its reply under way names exchange ${String(reply.group)}, which the conversation does not have.`,
      );
    }
    this.#history.addItems(group, reply.items, reply.messages);
  }

  get items(): Item[] {
    return this.#history.items;
  }

  /** History's groups as JSON (the resume store's parts), serialised once per change. */
  groupsJson(): string[] {
    return this.#history.groupsJson();
  }

  /** The newest item in history (a running response's items join it when it ends). */
  lastItemId(): string | null {
    return this.#history.lastItemId();
  }

  /**
   * The item a new response's items follow: history's newest. Items that join
   * while it runs come after all of its items.
   */
  responseStarts(): string | null {
    this.#late = undefined;
    return this.#history.lastItemId();
  }

  /**
   * The newest item in the order history will hold them, where the client's
   * next item goes: while a response runs, the last item that joined after it
   * started, else its newest item (its items join before those).
   */
  newestItemId(): string | null {
    const running = this.#o.responseLastItemId();
    if (running === undefined) return this.#history.lastItemId();
    return this.#late ?? running ?? this.#history.lastItemId();
  }

  /** Notes a user's item that joined history while a response runs (its items come first). */
  #joined(itemId: string): void {
    if (this.#o.responseLastItemId() !== undefined) this.#late = itemId;
  }

  find(id: string): Item | undefined {
    return this.#history.find(id);
  }

  /** Whether a call id is in use: a client call awaiting output, or a call in history. */
  callIdTaken(callId: string): boolean {
    return this.#pending.has(callId) || this.#history.hasCall(callId);
  }

  /** Tells the client of an item that joined the conversation after `previous`. */
  #added(previous: string | null, item: Item): void {
    this.#o.send({ type: 'conversation.item.added', previous_item_id: previous, item });
    this.#o.send({ type: 'conversation.item.done', previous_item_id: previous, item });
  }

  /** Sends every item, as a new client (or one after a change of character) learns them. */
  announce(): void {
    let previous: string | null = null;
    for (const item of this.#history.items) {
      this.#added(previous, item);
      previous = item.id;
    }
  }

  /** A new character starts a new conversation: everything goes, its greeting comes (unless off). */
  restart(character: LoadedCharacter, greeting = true): void {
    for (const item of this.#history.clear()) {
      this.#o.send({ type: 'conversation.item.deleted', item_id: item.id });
    }
    this.#pending.clear();
    this.#spoken.clear();
    this.#greeting = undefined;
    if (greeting) this.addGreeting(character);
  }

  /**
   * The client turned the greeting off: an unspoken greeting that is still
   * the conversation's last word leaves it (`conversation.item.deleted`),
   * so the model does not think it said it. One already heard stays.
   */
  dropGreeting(): void {
    const g = this.#greeting;
    if (!g || this.#greetingSpoken || this.#history.lastItemId() !== g.item.id) return;
    this.#history.delete(g.item.id);
    this.#greeting = undefined;
    this.#o.send({ type: 'conversation.item.deleted', item_id: g.item.id });
  }

  /** Puts the character's greeting (if any) first. */
  addGreeting(character: LoadedCharacter): void {
    this.#greeting = undefined;
    this.#greetingSpoken = false;
    if (!character.greeting) return;
    const item = messageItem('assistant', [{ type: 'output_text', text: character.greeting }]);
    const message: ChatMessage = { role: 'assistant', content: character.greeting };
    this.#history.addMessageItem(this.#history.current(), item, message);
    this.#greeting = { item, message };
  }

  /** The greeting to speak: not spoken yet and still the conversation's last word. */
  greetingToSpeak(): MessageItem | undefined {
    const g = this.#greeting;
    if (this.#greetingSpoken || !g || this.#history.lastItemId() !== g.item.id) return undefined;
    return g.item;
  }

  markGreetingSpoken(): void {
    this.#greetingSpoken = true;
  }

  /**
   * The greeting was spoken: its item is audio, and history keeps what the
   * user heard of it (all of it unless `interrupted`).
   */
  greetingHeard(transcript: string, interrupted: boolean): void {
    const g = this.#greeting;
    if (!g) return;
    g.item.content = [{ type: 'output_audio', transcript }];
    if (interrupted) {
      g.message.content = transcript;
      g.item.status = 'incomplete';
      const round = { message: g.message, items: [{ item: g.item, transcript }] };
      this.#spoken.set(g.item.id, { round });
    }
    this.#history.touch(g.item.id);
  }

  /** `conversation.item.create`; returns the error to send, if any. */
  create(
    item: ClientItem | ClientFunctionCallItem,
    previousItemId: string | null | undefined,
    eventId: string | null,
  ): ProtocolError | undefined {
    const err = (code: string, message: string, param: string | null) =>
      new ProtocolError(code, message, { param, eventId });
    const newest = this.newestItemId();
    // `root` of an empty conversation, like its newest item, is its end.
    const after = previousItemId === 'root' && newest === null ? null : previousItemId;
    const inserting = after != null && after !== newest;
    if (inserting && item.type !== 'message') {
      return err(
        'invalid_value',
        `conversation.item.create: previous_item_id: a ${item.type} item is added at the end of the conversation; only a message can be put before the end. Expected ${JSON.stringify(newest)} or nothing, got "${after}".`,
        'previous_item_id',
      );
    }
    const share = memoryShare();
    if (share > ITEM_HEAP_SHARE) {
      return new ProtocolError(
        'server_memory_full',
        `conversation.item.create: the server's memory is at ${Math.round(share * 100)}% of its limit, so it takes no more items now; nothing was added. Send it again shortly, or start a session on another instance.`,
        { type: 'server_error', param: null, eventId },
      );
    }
    const full = this.#full(item);
    if (full) return err('conversation_full', full, null);
    if (item.id !== undefined && this.#history.find(item.id)) {
      return err(
        'invalid_value',
        `conversation.item.create: item.id: an item "${item.id}" already exists.`,
        'item.id',
      );
    }
    if (item.type === 'function_call') return this.#createCall(item, newest, eventId);
    if (item.type === 'function_call_output') {
      const pending = this.#pending.get(item.call_id);
      if (pending === undefined) {
        const waiting = this.#pending.size
          ? `; waiting: ${[...this.#pending.keys()].join(', ')}`
          : '';
        return err(
          'invalid_value',
          `conversation.item.create: item.call_id: no client-side function call "${item.call_id}" is waiting for output${waiting}.`,
          'item.call_id',
        );
      }
      this.#pending.delete(item.call_id);
      this.#addCallOutput(item.call_id, pending, item.output, item.id);
      return undefined;
    }
    const problem = checkMessage(item, {
      event: 'conversation.item.create',
      at: 'item',
      eventId,
    });
    if (problem) return problem;
    // Audio parts are kept with their transcripts, which the model reads.
    const stored = messageItem(item.role, withoutAudio(item.content), item.id);
    const read = spokenAsText(item.content);
    const message = toChatMessage(item.role, read);
    if (inserting) return this.#insert(after, stored, message, eventId);
    const group = item.role === 'user' ? this.#history.startGroup() : this.#history.current();
    // A user message added while a response runs comes after the response's
    // items (not in history until it ends): it follows the newest of them.
    const previous = item.role === 'user' ? newest : this.#history.lastItemId();
    this.#history.addMessageItem(group, stored, message);
    if (item.role === 'user') this.#joined(stored.id);
    this.#o.log().debug(
      {
        item: stored.id,
        role: item.role,
        text: this.#o.content(textOf(read)),
      },
      'item added',
    );
    this.#added(previous, stored);
    return undefined;
  }

  /**
   * A message put before the conversation's end: first (`root`) or right
   * after an item of history. Not into the running response, whose items
   * join history when it ends.
   */
  #insert(
    after: string,
    stored: MessageItem,
    message: ChatMessage,
    eventId: string | null,
  ): ProtocolError | undefined {
    const root = after === 'root';
    const why =
      !root && !this.#history.find(after) && this.#o.responseHas(after)
        ? `"${after}" is in the running response; put the item after it once response.done has come, or leave previous_item_id out to add it at the end`
        : this.#history.insertMessageItem(root ? null : after, stored, message);
    if (why !== undefined) {
      return new ProtocolError(
        'invalid_value',
        `conversation.item.create: previous_item_id: ${why}.`,
        {
          param: 'previous_item_id',
          eventId,
        },
      );
    }
    const previous = root ? null : after;
    this.#o.log().debug({ item: stored.id, after: previous }, 'item inserted');
    this.#added(previous, stored);
    return undefined;
  }

  /**
   * A call the client records as made (GA `function_call` item; the session
   * checked its name): the model reads it as its own call. It awaits its
   * output like a call the model made — a `function_call_output` with its
   * `call_id` — and gets a stand-in output at the next response if none came,
   * so the history sent to the model stays valid.
   */
  #createCall(
    given: ClientFunctionCallItem,
    previous: string | null,
    eventId: string | null,
  ): ProtocolError | undefined {
    const callId = given.call_id ?? newId('call');
    if (this.callIdTaken(callId)) {
      const place = { event: 'conversation.item.create', at: 'item', eventId } as const;
      return duplicateCallId(callId, 'the conversation', place);
    }
    const item: FunctionCallItem = {
      id: given.id ?? newId('item'),
      object: 'realtime.item',
      type: 'function_call',
      status: 'completed',
      call_id: callId,
      name: given.name,
      arguments: given.arguments,
    };
    const message = callMessage(
      [{ id: callId, name: item.name, arguments: item.arguments }],
      this.#turn,
    );
    // Not deletable on its own: a call stays paired with its output.
    this.#history.addItems(this.#history.current(), [item], [message]);
    this.#pending.set(callId, { name: item.name, owner: message });
    this.#o.log().debug({ item: item.id, tool: item.name }, 'call item added');
    this.#added(previous, item);
    return undefined;
  }

  /** Why the conversation takes no more client items, if it does not. */
  #full(item: ClientItem | ClientFunctionCallItem): string | undefined {
    const advice = 'Delete items with conversation.item.delete, or start a new session.';
    if (this.#history.size >= MAX_CONVERSATION_ITEMS) {
      return `conversation.item.create: the conversation holds ${MAX_CONVERSATION_ITEMS} items, the most a session keeps. ${advice}`;
    }
    const size = JSON.stringify(item).length;
    if (this.#history.bytes + size > MAX_CONVERSATION_BYTES) {
      return `conversation.item.create: the conversation would hold over ${MAX_CONVERSATION_BYTES / 1024 / 1024} MiB, the most a session keeps. ${advice}`;
    }
    return undefined;
  }

  /** `conversation.item.retrieve`. */
  retrieve(itemId: string, eventId: string | null): ProtocolError | undefined {
    const item = this.#history.find(itemId);
    if (!item) return itemNotFound('conversation.item.retrieve', itemId, eventId);
    this.#o.send({ type: 'conversation.item.retrieved', item });
    // Clients (the Agents SDK) retrieve an mcp_call when it starts and mark what they
    // retrieve in progress; a call that finished first is said to be done again.
    if (finishedMcpCall(item)) this.doneAgain(item);
    return undefined;
  }

  /** Tells the client again that an item of history is done, as it is now (it changed). */
  doneAgain(item: Item): void {
    const items = this.#history.items;
    const index = items.indexOf(item);
    const previous = index > 0 ? items[index - 1]!.id : null;
    this.#o.send({ type: 'conversation.item.done', previous_item_id: previous, item });
  }

  /**
   * `conversation.item.delete`: messages, a response's assistant messages
   * too (the model's message loses their words, and keeps its tool calls),
   * but not tool calls or their results, and nothing while a response runs.
   * `live` says the item is one of the running response's.
   */
  delete(
    itemId: string,
    responding: boolean,
    eventId: string | null,
    live = false,
  ): ProtocolError | undefined {
    const item = this.#history.find(itemId);
    if (!live && !item) return itemNotFound('conversation.item.delete', itemId, eventId);
    const refuse = (why: string) =>
      new ProtocolError(
        'item_not_deletable',
        `conversation.item.delete: item "${itemId}" ${why}.`,
        { param: 'item_id', eventId },
      );
    if (responding) {
      return refuse(
        `${live ? 'is part of the running response' : 'cannot go while a response runs'}; delete it once response.done has come`,
      );
    }
    if (!this.#history.delete(itemId) && !this.#history.deleteReply(itemId)) {
      return refuse(
        item?.type === 'message'
          ? 'is part of a response whose message is not its words alone (prompt-based tools write their calls into it, a reply cut off by a server restart keeps its items, and a conversation last saved by an older release does not say which message holds a reply), so deleting it would lose calls'
          : `is a ${item?.type ?? 'response'} item; a tool call and its result stay paired, so neither can be deleted`,
      );
    }
    // A later cut of its round's other items no longer counts its words.
    const round = this.#spoken.get(itemId)?.round;
    if (round) round.items = round.items.filter((e) => e.item.id !== itemId);
    this.#spoken.delete(itemId);
    this.#o.send({ type: 'conversation.item.deleted', item_id: itemId });
    return undefined;
  }

  /** Whether client calls await their output. */
  hasPendingCalls(): boolean {
    return this.#pending.size > 0;
  }

  /** Client calls never answered get a stand-in before the next response, so history stays valid. */
  settlePendingCalls(): void {
    for (const [callId, pending] of this.#pending) {
      this.#o.log().warn({ callId, tool: pending.name }, 'client call without output');
      this.#addCallOutput(callId, pending, 'Error: the client sent no output for this call.');
    }
    this.#pending.clear();
  }

  /**
   * A background call's outcome joins the conversation: a finished `mcp_call`
   * item for clients, a marked user-role message for the model (see
   * `backgroundResultMessage`), as a new exchange. Returns the item.
   */
  addBackgroundResult(
    result: Pick<ToolResult, 'callId' | 'name' | 'outcome' | 'output'>,
    args: string,
    serverLabel: string,
    handedOverBy?: string,
  ): McpCallItem {
    const ok = result.outcome === 'ok';
    const item: McpCallItem = {
      id: newId('item'),
      object: 'realtime.item',
      type: 'mcp_call',
      server_label: serverLabel,
      name: result.name,
      arguments: args,
      output: ok ? result.output : null,
      error: ok ? null : { type: 'tool_execution_error', message: result.output },
      approval_request_id: null,
    };
    const previous = this.newestItemId();
    const message: ChatMessage = {
      role: 'user',
      content: backgroundResultMessage(result, handedOverBy),
    };
    this.#history.addItems(this.#history.startGroup(), [item], [message]);
    this.#added(previous, item);
    return item;
  }

  /**
   * `messages` (from {@link trim}) with a stand-in output after each call
   * still awaiting the client's, in a copy: what an out-of-band response
   * reads while the conversation keeps waiting for the real outputs.
   */
  withStandIns(messages: ChatMessage[]): ChatMessage[] {
    if (this.#pending.size === 0) return messages;
    const out = [...messages];
    for (const [callId, { name, owner }] of this.#pending) {
      let at = out.findIndex(
        (m) => m.role === 'assistant' && m.tool_calls?.some((c) => c.id === callId),
      );
      if (at === -1 && owner) at = out.indexOf(owner);
      if (at === -1) continue;
      let end = at + 1;
      while (end < out.length && (out[end]!.role === 'tool' || out[end]!.role === 'function'))
        end++;
      const call = { id: callId, name, arguments: '{}' };
      out.splice(end, 0, ...outputMessages(call, MISSING_OUTPUT, this.#turn));
    }
    return out;
  }

  /** The character's tool format, which tool results are written in. */
  setTurnSettings(turn: CharacterTurnSettings): void {
    this.#turn = turn;
  }

  /** Records a client-side call's output (or a stand-in) right after its call. */
  #addCallOutput(
    callId: string,
    { name, owner }: PendingCall,
    output: string,
    itemId?: string,
  ): void {
    const turn = this.#turn;
    const item: FunctionCallOutputItem = {
      id: itemId ?? newId('item'),
      object: 'realtime.item',
      type: 'function_call_output',
      call_id: callId,
      output,
    };
    const mode = turn.toolMode ?? 'native';
    const legacy = turn.toolFormat === 'functions';
    const messages = toolResultMessages([{ callId, name, outcome: 'ok', output }], mode, legacy);
    const previous = this.#history.insertToolResults(callId, item, messages, owner);
    this.#added(previous, item);
  }

  /** The group a response adds to: the newest exchange. */
  responseGroup(): HistoryGroup {
    return this.#history.current();
  }

  /** The messages to send within the budget (oldest exchanges dropped for good). */
  trim(budgetTokens: number, reservedTokens: number, through?: HistoryGroup): TrimResult {
    return this.#history.trim(budgetTokens, reservedTokens, through);
  }

  /**
   * A response's messages and items join history; its client calls await
   * output. `replies`: the message that holds each message item's words.
   */
  addResponse(
    group: HistoryGroup,
    messages: readonly ChatMessage[],
    items: readonly Item[],
    clientCalls: ReadonlyArray<{ id: string; name: string }>,
    owner: ChatMessage | undefined,
    replies?: ReadonlyMap<string, ChatMessage | null>,
  ): void {
    this.#history.addItems(group, items, messages, replies);
    for (const call of clientCalls) this.#pending.set(call.id, { name: call.name, owner });
  }

  /**
   * Records which message holds each spoken item, and when its words start
   * in its audio: truncation reaches back {@link MAX_SPOKEN_ITEMS} items.
   */
  recordSpoken(itemId: string, round: SpokenRound, timing?: SpokenTiming): void {
    this.#spoken.delete(itemId);
    this.#spoken.set(itemId, { round, timing });
    for (const id of this.#spoken.keys()) {
      if (this.#spoken.size <= MAX_SPOKEN_ITEMS) break;
      this.#spoken.delete(id);
    }
  }

  /** The word timing of a spoken item still in the conversation, if it is kept. */
  spokenTiming(itemId: string): SpokenTiming | undefined {
    return this.#history.find(itemId) ? this.#spoken.get(itemId)?.timing : undefined;
  }

  /**
   * A spoken item cut to what was heard by `audioEndMs`
   * (`conversation.item.truncate` after its response): the client keeps no
   * more audio of it than that.
   */
  cutToHeard(itemId: string, heard: string, audioEndMs: number): void {
    const record = this.#spoken.get(itemId);
    if (!record) return;
    const { round, timing } = record;
    if (timing) timing.ms = Math.min(timing.ms, audioEndMs);
    for (const entry of round.items) {
      if (entry.item.id !== itemId) continue;
      entry.transcript = heard;
      entry.item.content = [{ type: 'output_audio', transcript: heard }];
      entry.item.status = 'incomplete';
    }
    round.message.content = heardText(round.items.map((i) => i.transcript));
    this.#history.touch(itemId);
  }

  /** A transcribed utterance: it starts a new exchange. */
  addUtterance(item: MessageItem, transcript: string): void {
    this.#history.addMessageItem(this.#history.startGroup(), item, {
      role: 'user',
      content: transcript,
    });
    this.#joined(item.id);
  }

  /** The chat history as the model will see it, in Unmute's plain shape. */
  plainHistory(system: string): Array<{ role: string; content: string }> {
    const messages = this.#history.trim(Number.MAX_SAFE_INTEGER, 0).messages;
    return [{ role: 'system', content: system }, ...messages.map(plainMessage)];
  }
}
