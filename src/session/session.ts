/**
 * One conversation with one character: its history, its settings, and the
 * turn in flight. It takes validated client events and gives out server
 * events (Realtime GA vocabulary); the wire itself is the server's business.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { openConversation, type CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError, type TroupeError } from '../errors.js';
import type { ChatMessage, UserContentPart } from '../llm/chunk.js';
import type { LlmClient } from '../llm/client.js';
import {
  runTurn,
  toolResultMessages,
  type TurnEvent,
  type TurnOptions,
  type TurnSummary,
} from '../llm/turn-runner.js';
import type { SessionMetrics } from '../metrics/index.js';
import type { ToolCall, ToolDescription, ToolResult } from '../tools/types.js';
import type {
  ClientEvent,
  ClientItem,
  ClientTool,
  ContentPart,
  ErrorPayload,
  FunctionCallItem,
  FunctionCallOutputItem,
  Item,
  MessageItem,
  ResponseObject,
  ResponseOptions,
  ServerEvent,
  SessionObject,
  SessionUpdate,
  ToolChoice,
} from './events.js';
import { History, estimateTokens } from './history.js';

/** How sessions run turns (from config). */
export interface SessionSettings {
  /** Handler timeout of tools that set none. @defaultValue 100 */
  toolTimeoutMs: number;
  /** Tool rounds per turn unless the character sets its own. @defaultValue 10 */
  maxToolRounds: number;
  /** History budget in estimated tokens. @defaultValue 6000 */
  contextTokens: number;
}

/** Options of {@link createSession}. */
export interface SessionOptions {
  id: string;
  character: LoadedCharacter;
  /** The tool variant; unset = the character's first. */
  variant?: string;
  /** Looks up characters for `session.update {character}`. */
  characters: { get(id: string): LoadedCharacter | undefined; ids(): string[] };
  /** The LLM, resolved on first use (the server may start before the LLM is up). */
  llm: () => Promise<LlmClient>;
  settings: SessionSettings;
  /** Receives every event for the client, in order. */
  send: (event: ServerEvent) => void;
  /** A logger with the session's id; the session adds `character` (and `turn` per response). */
  log: Logger;
  /** Log user and model text; otherwise only its length. @defaultValue false */
  logContent?: boolean;
  metrics?: SessionMetrics;
  /** Passed to the prompt generator. */
  metadata?: Record<string, unknown>;
}

/** A turn in flight. */
interface ActiveResponse {
  id: string;
  controller: AbortController;
  done: Promise<void>;
  /** Its newest output item: history takes the response's items when it ends. */
  lastItemId?: () => string | null;
}

/** What a session exposes to the server. */
export interface Session {
  readonly id: string;
  /** The character serving the session now. */
  readonly character: LoadedCharacter;
  /** Whether a response is running. */
  readonly busy: boolean;
  /** Sends `session.created` and the greeting. */
  start(): void;
  /** Handles one validated client event; never throws (errors become `error` events). */
  handle(event: ClientEvent, receivedAt?: number): Promise<void>;
  /** Resolves when no response is running. */
  idle(): Promise<void>;
  /** Stops the response in flight (if any) and records the session's end. */
  close(): void;
}

