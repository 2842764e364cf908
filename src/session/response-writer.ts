/**
 * The response writer: turns a response's turn events into Realtime output
 * events and items, and speaks tool filler lines while tools run.
 */
import type { ChatMessage } from '../llm/chunk.js';
import type { TurnEvent } from '../llm/turn-runner.js';
import type { TurnProgress } from '../llm/turn-state.js';
import { TOOL_INTERRUPTED_OUTPUT } from '../tools/constants.js';
import type { Toolset } from '../tools/library.js';
import type { ToolCall, ToolResult } from '../tools/types.js';
import { cleanForSpeech } from '../voice/chunker.js';
import type {
  ContentPart,
  FunctionCallItem,
  FunctionCallOutputItem,
  Item,
  McpCallError,
  McpCallItem,
  MessageItem,
  ResponseObject,
  ServerEvent,
} from './events.js';
import type { HistoryGroup } from './history.js';
import { messageItem, newId, round } from './items.js';
import type { SpeechOutput, SpokenItem } from './speech-output.js';
import { byRound, heardSoFar, type SpokenStretch } from './voice-output.js';

/** Where an item stands in a response, as output events give it. */
interface ItemPlace {
  response_id: string;
  item_id: string;
  output_index: number;
}

/**
 * Which calls the server runs itself (the character's tools): they go out as
 * GA's `mcp_call` items, which clients know not to answer, with
 * `server_label` the character's id (an MCP tool's: its server's label).
 */
export interface ServerTools {
  serverLabel: string;
  runs(name: string): boolean;
  /** The label of a tool from an MCP server (its `label`); others get `serverLabel`. */
  labelOf?(name: string): string | undefined;
  /** A background call's "started" result has just gone to the client. */
  announced?(callId: string): void;
}

/** A spoken item of a response: its round (-1 for a filler), the model's text and what was heard. */
export interface SpokenEntry {
  item: MessageItem;
  round: number;
  raw: string;
  spoken: SpokenItem;
}

/** A reply under way as history would keep it if it were cut now. */
export interface ReplyCheckpoint {
  messages: ChatMessage[];
  items: Item[];
}

/**
 * A running call's error in a checkpoint: what a resumed conversation keeps
 * of a call its process was stopped in (the model reads the same).
 */
export const INTERRUPTED_CALL: McpCallError = {
  type: 'tool_execution_error',
  message: TOOL_INTERRUPTED_OUTPUT,
};

/** A reply's checkpoint, with the exchange of history it joins. */
export interface ExchangeCheckpoint extends ReplyCheckpoint {
  group: HistoryGroup;
}

/**
 * Turns a response's turn events into Realtime output events and items: a
 * message item per stretch of text, a function_call item per tool call, a
 * function_call_output item per server-side result.
 */
export class ResponseWriter {
  readonly items: Item[] = [];
  /**
   * The open stretch of text, with its place in the output worked out once:
   * nothing is added before it or taken out while it is open (a tool call
   * closes it first), and every text delta needs it.
   */
  #text: (SpokenStretch & { at: ItemPlace }) | undefined;
  /** Every stretch of text so far, the open one too (a spoken reply's checkpoint cuts them). */
  readonly #stretches: SpokenStretch[] = [];
  #calls = new Map<string, FunctionCallItem | McpCallItem>();
  /** Server-run calls whose arguments are complete and whose result has not come yet. */
  #running = new Set<McpCallItem>();
  readonly #serverTools: ServerTools | undefined;
  #outputIndex = 0;
  readonly #responseId: string;
  readonly #send: (event: ServerEvent) => void;
  /** The conversation's last item when the response began: its first item follows it. */
  readonly #before: string | null;
  /** Spoken replies: text becomes speech, and items end when their audio has played. */
  readonly #speech: SpeechOutput | undefined;
  readonly #spoken: Array<Promise<SpokenEntry>> = [];
  /** The tool filler lines spoken: items the model never wrote. */
  readonly #fillers: string[] = [];

  constructor(
    responseId: string,
    send: (event: ServerEvent) => void,
    before: string | null,
    speech?: SpeechOutput,
    serverTools?: ServerTools,
  ) {
    this.#serverTools = serverTools;
    this.#responseId = responseId;
    this.#send = send;
    this.#before = before;
    this.#speech = speech;
  }

  /** One of the response's items by id, with the item before it. */
  find(id: string): { item: Item; previous_item_id: string | null } | undefined {
    const index = this.items.findIndex((i) => i.id === id);
    if (index === -1) return undefined;
    const previous = index > 0 ? this.items[index - 1]!.id : this.#before;
    return { item: this.items[index]!, previous_item_id: previous };
  }

