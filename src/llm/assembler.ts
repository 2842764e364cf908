import type { ChunkLike, ToolCallDeltaLike, UsageLike } from './chunk.js';

/** What one chunk produces, in stream order. */
export type AssemblerEvent =
  | { type: 'text'; delta: string }
  | { type: 'reasoning'; delta: string }
  /** A call's name is known (its id is fixed from here on). */
  | { type: 'tool_call.start'; slot: number; id: string; name: string }
  /** More argument text of a started call. */
  | { type: 'tool_call.arguments'; slot: number; id: string; delta: string };

/** A tool call put together from its deltas. */
export interface AssembledCall {
  /** Position in the order calls appeared in the stream (0, 1, …). */
  slot: number;
  /** The model's id, or a generated `call_…` when the server sent none. */
  id: string;
  /** The name; empty when the server never sent one. */
  name: string;
  /** The argument text exactly as streamed (may be invalid JSON). */
  arguments: string;
  /** Came from the legacy `function_call` delta. */
  legacy: boolean;
}

/** The whole of one streamed completion. */
export interface AssembledCompletion {
  text: string;
  reasoning: string;
  toolCalls: AssembledCall[];
  /** The last finish_reason seen, or null when the stream carried none. */
  finishReason: string | null;
  /** The last usage seen (servers that send usage on every chunk send running totals). */
  usage: UsageLike | null;
  chunks: number;
}

interface CallState {
  slot: number;
  index: number | undefined;
  /** Ids the server used for this call (it may send several forms). */
  modelId: string;
  publicId: string | undefined;
  name: string;
  args: string;
  legacy: boolean;
  started: boolean;
}

/** Options of {@link StreamAssembler}. */
export interface StreamAssemblerOptions {
  /**
   * Ids already used in the conversation (earlier turns, earlier rounds): a
   * call whose model id is taken gets a fresh one, so outputs never land on
   * an older call (llama.cpp sends one constant id; Kimi reuses `name:idx`).
   */
  idTaken?: (id: string) => boolean;
}