let itemCounter = 0;
/** Item and response ids: short, unique within the process, OpenAI-looking. */
function newId(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}${(itemCounter++).toString(36)}`;
}

/**
 * Opens a session: runs the character's prompt generator and prepares the
 * history (greeting included). Call `start()` once the client can receive.
 *
 * @example
 * const session = await createSession({ id, character, characters, llm, settings, send, log });
 * session.start();
 * ws.on('message', (data) => session.handle(parse(data)));
 */
export async function createSession(options: SessionOptions): Promise<Session> {
  const { id, send, settings } = options;
  const logContent = options.logContent ?? false;
  const metrics = options.metrics;
  const openedAt = performance.now();
  const history = new History();
  const state: Record<string, unknown> = {};

  let character = options.character;
  let log = options.log.child({ character: character.id });
  let opening: CharacterOpening = await open(character, options.variant);
  let instructions: string | undefined;
  let clientTools: ClientTool[] = [];
  let toolChoice: ToolChoice = 'auto';
  let temperature: number | undefined;
  let maxOutputTokens: number | 'inf' = 'inf';
  let voice: string | undefined;
  let active: ActiveResponse | undefined;
  let turns = 0;
  let closed = false;
  /**
   * Client-side calls awaiting `function_call_output`, with the assistant
   * message that made each (legacy and prompt formats carry no call ids).
   */
  const pendingCalls = new Map<string, { name: string; owner: ChatMessage | undefined }>();

  metrics?.active.inc();
  metrics?.total.inc({ character: character.id });
  addGreeting();

  function open(c: LoadedCharacter, variant?: string): Promise<CharacterOpening> {
    return openConversation(c, {
      now: new Date(),
      sessionId: id,
      metadata: options.metadata ?? {},
      ...(variant !== undefined ? { variant } : {}),
    });
  }

  function addGreeting(): void {
    if (!character.greeting) return;
    const item = messageItem('assistant', [{ type: 'output_text', text: character.greeting }]);
    history.addMessageItem(history.current(), item, {
      role: 'assistant',
      content: character.greeting,
    });
  }

  /** Text as logs may show it. */
  const content = (text: string): string | { chars: number } =>
    logContent ? text : { chars: text.length };

  function fail(err: ProtocolError): void {
    send({ type: 'error', error: err.payload });
  }

  function sessionObject(): SessionObject {
    return {
      type: 'realtime',
      object: 'realtime.session',
      id,
      model: character.llm.model ?? 'troupe',
      character: character.id,
      instructions: instructions ?? opening.systemPrompt,
      output_modalities: ['text'],
      tools: clientTools,
      tool_choice: toolChoice,
      temperature: temperature ?? character.llm.temperature ?? null,
      max_output_tokens: maxOutputTokens,
      audio: {
        input: { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: null },
        output: { format: { type: 'audio/pcm', rate: 24000 }, voice: voice ?? null },
      },
      troupe: {
        character: {
          id: character.id,
          name: character.name,
          description: character.description ?? '',
          variant: opening.variant,
          tools: [...character.toolNames],
          greeting: character.greeting ?? null,
        },
      },
    };
  }

  function announce(items: readonly Item[]): void {
    let previous: string | null = null;
    for (const item of items) {
      send({ type: 'conversation.item.added', previous_item_id: previous, item });
      send({ type: 'conversation.item.done', previous_item_id: previous, item });
      previous = item.id;
    }
  }

  // ── session.update ──────────────────────────────────────────────────────

  async function update(u: SessionUpdate, eventId: string | null): Promise<void> {
    const problem = checkUpdate(u, eventId);
    if (problem) return fail(problem);
    if (u.character !== undefined && u.character !== character.id) {
      const next = options.characters.get(u.character)!;
      const nextOpening = await open(next);
      // A new character starts a new conversation: its prompt, tools, greeting and state.
      const gone = history.clear();
      for (const item of gone) send({ type: 'conversation.item.deleted', item_id: item.id });
      pendingCalls.clear();
      for (const key of Object.keys(state)) delete state[key];
      character = next;
      opening = nextOpening;
      instructions = undefined;
      log = options.log.child({ character: next.id });
      log.info({ from: options.character.id, variant: opening.variant }, 'character changed');
      metrics?.total.inc({ character: next.id });
      addGreeting();
      announce(history.items);
    }
    if (u.instructions !== undefined) instructions = u.instructions || undefined;
    if (u.tools !== undefined) clientTools = u.tools;
    if (u.tool_choice !== undefined) toolChoice = u.tool_choice;
    if (u.temperature !== undefined) temperature = u.temperature;
    if (u.max_output_tokens !== undefined) maxOutputTokens = u.max_output_tokens;
    if (u.voice !== undefined) voice = u.voice;
    send({ type: 'session.updated', session: sessionObject() });
  }

  function checkUpdate(u: SessionUpdate, eventId: string | null): ProtocolError | undefined {
    const err = (code: string, message: string, param: string) =>
      new ProtocolError(code, message, { param, eventId });
    if (u.character !== undefined && u.character !== character.id) {
      if (active) {
        return err(
          'conversation_already_has_active_response',
          `session.update: cannot change character while response ${active.id} is in progress; wait for response.done or send response.cancel.`,
          'session.character',
        );
      }
      if (options.characters.get(u.character) === undefined) {
        return err(
          'unknown_character',
          `session.update: no character "${u.character}"; available: ${options.characters.ids().join(', ')}.`,
          'session.character',
        );
      }
    }
    if (u.output_modalities?.includes('audio'))
      return audioUnsupported('session.output_modalities', eventId);
    if (u.turn_detection) return audioUnsupported('session.audio.input.turn_detection', eventId);
    const next =
      u.character !== undefined ? (options.characters.get(u.character) ?? character) : character;
    const serverTools = new Set(next.toolNames);
    // The client tools and tool_choice in effect after the update: a new
    // character or a new tool list can leave old ones clashing or dangling,
    // which the LLM would refuse on the next turn.
    const tools = u.tools ?? clientTools;
    const seen = new Set<string>();
    for (const [i, t] of tools.entries()) {
      if (serverTools.has(t.name)) {
        if (u.tools === undefined) {
          return err(
            'invalid_value',
            `session.update: session.character: the session's client tool "${t.name}" has the name of a tool of character "${next.id}", run by the server; send session.tools without it in the same update.`,
            'session.character',
          );
        }
        return err(
          'invalid_value',
          `session.update: session.tools[${i}].name: "${t.name}" is a tool of the character, run by the server; give the client's tool another name.`,
          `session.tools[${i}].name`,
        );
      }
      if (seen.has(t.name)) {
        return err(
          'invalid_value',
          `session.update: session.tools[${i}].name: "${t.name}" is listed twice.`,
          `session.tools[${i}].name`,
        );
      }
      seen.add(t.name);
    }
    const choice = u.tool_choice ?? toolChoice;
    if (typeof choice === 'object') {
      const names = new Set([...serverTools, ...tools.map((t) => t.name)]);
      if (!names.has(choice.name)) {
        const available = [...names].join(', ') || 'none';
        if (u.tool_choice === undefined) {
          return err(
            'invalid_value',
            `session.update: session.tool_choice: the session's tool_choice names "${choice.name}", which this update takes away; tools: ${available}. Send a tool_choice in the same update.`,
            'session.tool_choice',
          );
        }
        return err(
          'invalid_value',
          `session.update: session.tool_choice.name: no tool "${choice.name}"; tools: ${available}.`,
          'session.tool_choice.name',
        );
      }
    }
    return undefined;
  }

  // ── conversation.item.* ─────────────────────────────────────────────────

  /** The newest item the client has seen: the running response's, else history's. */
  function newestItemId(): string | null {
    return active?.lastItemId?.() ?? history.lastItemId();
  }

  function createItem(
    item: ClientItem,
    previousItemId: string | null | undefined,
    eventId: string | null,
  ): void {
    const err = (code: string, message: string, param: string | null) =>
      fail(new ProtocolError(code, message, { param, eventId }));
    if (previousItemId != null && previousItemId !== newestItemId()) {
      return err(
        'invalid_value',
        `conversation.item.create: previous_item_id: items are added at the end of the conversation; expected ${JSON.stringify(newestItemId())} or nothing, got "${previousItemId}".`,
        'previous_item_id',
      );
    }
    if (item.id !== undefined && history.find(item.id)) {
      return err(
        'invalid_value',
        `conversation.item.create: item.id: an item "${item.id}" already exists.`,
        'item.id',
      );
    }
    if (item.type === 'function_call_output') {
      const pending = pendingCalls.get(item.call_id);
      if (pending === undefined) {
        return err(
          'invalid_value',
          `conversation.item.create: item.call_id: no client-side function call "${item.call_id}" is waiting for output${pendingCalls.size ? `; waiting: ${[...pendingCalls.keys()].join(', ')}` : ''}.`,
          'item.call_id',
        );
      }
      pendingCalls.delete(item.call_id);
      addCallOutput(item.call_id, pending, item.output, item.id);
      return;
    }
    const audioAt = item.content.findIndex(
      (p) => p.type === 'input_audio' || p.type === 'output_audio',
    );
    if (audioAt !== -1) {
      return err(
        'unsupported_content',
        `conversation.item.create: item.content[${audioAt}]: audio content needs a voice session, which this server does not offer yet; send input_text.`,
        `item.content[${audioAt}]`,
      );
    }
    const imageAt = item.content.findIndex((p) => p.type === 'input_image');
    if (imageAt !== -1 && item.role !== 'user') {
      return err(
        'invalid_value',
        `conversation.item.create: item.content[${imageAt}]: images are only taken in user messages.`,
        `item.content[${imageAt}]`,
      );
    }
    const wrongText = item.content.findIndex((p) =>
      item.role === 'assistant' ? p.type === 'input_text' : p.type === 'output_text',
    );
    if (wrongText !== -1) {
      const want = item.role === 'assistant' ? 'output_text' : 'input_text';
      return err(
        'invalid_value',
        `conversation.item.create: item.content[${wrongText}].type: a ${item.role} message takes "${want}" parts.`,
        `item.content[${wrongText}].type`,
      );
    }
    const stored = messageItem(item.role, item.content, item.id);
    const group = item.role === 'user' ? history.startGroup() : history.current();
    // A user message added while a response runs comes after the response's
    // items (not in history until it ends): it follows the newest of them.
    const previous = item.role === 'user' ? newestItemId() : history.lastItemId();
    history.addMessageItem(group, stored, toChatMessage(item.role, item.content));
    log.debug(
      { item: stored.id, role: item.role, text: content(textOf(item.content)) },
      'item added',
    );
    send({ type: 'conversation.item.added', previous_item_id: previous, item: stored });
    send({ type: 'conversation.item.done', previous_item_id: previous, item: stored });
  }

  /** Records a client-side call's output (or a stand-in) right after its call. */
  function addCallOutput(
    callId: string,
    { name, owner }: { name: string; owner: ChatMessage | undefined },
    output: string,
    itemId?: string,
  ): void {
    const item: FunctionCallOutputItem = {
      id: itemId ?? newId('item'),
      object: 'realtime.item',
      type: 'function_call_output',
      call_id: callId,
      output,
    };
    const mode = opening.turn.toolMode ?? 'native';
    const legacy = opening.turn.toolFormat === 'functions';
    const messages = toolResultMessages([{ callId, name, outcome: 'ok', output }], mode, legacy);
    const previous = history.insertToolResults(callId, item, messages, owner);
    send({ type: 'conversation.item.added', previous_item_id: previous, item });
    send({ type: 'conversation.item.done', previous_item_id: previous, item });
  }

  // ── response.create ─────────────────────────────────────────────────────

  function createResponse(r: ResponseOptions, eventId: string | null, receivedAt: number): void {
    if (active) {
      return fail(
        new ProtocolError(
          'conversation_already_has_active_response',
          `Conversation already has an active response in progress: ${active.id}. Wait until the response is finished before creating a new one.`,
          { eventId },
        ),
      );
    }
    if (r.output_modalities?.includes('audio')) {
      return fail(audioUnsupported('response.output_modalities', eventId)!);
    }
    if (typeof r.tool_choice === 'object') {
      const names = [...character.toolNames, ...clientTools.map((t) => t.name)];
      if (!names.includes(r.tool_choice.name)) {
        return fail(
          new ProtocolError(
            'invalid_value',
            `response.create: response.tool_choice.name: no tool "${r.tool_choice.name}"; tools: ${names.join(', ') || 'none'}.`,
            { param: 'response.tool_choice.name', eventId },
          ),
        );
      }
    }
    // Calls the client never answered get a stand-in, so history stays valid.
    for (const [callId, pending] of pendingCalls) {
      log.warn({ callId, tool: pending.name }, 'client call without output');
      addCallOutput(callId, pending, 'Error: the client sent no output for this call.');
    }
    pendingCalls.clear();

    const responseId = newId('resp');
    const controller = new AbortController();
    const response: ActiveResponse = { id: responseId, controller, done: Promise.resolve() };
    active = response;
    response.done = runResponse(response, r, receivedAt).finally(() => {
      active = undefined;
    });
  }

  async function runResponse(
    response: ActiveResponse,
    r: ResponseOptions,
    receivedAt: number,
  ): Promise<void> {
    const turn = ++turns;
    const turnLog = log.child({ turn });
    const group = history.current();
    const system = r.instructions ?? instructions ?? opening.systemPrompt;
    const systemMessage: ChatMessage = { role: 'system', content: system };
    const trimmed = history.trim(settings.contextTokens, estimateTokens(systemMessage));
    if (trimmed.droppedGroups > 0) {
      turnLog.info(
        {
          droppedTurns: trimmed.droppedGroups,
          droppedItems: trimmed.droppedItems,
          budget: settings.contextTokens,
        },
        'history trimmed to the context budget',
      );
    }
    const base: ResponseObject = {
      object: 'realtime.response',
      id: response.id,
      status: 'in_progress',
      status_details: null,
      output: [],
      output_modalities: ['text'],
      usage: null,
      metadata: r.metadata ?? null,
    };
    send({ type: 'response.created', response: base });

    const out = new ResponseWriter(response.id, send, history.lastItemId());
    response.lastItemId = () => out.items.at(-1)?.id ?? null;
    let firstDeltaAt: number | null = null;
    let summary: TurnSummary | undefined;
    let failure: TroupeError | undefined;

    let llm: LlmClient | undefined;
    try {
      llm = await options.llm();
    } catch (err) {
      failure = err as TroupeError;
    }
    if (llm) {
      const max = r.max_output_tokens ?? maxOutputTokens;
      const temp = r.temperature ?? temperature;
      const choice = r.tool_choice ?? toolChoice;
      const request: TurnOptions['request'] = {
        ...opening.turn.request,
        ...(temp !== undefined ? { temperature: temp } : {}),
        ...(max !== 'inf' ? { max_tokens: max } : {}),
        ...(choice !== 'auto'
          ? {
              tool_choice:
                typeof choice === 'object'
                  ? { type: 'function' as const, function: { name: choice.name } }
                  : choice,
            }
          : {}),
      };
      const events = runTurn({
        llm,
        messages: [systemMessage, ...trimmed.messages],
        // Tool rounds grow the request: older exchanges make room for them.
        fitHistory: (added) => {
          const reserved = [systemMessage, ...added].reduce((n, m) => n + estimateTokens(m), 0);
          const again = history.trim(settings.contextTokens, reserved);
          if (again.droppedGroups > 0) {
            turnLog.info(
              { droppedTurns: again.droppedGroups, droppedItems: again.droppedItems },
              'history trimmed between tool rounds',
            );
          }
          return [systemMessage, ...again.messages];
        },
        toolset: opening.toolset,
        signal: response.controller.signal,
        session: { id, character: character.id, state },
        log: turnLog,
        toolTimeoutMs: settings.toolTimeoutMs,
        maxToolRounds: settings.maxToolRounds,
        ...opening.turn,
        request,
        clientTools: clientTools.map(toDescription),
      });
      for await (const e of events) {
        if (e.type === 'text.delta' && firstDeltaAt === null) {
          out.apply(e);
          firstDeltaAt = performance.now();
          continue;
        }
        if (e.type === 'error') failure = e.error;
        if (e.type === 'finish') summary = e.summary;
        out.apply(e);
      }
    }
    const status = summary?.status ?? 'failed';
    out.finish(status);

    // History: the turn's messages and the items that stand for them.
    if (summary) {
      group.messages.push(...summary.messages);
      group.items.push(...out.items);
      // A turn with client calls ends right after the round that made them: its last assistant message.
      const owner = summary.messages.findLast((m) => m.role === 'assistant');
      for (const call of summary.clientCalls) pendingCalls.set(call.id, { name: call.name, owner });
    }
    const ttftMs = firstDeltaAt === null ? null : firstDeltaAt - receivedAt;
    const first = summary?.rounds[0];
    const llmTtftMs =
      first && first.firstChunkAt !== null ? first.firstChunkAt - first.requestAt : null;
    if (failure) {
      send({ type: 'error', error: llmErrorPayload(failure) });
      turnLog.warn({ code: failure.code, err: failure.message }, 'response failed');
    }
    const usage = summary?.usage;
    send({
      type: 'response.done',
      response: {
        ...base,
        status,
        status_details: statusDetails(status, summary?.reason, failure),
        output: out.items,
        usage: usage
          ? {
              total_tokens: usage.total_tokens,
              input_tokens: usage.prompt_tokens,
              output_tokens: usage.completion_tokens,
            }
          : null,
        troupe: {
          character: character.id,
          variant: opening.variant,
          ttft_ms: ttftMs === null ? null : round(ttftMs),
          llm_ttft_ms: llmTtftMs === null ? null : round(llmTtftMs),
          duration_ms: round(performance.now() - receivedAt),
          tool_rounds: summary?.toolRounds ?? 0,
          llm_requests: summary?.requests ?? 0,
          tools: [
            ...(summary?.toolCalls ?? []).map((t) => ({
              call_id: t.callId,
              name: t.name,
              outcome: t.outcome,
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
      },
    });
    record(status, summary, ttftMs, llmTtftMs);
    turnLog.info(
      {
        response: response.id,
        status,
        ttftMs: ttftMs === null ? null : round(ttftMs),
        toolRounds: summary?.toolRounds ?? 0,
        tools: summary?.toolCalls.map((t) => `${t.name}:${t.outcome}`),
        text: content(summary?.text ?? ''),
      },
      'response done',
    );
  }

  function record(
    status: string,
    summary: TurnSummary | undefined,
    ttftMs: number | null,
    llmTtftMs: number | null,
  ): void {
    if (!metrics) return;
    const c = character.id;
    metrics.turns.inc({ character: c, status });
    if (ttftMs !== null) metrics.ttft.observe({ character: c }, ttftMs / 1000);
    if (llmTtftMs !== null) metrics.llmTtft.observe({ character: c }, llmTtftMs / 1000);
    if (!summary) return;
    metrics.toolRounds.observe({ character: c }, summary.toolRounds);
    metrics.tokens.inc({ character: c, kind: 'prompt' }, summary.usage.prompt_tokens);
    metrics.tokens.inc({ character: c, kind: 'completion' }, summary.usage.completion_tokens);
    for (const t of summary.toolCalls) recordTool(t);
    for (const _ of summary.clientCalls) {
      metrics.toolCalls.inc({
        character: c,
        tool: 'client',
        variant: opening.variant,
        outcome: 'ok',
      });
    }
  }

  function recordTool(t: ToolResult): void {
    if (!metrics) return;
    // A name the model made up is not a label value: it could be anything.
    const tool = t.outcome === 'unknown_tool' ? 'unknown' : t.name;
    const labels = { character: character.id, tool, variant: t.variant };
    metrics.toolCalls.inc({ ...labels, outcome: t.outcome });
    metrics.toolLatency.observe(labels, t.durationMs / 1000);
    metrics.unmute.toolCalls.inc({ character_name: character.name, tool_name: tool });
    metrics.unmute.toolLatency.observe({ tool_name: tool }, t.durationMs / 1000);
    if (t.outcome !== 'ok') metrics.unmute.toolErrors.inc({ error_type: t.outcome });
  }

  // ── dispatch ────────────────────────────────────────────────────────────

  async function handle(event: ClientEvent, receivedAt = performance.now()): Promise<void> {
    if (closed) return;
    const eventId = event.event_id ?? null;
    try {
      switch (event.type) {
        case 'session.update':
          return await update(event.session, eventId);
        case 'conversation.item.create':
          return createItem(event.item, event.previous_item_id, eventId);
        case 'conversation.item.retrieve': {
          const item = history.find(event.item_id);
          if (item) return send({ type: 'conversation.item.retrieved', item });
          return fail(itemNotFound(event.type, event.item_id, eventId));
        }
        case 'conversation.item.delete': {
          if (!history.find(event.item_id))
            return fail(itemNotFound(event.type, event.item_id, eventId));
          if (active || !history.delete(event.item_id)) {
            return fail(
              new ProtocolError(
                'item_not_deletable',
                `conversation.item.delete: item "${event.item_id}" is part of a response (or one is running); only messages outside responses can be deleted, so tool calls stay paired with their results.`,
                { param: 'item_id', eventId },
              ),
            );
          }
          return send({ type: 'conversation.item.deleted', item_id: event.item_id });
        }
        case 'conversation.item.truncate': {
          const item = history.find(event.item_id);
          if (!item) return fail(itemNotFound(event.type, event.item_id, eventId));
          return fail(
            new ProtocolError(
              'invalid_value',
              `conversation.item.truncate: item "${event.item_id}" has no audio to truncate (this session is text only).`,
              { param: 'item_id', eventId },
            ),
          );
        }
        case 'response.create':
          return createResponse(event.response ?? {}, eventId, receivedAt);
        case 'response.cancel': {
          if (!active) {
            return fail(
              new ProtocolError(
                'response_cancel_not_active',
                'response.cancel: there is no active response to cancel.',
                { eventId },
              ),
            );
          }
          if (event.response_id !== undefined && event.response_id !== active.id) {
            return fail(
              new ProtocolError(
                'invalid_value',
                `response.cancel: response_id: the active response is ${active.id}, not ${event.response_id}.`,
                { param: 'response_id', eventId },
              ),
            );
          }
          active.controller.abort();
          return;
        }
        case 'input_audio_buffer.append':
        case 'input_audio_buffer.commit':
        case 'input_audio_buffer.clear':
          return fail(
            new ProtocolError(
              'audio_not_supported',
              `${event.type}: this server takes text only for now; send conversation.item.create with input_text.`,
              { eventId },
            ),
          );
      }
    } catch (err) {
      // A bug here must not end the session: tell the client, log the stack.
      log.error({ err, event: event.type }, 'event handling failed');
      fail(
        new ProtocolError(
          'internal_error',
          `${event.type}: the server failed to handle this event.`,
          {
            type: 'server_error',
            eventId,
          },
        ),
      );
    }
  }

  return {
    id,
    get character() {
      return character;
    },
    get busy() {
      return active !== undefined;
    },
    start() {
      send({ type: 'session.created', session: sessionObject() });
      announce(history.items);
    },
    handle,
    async idle() {
      while (active) await active.done;
    },
    close() {
      if (closed) return;
      closed = true;
      active?.controller.abort();
      metrics?.active.dec();
      metrics?.duration.observe((performance.now() - openedAt) / 1000);
    },
  };
}

/** Where an item stands in a response, as output events give it. */
interface ItemPlace {
  response_id: string;
  item_id: string;
  output_index: number;
}

/**
 * Turns a response's turn events into Realtime output events and items: a
 * message item per stretch of text, a function_call item per tool call, a
 * function_call_output item per server-side result.
 */
class ResponseWriter {
  readonly items: Item[] = [];
  /**
   * The open stretch of text, with its place in the output worked out once:
   * nothing is added before it or taken out while it is open (a tool call
   * closes it first), and every text delta needs it.
   */
  #text: { item: MessageItem; text: string; at: ItemPlace } | undefined;
  #calls = new Map<string, FunctionCallItem>();
  #outputIndex = 0;
  readonly #responseId: string;
  readonly #send: (event: ServerEvent) => void;
  /** The conversation's last item when the response began: its first item follows it. */
  readonly #before: string | null;

  constructor(responseId: string, send: (event: ServerEvent) => void, before: string | null) {
    this.#responseId = responseId;
    this.#send = send;
    this.#before = before;
  }

  apply(e: TurnEvent): void {
    switch (e.type) {
      case 'text.delta':
        return this.#delta(e.delta);
      case 'tool_call.start':
        this.closeText();
        this.#startCall(e.callId, e.name);
        return;
      case 'tool_call.arguments.delta': {
        const item = this.#calls.get(e.callId);
        if (!item) return;
        item.arguments += e.delta;
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

  #delta(delta: string): void {
    if (!this.#text) {
      const item = messageItem('assistant', [], undefined, 'in_progress');
      this.#added(item);
      this.#text = { item, text: '', at: this.#at(item) };
      this.#send({
        type: 'response.content_part.added',
        ...this.#text.at,
        content_index: 0,
        part: { type: 'output_text', text: '' },
      });
    }
    this.#text.text += delta;
    this.#send({
      type: 'response.output_text.delta',
      ...this.#text.at,
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
    this.#send({ type: 'response.output_text.done', ...at, content_index: 0, text });
    const part: ContentPart = { type: 'output_text', text };
    this.#send({ type: 'response.content_part.done', ...at, content_index: 0, part });
    item.content = [part];
    item.status = status;
    this.#done(item);
  }

  /**
   * Ends the response's output: open text is closed (`incomplete` when the
   * response was cut short), and calls whose stream broke before they were
   * complete are taken out, as the model never made them whole and none ran.
   */
  finish(status: ResponseObject['status']): void {
    this.closeText(status === 'completed' ? 'completed' : 'incomplete');
    for (const item of this.#calls.values()) {
      if (item.status === 'in_progress') this.#drop(item);
    }
  }

  #startCall(callId: string, name: string): FunctionCallItem {
    const item: FunctionCallItem = {
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
  #drop(item: FunctionCallItem): void {
    item.status = 'incomplete';
    this.#done(item);
    // Not in history (the model is not told it ran): take it out of the client's view too.
    this.items.splice(this.items.indexOf(item), 1);
    this.#send({ type: 'conversation.item.deleted', item_id: item.id });
  }

  #result(result: ToolResult): void {
    const call = this.#calls.get(result.callId);
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

function messageItem(
  role: MessageItem['role'],
  content: ContentPart[],
  id?: string,
  status: MessageItem['status'] = 'completed',
): MessageItem {
  return {
    id: id ?? newId('item'),
    object: 'realtime.item',
    type: 'message',
    status,
    role,
    content,
  };
}

function textOf(parts: readonly ContentPart[]): string {
  return parts.map((p) => ('text' in p ? p.text : '')).join('');
}

/** A client message as the model sees it; images become `image_url` parts. */
function toChatMessage(role: MessageItem['role'], parts: readonly ContentPart[]): ChatMessage {
  if (role !== 'user' || !parts.some((p) => p.type === 'input_image')) {
    return { role, content: textOf(parts) };
  }
  const content: UserContentPart[] = [];
  for (const p of parts) {
    if (p.type === 'input_text') content.push({ type: 'text', text: p.text });
    else if (p.type === 'input_image') {
      content.push({
        type: 'image_url',
        image_url: { url: p.image_url, ...(p.detail ? { detail: p.detail } : {}) },
      });
    }
  }
  return { role: 'user', content };
}

function toDescription(t: ClientTool): ToolDescription {
  return { name: t.name, description: t.description, parameters: t.parameters };
}

function audioUnsupported(param: string, eventId: string | null): ProtocolError {
  return new ProtocolError(
    'audio_not_supported',
    `${param}: audio needs a voice session, which this server does not offer yet; use ["text"].`,
    { param, eventId },
  );
}

function itemNotFound(type: string, itemId: string, eventId: string | null): ProtocolError {
  return new ProtocolError('item_not_found', `${type}: no item "${itemId}" in the conversation.`, {
    param: 'item_id',
    eventId,
  });
}

/** An LLM failure as the client sees it: what failed and whether retrying may help. */
function llmErrorPayload(err: TroupeError): ErrorPayload {
  return {
    type: 'llm_error',
    code: err.code === 'E_CONFIG' ? 'llm_unavailable' : 'llm_stream_error',
    message: `${err.message}${err.retryable ? ' (retrying may help)' : ''}`,
    param: null,
    event_id: null,
  };
}

function statusDetails(
  status: ResponseObject['status'],
  reason: string | undefined,
  failure: TroupeError | undefined,
): ResponseObject['status_details'] {
  if (status === 'completed' || status === 'in_progress') return null;
  if (status === 'cancelled') return { type: 'cancelled', reason: 'client_cancelled' };
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

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