  /** The spoken items, once each has played or been cut off. */
  spoken(): Promise<SpokenEntry[]> {
    return Promise.all(this.#spoken);
  }

  /** Speaks a tool's filler line as an item of its own (the model never sees it). */
  filler(text: string): void {
    const speech = this.#speech;
    if (!speech || this.#text) return;
    const item = messageItem('assistant', [], undefined, 'in_progress');
    this.#added(item);
    this.#fillers.push(item.id);
    const at = this.#at(item);
    this.#send({
      type: 'response.content_part.added',
      ...at,
      content_index: 0,
      part: { type: 'output_audio', transcript: '' },
    });
    this.#spoken.push(
      speech
        .say(at, cleanForSpeech(text))
        .then((spoken) => this.#spokenDone(item, at, spoken, 'completed', -1, '')),
    );
  }

  /**
   * Which of the turn's messages holds the words of each of its message
   * items, matched round by round as the model wrote them (null: a filler
   * line, which the model never wrote). An item whose round's message is
   * not its words alone (prompt-based tools write their calls into it) is
   * left out. Read before history cuts the messages to what was heard.
   */
  replies(messages: readonly ChatMessage[]): Map<string, ChatMessage | null> {
    const replies = new Map<string, ChatMessage | null>();
    for (const id of this.#fillers) replies.set(id, null);
    let from = 0;
    for (const list of byRound(this.#stretches)) {
      const raw = list.map((s) => s.text).join('');
      const at = messages.findIndex(
        (m, i) => i >= from && m.role === 'assistant' && m.content === raw,
      );
      if (at === -1) continue;
      for (const s of list) replies.set(s.item.id, messages[at]!);
      from = at + 1;
    }
    return replies;
  }

  /**
   * The reply as history would keep it if it were cut now (a resume store's
   * checkpoint of a reply under way): the turn's messages so far and copies
   * of the items, text open or still playing cut to what the client has
   * (`incomplete`), spoken text to what has played, and a call of the
   * server's still running failed with {@link INTERRUPTED_CALL}. Undefined
   * while a call streams or awaits the client, and when nothing was said yet.
   */
  checkpoint(turn: TurnProgress): ReplyCheckpoint | undefined {
    const said = turn.soFar();
    if (said === undefined) return undefined;
    // A call still streaming or awaiting the client has no result yet.
    for (const item of this.#calls.values()) {
      if (item.type === 'function_call') return undefined;
      if (item.output === null && item.error === null && !this.#running.has(item)) return undefined;
    }
    const speech = this.#speech;
    // Copies: the items change on (a spoken one ends when it has played).
    const items = this.items.map((item): Item => {
      // A call running now reads as interrupted, as the turn's messages say.
      if (item.type === 'mcp_call' && this.#running.has(item)) {
        return { ...item, error: INTERRUPTED_CALL };
      }
      if (item.type !== 'message' || item.status !== 'in_progress') return { ...item };
      if (!speech) {
        const text = this.#text?.item === item ? this.#text.text : '';
        return { ...item, status: 'incomplete', content: [{ type: 'output_text', text }] };
      }
      const transcript = speech.heardUntil(item.id, speech.playedMs(item.id)) ?? '';
      return { ...item, status: 'incomplete', content: [{ type: 'output_audio', transcript }] };
    });
    const messages = speech ? heardSoFar(said, this.#stretches, items) : said;
    return messages !== undefined && messages.length > 0 ? { messages, items } : undefined;
  }

  apply(e: TurnEvent): void {
    switch (e.type) {
      case 'text.delta':
        return this.#delta(e.delta, e.round);
      case 'tool_call.start':
        this.closeText();
        this.#startCall(e.callId, e.name);
        return;
      case 'tool_call.arguments.delta': {
        const item = this.#calls.get(e.callId);
        if (!item) return;
        item.arguments += e.delta;
        if (item.type === 'mcp_call') {
          this.#send({
            type: 'response.mcp_call_arguments.delta',
            ...this.#at(item),
            delta: e.delta,
          });
          return;
        }
        this.#send({
          type: 'response.function_call_arguments.delta',
          ...this.#at(item),
          call_id: e.callId,
          delta: e.delta,
        });
        return;
      }
      case 'tool_call.done':
        return this.#doneCall(e.call);
      case 'tool_calls.discarded':
        for (const call of e.calls) this.#discard(call);
        return;
      case 'tool.result':
        return this.#result(e.result);
      case 'round.end':
        this.closeText();
        return;
      case 'llm.slow':
        this.#send({
          type: 'troupe.response.llm_slow',
          response_id: this.#responseId,
          round: e.round,
          silent_ms: Math.round(e.silentMs),
        });
        return;
      default:
        return;
    }
  }

  #at(item: Item): ItemPlace {
    return {
      response_id: this.#responseId,
      item_id: item.id,
      output_index: this.items.indexOf(item),
    };
  }

  #added(item: Item): void {
    const previous = this.items.at(-1)?.id ?? this.#before;
    this.items.push(item);
    this.#outputIndex = this.items.length - 1;
    this.#send({
      type: 'response.output_item.added',
      response_id: this.#responseId,
      output_index: this.#outputIndex,
      item: { ...item },
    });
    this.#send({ type: 'conversation.item.added', previous_item_id: previous, item: { ...item } });
  }

  #done(item: Item): void {
    const index = this.items.indexOf(item);
    this.#send({
      type: 'response.output_item.done',
      response_id: this.#responseId,
      output_index: index,
      item,
    });
    const previous = index > 0 ? this.items[index - 1]!.id : this.#before;
    this.#send({ type: 'conversation.item.done', previous_item_id: previous, item });
  }

  #delta(delta: string, round: number): void {
    const speech = this.#speech;
    if (!this.#text) {
      const item = messageItem('assistant', [], undefined, 'in_progress');
      this.#added(item);
      this.#text = { item, text: '', at: this.#at(item), round };
      this.#stretches.push(this.#text);
      this.#send({
        type: 'response.content_part.added',
        ...this.#text.at,
        content_index: 0,
        part: speech ? { type: 'output_audio', transcript: '' } : { type: 'output_text', text: '' },
      });
      speech?.begin(this.#text.at);
    }
    this.#text.text += delta;
    if (speech) {
      speech.text(delta);
      this.#send({ type: 'unmute.response.text.delta.ready', delta });
      return;
    }
    const at = this.#text.at;
    // Members spelled out (not spread from `at`): one of these per LLM chunk.
    this.#send({
      type: 'response.output_text.delta',
      response_id: at.response_id,
      item_id: at.item_id,
      output_index: at.output_index,
      content_index: 0,
      delta,
    });
  }

  /** Ends the open stretch of text, if any. */
  closeText(status: MessageItem['status'] = 'completed'): void {
    const open = this.#text;
    if (!open) return;
    this.#text = undefined;
    const { item, text, at } = open;
    if (this.#speech) {
      // The item ends when its speech has played; the turn goes on meanwhile.
      this.#spoken.push(
        this.#speech
          .end()
          .then((spoken) => this.#spokenDone(item, at, spoken, status, open.round, text)),
      );
      return;
    }
    this.#send({ type: 'response.output_text.done', ...at, content_index: 0, text });
    const part: ContentPart = { type: 'output_text', text };
    this.#send({ type: 'response.content_part.done', ...at, content_index: 0, part });
    item.content = [part];
    item.status = status;
    this.#done(item);
  }

  #spokenDone(
    item: MessageItem,
    at: ItemPlace,
    spoken: SpokenItem,
    status: MessageItem['status'],
    round: number,
    raw: string,
  ): SpokenEntry {
    const part: ContentPart = { type: 'output_audio', transcript: spoken.transcript };
    this.#send({ type: 'response.content_part.done', ...at, content_index: 0, part });
    item.content = [part];
    item.status = spoken.interrupted ? 'incomplete' : status;
    this.#done(item);
    return { item, round, raw, spoken };
  }

  /**
   * Ends the response's output: open text is closed (`incomplete` when the
   * response was cut short), and calls whose stream broke before they were
   * complete are taken out, as the model never made them whole and none ran.
   */
  finish(status: ResponseObject['status']): void {
    this.closeText(status === 'completed' ? 'completed' : 'incomplete');
    for (const item of this.#calls.values()) {
      if (item.type === 'mcp_call') {
        // Its arguments came whole but no result: it was stopped while it ran.
        if (this.#running.has(item)) {
          this.#mcpEnd(item, null, 'The tool call was stopped before it finished.');
        } else if (item.output === null && item.error === null) this.#drop(item);
      } else if (item.status === 'in_progress') this.#drop(item);
    }
  }

  #startCall(callId: string, name: string): FunctionCallItem | McpCallItem {
    const server = this.#serverTools;
    const item: FunctionCallItem | McpCallItem = server?.runs(name)
      ? {
          id: newId('item'),
          object: 'realtime.item',
          type: 'mcp_call',
          server_label: server.labelOf?.(name) ?? server.serverLabel,
          name,
          arguments: '',
          output: null,
          error: null,
          approval_request_id: null,
        }
      : {
          id: newId('item'),
          object: 'realtime.item',
          type: 'function_call',
          status: 'in_progress',
          call_id: callId,
          name,
          arguments: '',
        };
    this.#calls.set(callId, item);
    this.#added(item);
    return item;
  }

  #doneCall(call: ToolCall): void {
    this.closeText();
    const item = this.#calls.get(call.id) ?? this.#startCall(call.id, call.name);
    item.name = call.name;
    item.arguments = call.arguments;
    if (item.type === 'mcp_call') {
      // The server runs it now: the item is done with its result.
      const at = this.#at(item);
      this.#send({ type: 'response.mcp_call_arguments.done', ...at, arguments: call.arguments });
      this.#send({
        type: 'response.mcp_call.in_progress',
        item_id: item.id,
        output_index: at.output_index,
      });
      this.#running.add(item);
      return;
    }
    item.status = 'completed';
    this.#send({
      type: 'response.function_call_arguments.done',
      ...this.#at(item),
      call_id: call.id,
      name: call.name,
      arguments: call.arguments,
    });
    this.#done(item);
  }

  #discard(call: ToolCall): void {
    const item = this.#calls.get(call.id) ?? this.#startCall(call.id, call.name);
    item.arguments = call.arguments;
    this.#drop(item);
  }

  /** Ends a call as incomplete and takes it out of the conversation. */
  #drop(item: FunctionCallItem | McpCallItem): void {
    if (item.type === 'mcp_call') {
      item.error = { type: 'tool_execution_error', message: 'The call was never run.' };
      this.#running.delete(item);
    } else item.status = 'incomplete';
    this.#done(item);
    // Not in history (the model is not told it ran): take it out of the client's view too.
    this.items.splice(this.items.indexOf(item), 1);
    this.#send({ type: 'conversation.item.deleted', item_id: item.id });
  }

  /** A server-run call's end: its output or its error, then the item is done. */
  #mcpEnd(item: McpCallItem, output: string | null, error: string | null): void {
    this.#running.delete(item);
    item.output = output;
    item.error = error === null ? null : { type: 'tool_execution_error', message: error };
    this.#send({
      type: error === null ? 'response.mcp_call.completed' : 'response.mcp_call.failed',
      item_id: item.id,
      output_index: this.items.indexOf(item),
    });
  }

  #result(result: ToolResult): void {
    const call = this.#calls.get(result.callId);
    if (call?.type === 'mcp_call') {
      // GA's words for a tool the server ran: the result is the item's own, no output item.
      const ok = result.outcome === 'ok';
      this.#mcpEnd(call, ok ? result.output : null, ok ? null : result.output);
      this.#send({
        type: 'troupe.tool_call.result',
        response_id: this.#responseId,
        item_id: call.id,
        output_index: this.items.indexOf(call),
        call_id: result.callId,
        name: result.name,
        outcome: result.outcome,
        output: result.output,
        duration_ms: round(result.durationMs),
        ...(result.background === 'started' ? { background: 'started' as const } : {}),
      });
      // Only now may the call's progress go out: it must not reach the client before this.
      if (result.background === 'started') this.#serverTools?.announced?.(result.callId);
      this.#done(call);
      return;
    }
    const item: FunctionCallOutputItem = {
      id: newId('item'),
      object: 'realtime.item',
      type: 'function_call_output',
      call_id: result.callId,
      output: result.output,
    };
    this.#send({
      type: 'troupe.tool_call.result',
      response_id: this.#responseId,
      item_id: call?.id ?? item.id,
      output_index: call ? this.items.indexOf(call) : this.items.length,
      call_id: result.callId,
      name: result.name,
      outcome: result.outcome,
      output: result.output,
      duration_ms: round(result.durationMs),
    });
    this.#added(item);
    this.#done(item);
  }
}

/**
 * Tool filler lines ("Let me check that…"): spoken when a tool with a
 * filler has not finished after its `afterMs`, dropped when its result
 * comes first. At most one per round.
 */
export class FillerTimers {
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #toolset: Toolset;
  readonly #say: (text: string) => void;
  #saidInRound = -1;

  constructor(toolset: Toolset, say: (text: string) => void) {
    this.#toolset = toolset;
    this.#say = say;
  }

  apply(e: TurnEvent, signal: AbortSignal): void {
    if (e.type === 'tool_call.done') {
      const filler = this.#toolset.tools.get(e.call.name)?.filler;
      if (!filler) return;
      const round = e.round;
      this.#timers.set(
        e.call.id,
        setTimeout(() => {
          this.#timers.delete(e.call.id);
          if (signal.aborted || this.#saidInRound === round) return;
          this.#saidInRound = round;
          this.#say(filler.text);
        }, filler.afterMs),
      );
    } else if (e.type === 'tool.result') {
      clearTimeout(this.#timers.get(e.result.callId));
      this.#timers.delete(e.result.callId);
    }
  }

  clear(): void {
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }
}