let idCounter = 0;
/** A fresh call id for servers that send none (vLLM #18412). */
export function generateCallId(): string {
  idCounter = (idCounter + 1) % 0x100000;
  return `call_${Date.now().toString(36)}${idCounter.toString(36)}${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * Turns streamed chat-completion chunks into text deltas (out at once),
 * reasoning deltas (kept apart) and complete tool calls at stream end.
 *
 * Matching a tool-call delta to a call: by non-empty id, then by index (unless
 * the index holds a call with a different id — servers that send index 0 for
 * every parallel call), then the latest call. id, name and type are overwritten
 * only by non-empty values; arguments are only appended. Calls are final only
 * when the stream ends. See docs/llm-streams.md for each quirk handled.
 *
 * @example
 * const asm = new StreamAssembler();
 * for await (const chunk of stream) for (const e of asm.push(chunk)) handle(e);
 * const { text, toolCalls } = asm.finish();
 */
export class StreamAssembler {
  #calls: CallState[] = [];
  readonly #idTaken: ((id: string) => boolean) | undefined;
  /** Public ids handed out by this stream. */
  readonly #pinned = new Set<string>();

  constructor(options: StreamAssemblerOptions = {}) {
    this.#idTaken = options.idTaken;
  }

  #text = '';
  #reasoning = '';
  #finishReason: string | null = null;
  #usage: UsageLike | null = null;
  #chunks = 0;
  /**
   * A bare `{name}` delta without id or index that repeated the latest call's
   * name after its arguments were complete: a repeated name (quirk 7) or the
   * header of a same-name parallel call. Kept for the next delta to decide.
   */
  #pendingName: string | undefined;

  /** Applies one chunk and returns what it produced, in order. */
  push(chunk: ChunkLike): AssemblerEvent[] {
    this.#chunks++;
    const events: AssemblerEvent[] = [];
    const usage = chunk.usage ?? (chunk as { x_groq?: { usage?: UsageLike } }).x_groq?.usage;
    if (usage) this.#usage = usage;
    const choice = chunk.choices?.[0];
    if (!choice) return events;
    const delta = choice.delta;
    if (delta) {
      const reasoning = delta.reasoning_content ?? delta.reasoning;
      if (typeof reasoning === 'string' && reasoning !== '') {
        this.#reasoning += reasoning;
        events.push({ type: 'reasoning', delta: reasoning });
      }
      if (typeof delta.content === 'string' && delta.content !== '') {
        this.#text += delta.content;
        events.push({ type: 'text', delta: delta.content });
      }
      if (Array.isArray(delta.tool_calls)) {
        for (const tc of delta.tool_calls) if (tc) this.#applyToolDelta(tc, false, events);
      }
      if (delta.function_call) {
        this.#applyToolDelta({ index: 0, function: delta.function_call }, true, events);
      }
    }
    // Deltas first, then the finish: the last chunk may carry both (quirk 12).
    if (choice.finish_reason) this.#finishReason = choice.finish_reason;
    return events;
  }

  /** Ends the stream: calls are final from here on. */
  finish(): AssembledCompletion {
    const toolCalls = this.#calls.map((c) => ({
      slot: c.slot,
      id: this.#pinId(c),
      name: c.name,
      arguments: c.args,
      legacy: c.legacy,
    }));
    return {
      text: this.#text,
      reasoning: this.#reasoning,
      toolCalls,
      finishReason: this.#finishReason,
      usage: this.#usage,
      chunks: this.#chunks,
    };
  }

  /** Text so far (used when a stream is cut off). */
  get text(): string {
    return this.#text;
  }

  #applyToolDelta(tc: ToolCallDeltaLike, legacy: boolean, events: AssemblerEvent[]): void {
    const id = typeof tc.id === 'string' && tc.id !== '' ? tc.id : undefined;
    const index = typeof tc.index === 'number' ? tc.index : undefined;
    const name = typeof tc.function?.name === 'string' ? tc.function.name : '';
    const args = argumentText(tc.function?.arguments);

    const pendingName = this.#pendingName;
    this.#pendingName = undefined;
    let call = this.#match(id, index, name, args, pendingName);
    if (!call) {
      call = {
        slot: this.#calls.length,
        index,
        modelId: '',
        publicId: undefined,
        // A nameless call opened by a fresh `{` right after a bare same-name
        // header: that header was this call's, not a repeat of the last name.
        name: pendingName !== undefined && id === undefined ? pendingName : '',
        args: '',
        legacy,
        started: false,
      };
      this.#calls.push(call);
    } else if (
      id === undefined &&
      (index === undefined || call.index === index) &&
      name !== '' &&
      args === '' &&
      call.name === name &&
      call.args !== '' &&
      isCompleteJson(call.args)
    ) {
      this.#pendingName = name;
    }
    if (id !== undefined && call.modelId === '') call.modelId = id;
    if (index !== undefined && call.index === undefined) call.index = index;
    // Names are overwritten, never appended (vLLM repeats the name on every chunk).
    if (name !== '') call.name = name;
    if (args !== '') call.args += args;

    if (!call.started && call.name !== '') {
      call.started = true;
      const publicId = this.#pinId(call);
      events.push({ type: 'tool_call.start', slot: call.slot, id: publicId, name: call.name });
      // Arguments that arrived before the name (vercel/ai #14722) go out now.
      if (call.args !== '') {
        events.push({
          type: 'tool_call.arguments',
          slot: call.slot,
          id: publicId,
          delta: call.args,
        });
      }
    } else if (call.started && args !== '') {
      events.push({
        type: 'tool_call.arguments',
        slot: call.slot,
        id: call.publicId!,
        delta: args,
      });
    }
  }

  #match(
    id: string | undefined,
    index: number | undefined,
    name: string,
    args: string,
    pendingName: string | undefined,
  ): CallState | undefined {
    const calls = this.#calls;
    if (id !== undefined) {
      // Id and index together name a call: one id at two indexes is two calls
      // (MiMo and Kimi behind proxies; llama.cpp's constant id).
      for (let i = calls.length - 1; i >= 0; i--) {
        const c = calls[i]!;
        if (c.modelId !== id) continue;
        if (index !== undefined && c.index !== undefined && c.index !== index) continue;
        return c;
      }
    }
    if (index !== undefined) {
      for (let i = calls.length - 1; i >= 0; i--) {
        const c = calls[i]!;
        if (c.index !== index) continue;
        // Same index, different id: a new parallel call (Ollama, SGLang send index 0 for all).
        if (id !== undefined && c.modelId !== '' && c.modelId !== id) return undefined;
        // No ids and index 0 for every call (Gemini proxies): a named delta
        // (or one after a bare name) opening a fresh JSON value where the
        // call's JSON is complete starts the next call.
        if (
          id === undefined &&
          (name !== '' || pendingName !== undefined) &&
          startsFreshValue(c, args)
        ) {
          return undefined;
        }
        if (id === undefined && name !== '' && c.name !== '' && name !== c.name) {
          if (c.args !== '' && isCompleteJson(c.args)) return undefined;
        }
        return c;
      }
      // An index never seen: a new call, unless it is an id-less continuation
      // of a call that had no index (index appearing late).
      const last = calls[calls.length - 1];
      if (
        last &&
        last.index === undefined &&
        id === undefined &&
        !looksLikeNewCall(last, name, args)
      ) {
        return last;
      }
      return undefined;
    }
    const last = calls[calls.length - 1];
    if (!last) return undefined;
    if (id !== undefined && last.modelId !== '' && last.modelId !== id) return undefined;
    if (id === undefined && looksLikeNewCall(last, name, args)) return undefined;
    return last;
  }

  #pinId(call: CallState): string {
    if (call.publicId === undefined) {
      let id = call.modelId;
      if (id === '' || this.#pinned.has(id) || this.#idTaken?.(id)) id = generateCallId();
      this.#pinned.add(id);
      call.publicId = id;
    }
    return call.publicId;
  }
}

/**
 * Without id or index, a delta starts a new call only when it cannot belong to
 * the latest one: another name, or a fresh `{` after complete arguments.
 */
function looksLikeNewCall(last: CallState, name: string, args: string): boolean {
  if (name !== '' && last.name !== '' && name !== last.name) return true;
  return startsFreshValue(last, args);
}

/** `args` opens a new JSON object while the call's arguments are already complete. */
function startsFreshValue(call: CallState, args: string): boolean {
  return args.trimStart().startsWith('{') && call.args !== '' && isCompleteJson(call.args);
}

/**
 * A delta's argument text: strings as they are; an object or array (servers
 * and proxies that send parsed arguments) as its JSON; anything else none.
 */
function argumentText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object') {
    try {
      return JSON.stringify(value);
    } catch {
      return '';
    }
  }
  return '';
}

function isCompleteJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
