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
  type RoundTiming,
  type TurnOptions,
  type TurnSummary,
} from '../llm/turn-runner.js';
import type { SessionMetrics } from '../metrics/index.js';
import type { ToolCall, ToolDescription, ToolResult } from '../tools/types.js';
import type { Toolset } from '../tools/library.js';
import type {
  VoiceTimings,
  AudioFormat,
  TurnDetection,
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
  ResponseRound,
  ServerEvent,
  SessionObject,
  SessionUpdate,
  ToolChoice,
} from './events.js';
import { History, estimateTokens } from './history.js';
import { AudioInput, type AudioInputEvent, type VadSettings } from './audio-input.js';
import { SpeechOutput, type SpeechPlace, type SpokenItem } from './speech-output.js';
import type { AudioEncoding, SessionVoice } from './voice-settings.js';
import { OggOpusEncoder } from '../voice/audio/ogg-opus.js';
import { encodePcm16Base64 } from '../voice/audio/pcm.js';
import { cleanForSpeech } from '../voice/chunker.js';
import { AudioFormatError } from '../errors.js';

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
  /** Speech engines and settings; absent = text only (audio events are refused). */
  voice?: SessionVoice;
}

/** A turn in flight. */
interface ActiveResponse {
  id: string;
  controller: AbortController;
  done: Promise<void>;
  /** Its newest output item: history takes the response's items when it ends. */
  lastItemId?: () => string | null;
  /** Its speech, when it speaks. */
  speech?: SpeechOutput;
  /** Why it was stopped, when it was. */
  stoppedBy?: 'client_cancelled' | 'turn_detected';
  /** Response start (or end of the user's speech) → first audio sent, ms. */
  firstAudioMs?: number;
  /** The spoken greeting, which a change of character simply stops. */
  greeting?: boolean;
  /** End of the user's speech → transcript, for responses their speech started. */
  sttMs?: number;
  /** What the client says it played of its items (`conversation.item.truncate`). */
  truncations: Map<string, string>;
}

/** Settings a voice frontend implies (see {@link Session.configureVoice}). */
export interface VoiceDefaults {
  format: AudioEncoding;
  outputModalities: Array<'text' | 'audio'>;
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
  /**
   * Applies a voice frontend's defaults before its first event is handled
   * (the unmute dialect: Ogg/Opus both ways, spoken replies).
   */
  configureVoice(defaults: VoiceDefaults): void;
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
  const voiceMetrics = metrics?.voice;
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
  // ── voice state ──
  const kit = options.voice;
  let outputModalities: Array<'text' | 'audio'> = ['text'];
  let inputEncoding: AudioEncoding = 'pcm16';
  let outputEncoding: AudioEncoding = 'pcm16';
  let turnDetection: TurnSettings | null = kit
    ? { ...kit.settings.vad, createResponse: true, interruptResponse: true }
    : null;
  let input: AudioInput | undefined;
  let oggOut: OggOpusEncoder | undefined;
  /** The greeting as history holds it, so a barge-in can cut it to what was heard. */
  let greeting: { item: MessageItem; message: ChatMessage } | undefined;
  let greetingSpoken = false;
  /** The newest response's speech: a late `conversation.item.truncate` is read against it. */
  let lastSpeech: SpeechOutput | undefined;
  /** Spoken items and the message that holds their text, for truncation after the fact. */
  const spokenMessages = new Map<string, SpokenRound>();
  /** The user's utterance in progress (speech started, not yet committed). */
  let utterance: Utterance | undefined;
  /** Speech that may interrupt the character once it lasts `bargeInMinMs`. */
  let tentative: Utterance | undefined;
  /** Committed utterances are transcribed and answered one after another. */
  let turnChain: Promise<void> = Promise.resolve();
  /** Unmute's frontend shows the conversation as the model sees it after each change. */
  let shareHistory = false;
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
    greeting = undefined;
    greetingSpoken = false;
    if (!character.greeting) return;
    const item = messageItem('assistant', [{ type: 'output_text', text: character.greeting }]);
    const message: ChatMessage = { role: 'assistant', content: character.greeting };
    history.addMessageItem(history.current(), item, message);
    greeting = { item, message };
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
      output_modalities: outputModalities,
      tools: clientTools,
      tool_choice: toolChoice,
      temperature: temperature ?? character.llm.temperature ?? null,
      max_output_tokens: maxOutputTokens,
      audio: {
        input: {
          format: formatObject(inputEncoding),
          turn_detection: turnDetection && {
            type: 'server_vad',
            threshold: turnDetection.threshold,
            prefix_padding_ms: turnDetection.prefixPaddingMs,
            silence_duration_ms: turnDetection.silenceDurationMs,
            create_response: turnDetection.createResponse,
            interrupt_response: turnDetection.interruptResponse,
          },
        },
        output: { format: formatObject(outputEncoding), voice: ttsVoice() ?? null },
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
      if (active?.greeting) {
        // The old character's greeting makes no sense any more.
        active.stoppedBy = 'client_cancelled';
        active.controller.abort();
        await active.done;
      }
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
    if (u.voice !== undefined) voice = u.voice || undefined;
    if (u.output_modalities !== undefined) outputModalities = u.output_modalities;
    if (u.input_audio_format !== undefined) setInputEncoding(encodingOf(u.input_audio_format));
    if (u.output_audio_format !== undefined) outputEncoding = encodingOf(u.output_audio_format);
    if (u.turn_detection !== undefined) setTurnDetection(u.turn_detection);
    send({ type: 'session.updated', session: sessionObject() });
    maybeSpeakGreeting();
  }

  function checkUpdate(u: SessionUpdate, eventId: string | null): ProtocolError | undefined {
    const err = (code: string, message: string, param: string) =>
      new ProtocolError(code, message, { param, eventId });
    if (u.character !== undefined && u.character !== character.id) {
      if (active && !active.greeting) {
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
    const audioProblem = checkAudioUpdate(u, eventId);
    if (audioProblem) return audioProblem;
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

  function createResponse(
    r: ResponseOptions,
    eventId: string | null,
    receivedAt: number,
    sttMs?: number,
  ): void {
    if (active) {
      return fail(
        new ProtocolError(
          'conversation_already_has_active_response',
          `Conversation already has an active response in progress: ${active.id}. Wait until the response is finished before creating a new one.`,
          { eventId },
        ),
      );
    }
    if (r.output_modalities?.includes('audio') && !kit?.tts) {
      return fail(audioUnsupported('response.output_modalities', eventId));
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
    const response: ActiveResponse = {
      id: responseId,
      controller,
      done: Promise.resolve(),
      truncations: new Map(),
      ...(sttMs !== undefined ? { sttMs } : {}),
    };
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
    const modalities = r.output_modalities ?? outputModalities;
    // Audio out needs an engine; without one the reply is text (checked at update).
    const spoken = modalities.includes('audio') && kit?.tts != null;
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
      output_modalities: modalities,
      usage: null,
      metadata: r.metadata ?? null,
    };
    send({ type: 'response.created', response: base });

    const speech = spoken ? newSpeech(response, turnLog, receivedAt) : undefined;
    const out = new ResponseWriter(response.id, send, history.lastItemId(), speech);
    const fillers = new FillerTimers(opening.toolset, (text) => out.filler(text));
    let requestAt: number | undefined;
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
        if (speech) fillers.apply(e, response.controller.signal);
        if (e.type === 'round.start' && e.round === 0) requestAt = performance.now();
        out.apply(e);
      }
    }
    fillers.clear();
    let status = summary?.status ?? 'failed';
    out.finish(status);
    // A spoken reply ends when its last word has played (or was cut off).
    const spokenItems = await out.spoken();
    // Speech cut short is a cancelled reply, even when the LLM had finished.
    if (response.stoppedBy) status = 'cancelled';

    // History: the turn's messages and the items that stand for them.
    if (summary) {
      const messages = speech
        ? keepHeard(summary.messages, spokenItems, response.truncations, spokenMessages)
        : summary.messages;
      // Truncation reaches back a few replies, not the whole session.
      for (const id of spokenMessages.keys()) {
        if (spokenMessages.size <= MAX_SPOKEN_ITEMS) break;
        spokenMessages.delete(id);
      }
      group.messages.push(...messages);
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
        status_details: statusDetails(status, summary?.reason, failure, response.stoppedBy),
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
          ...(response.firstAudioMs !== undefined
            ? { first_audio_ms: round(response.firstAudioMs) }
            : {}),
          ...(speech ? { voice: voiceTimings(response, speech, requestAt) } : {}),
          tool_rounds: summary?.toolRounds ?? 0,
          llm_requests: summary?.requests ?? 0,
          rounds: responseRounds(summary?.rounds ?? []),
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
    sendHistory();
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

  // ── voice ───────────────────────────────────────────────────────────────

  function checkAudioUpdate(u: SessionUpdate, eventId: string | null): ProtocolError | undefined {
    const err = (code: string, message: string, param: string) =>
      new ProtocolError(code, message, { param, eventId });
    if (u.output_modalities?.includes('audio') && !kit?.tts) {
      return err(
        'audio_not_supported',
        'session.update: session.output_modalities: this server has no text-to-speech engine (TTS_PROVIDER=none); use ["text"].',
        'session.output_modalities',
      );
    }
    if (u.turn_detection && !kit) {
      return err(
        'audio_not_supported',
        'session.update: session.audio.input.turn_detection: this server takes no audio; send text.',
        'session.audio.input.turn_detection',
      );
    }
    if (u.turn_detection && u.turn_detection.type !== 'server_vad') {
      return err(
        'invalid_value',
        `session.update: session.audio.input.turn_detection.type: "${u.turn_detection.type}" is not offered; use "server_vad", or null to commit turns yourself.`,
        'session.audio.input.turn_detection.type',
      );
    }
    for (const [key, param] of [
      ['input_audio_format', 'session.audio.input.format'],
      ['output_audio_format', 'session.audio.output.format'],
    ] as const) {
      const f = u[key];
      if (!f) continue;
      if (f.type === 'audio/ogg') continue;
      if (f.type !== 'audio/pcm') {
        return err(
          'invalid_value',
          `session.update: ${param}.type: "${f.type}" is not offered; use "audio/pcm" (PCM16 24 kHz) or "audio/ogg" (Ogg/Opus).`,
          `${param}.type`,
        );
      }
      if (f.rate !== undefined && f.rate !== 24000) {
        return err(
          'invalid_value',
          `session.update: ${param}.rate: audio/pcm is taken at 24000 Hz only, got ${f.rate}; resample on the client.`,
          `${param}.rate`,
        );
      }
    }
    return undefined;
  }

  function setInputEncoding(encoding: AudioEncoding): void {
    inputEncoding = encoding;
    if (input) input.encoding = encoding;
  }

  function setTurnDetection(t: TurnDetection | null): void {
    if (!kit) return;
    if (t === null) {
      turnDetection = null;
      tentative = undefined;
      utterance = undefined;
    } else {
      const base = turnDetection ?? {
        ...kit.settings.vad,
        createResponse: true,
        interruptResponse: true,
      };
      turnDetection = {
        threshold: t.threshold ?? base.threshold,
        prefixPaddingMs: t.prefix_padding_ms ?? base.prefixPaddingMs,
        silenceDurationMs: t.silence_duration_ms ?? base.silenceDurationMs,
        createResponse: t.create_response ?? base.createResponse,
        interruptResponse: t.interrupt_response ?? base.interruptResponse,
      };
    }
    if (input) input.turnDetection = turnDetection && vadOf(turnDetection);
  }

  /** The TTS voice: the client's choice, else the character's for this engine. */
  function ttsVoice(): string | undefined {
    const tts = kit?.tts;
    if (!tts) return voice;
    return voice ?? character.voice[tts.name];
  }

  function encodeOut(pcm: Int16Array): string {
    if (outputEncoding === 'pcm16') return encodePcm16Base64(pcm);
    oggOut ??= new OggOpusEncoder({ sampleRate: 24000 });
    return Buffer.from(oggOut.push(pcm)).toString('base64');
  }

  /** A response's speech, wired to metrics and the client. */
  function newSpeech(response: ActiveResponse, turnLog: Logger, from: number): SpeechOutput {
    const tts = kit!.tts!;
    const ogg = outputEncoding === 'ogg_opus';
    let first = true;
    const speech = new SpeechOutput({
      tts,
      voice: ttsVoice(),
      signal: response.controller.signal,
      leadMs: kit!.settings.audioLeadMs,
      encode: encodeOut,
      // Opus pages hold two 20 ms frames: only whole pages go out.
      padTo: ogg ? 1920 : 1,
      frameSamples: ogg ? 3840 : 2400,
      send,
      log: turnLog,
      onTtsFirstAudio: (ms) =>
        voiceMetrics?.ttsFirstAudio.observe({ provider: tts.name }, ms / 1000),
      onAudioSent: (samples) => {
        voiceMetrics?.audioSeconds.inc({ direction: 'out', provider: tts.name }, samples / 24000);
        if (!first) return;
        first = false;
        response.firstAudioMs = performance.now() - from;
        voiceMetrics?.speechToAudio.observe(
          { stt: kit?.stt?.name ?? 'none', tts: tts.name },
          response.firstAudioMs / 1000,
        );
      },
      onTtsError: (error) => {
        voiceMetrics?.errors.inc({ kind: 'tts', provider: tts.name });
        send({
          type: 'error',
          error: {
            type: 'server_error',
            code: 'tts_failed',
            message: `${error.message} The rest of the reply is sent as transcript only.`,
            param: null,
            event_id: null,
          },
        });
      },
    });
    response.speech = speech;
    lastSpeech = speech;
    return speech;
  }

  /** A voice session hears the greeting spoken, once, before anything else is said. */
  function maybeSpeakGreeting(): void {
    // Only while the greeting is still the conversation's last word.
    if (greetingSpoken || !greeting || !kit?.tts || active) return;
    if (history.lastItemId() !== greeting.item.id) return;
    if (!outputModalities.includes('audio')) return;
    greetingSpoken = true;
    const { item, message } = greeting;
    const responseId = newId('resp');
    const response: ActiveResponse = {
      id: responseId,
      controller: new AbortController(),
      done: Promise.resolve(),
      truncations: new Map(),
      greeting: true,
    };
    active = response;
    const base: ResponseObject = {
      object: 'realtime.response',
      id: responseId,
      status: 'in_progress',
      status_details: null,
      output: [],
      output_modalities: ['audio'],
      usage: null,
      metadata: { troupe: 'greeting' },
    };
    send({ type: 'response.created', response: base });
    const speech = newSpeech(response, log, performance.now());
    const place: SpeechPlace = { response_id: responseId, item_id: item.id, output_index: 0 };
    response.done = speech
      .say(place, character.greeting ?? '')
      .then((spoken) => {
        if (spoken.interrupted) {
          // History keeps what the user heard of the greeting.
          message.content = spoken.transcript;
          item.content = [{ type: 'output_audio', transcript: spoken.transcript }];
          item.status = 'incomplete';
          spokenMessages.set(item.id, {
            message,
            items: [{ item, transcript: spoken.transcript }],
          });
        }
        const status = response.stoppedBy ? 'cancelled' : 'completed';
        send({
          type: 'response.done',
          response: {
            ...base,
            status,
            status_details:
              status === 'cancelled' ? { type: 'cancelled', reason: response.stoppedBy } : null,
            output: [item],
          },
        });
      })
      .finally(() => {
        if (active === response) active = undefined;
      });
  }

  function audioInput(): AudioInput {
    input ??= new AudioInput({
      stt: kit!.stt,
      vad: kit!.vad,
      vadSettings: vadOf(turnDetection ?? { ...kit!.settings.vad }),
      pauseThreshold: kit!.settings.pauseThreshold,
      maxUtteranceMs: kit!.settings.maxUtteranceMs,
      log,
      onEvent: onInputEvent,
    });
    input.encoding = inputEncoding;
    if (turnDetection === null) input.turnDetection = null;
    return input;
  }

  function appendAudio(audio: string, eventId: string | null): void {
    if (!kit?.stt) {
      return fail(
        new ProtocolError(
          'audio_not_supported',
          'input_audio_buffer.append: this server has no speech-to-text engine (STT_PROVIDER=none); send conversation.item.create with input_text.',
          { eventId },
        ),
      );
    }
    const inp = audioInput();
    const before = inp.totalMs;
    try {
      inp.append(audio);
    } catch (err) {
      if (!(err instanceof AudioFormatError)) throw err;
      voiceMetrics?.errors.inc({ kind: 'input_audio', provider: inputEncoding });
      return fail(
        new ProtocolError('invalid_audio', `input_audio_buffer.append: audio: ${err.message}`, {
          param: 'audio',
          eventId,
        }),
      );
    }
    voiceMetrics?.audioSeconds.inc(
      { direction: 'in', provider: kit?.stt?.name ?? 'none' },
      (inp.totalMs - before) / 1000,
    );
    confirmTentative();
  }

  function onInputEvent(e: AudioInputEvent): void {
    if (closed) return;
    switch (e.type) {
      case 'speech_started': {
        const u: Utterance = {
          itemId: newId('item'),
          audioStartMs: e.audioStartMs,
          speechStartMs: e.speechStartMs,
          streamed: '',
        };
        utterance = u;
        if (active && turnDetection?.interruptResponse) {
          // Maybe a cough: it interrupts only once it has lasted bargeInMinMs.
          tentative = u;
          confirmTentative();
          return;
        }
        send({
          type: 'input_audio_buffer.speech_started',
          audio_start_ms: Math.round(e.audioStartMs),
          item_id: u.itemId,
        });
        return;
      }
      case 'speech_stopped': {
        const u = utterance;
        utterance = undefined;
        if (!u) return;
        if (tentative === u) {
          tentative = undefined;
          log.debug({ ms: Math.round(e.audioEndMs - u.audioStartMs) }, 'false start ignored');
          input?.clear();
          return;
        }
        send({
          type: 'input_audio_buffer.speech_stopped',
          audio_end_ms: Math.round(e.audioEndMs),
          item_id: u.itemId,
        });
        commitUtterance(u, true);
        return;
      }
      case 'transcript': {
        const u = utterance ?? tentative;
        if (!u) return;
        u.streamed += e.text;
        send({
          type: 'conversation.item.input_audio_transcription.delta',
          item_id: u.itemId,
          content_index: 0,
          delta: e.text,
          ...(e.startMs !== undefined ? { start_time: e.startMs / 1000 } : {}),
        });
        return;
      }
      case 'stt_error':
        voiceMetrics?.errors.inc({ kind: 'stt', provider: kit?.stt?.name ?? 'none' });
        send({
          type: 'error',
          error: {
            type: 'server_error',
            code: 'stt_failed',
            message: `Speech recognition failed: ${e.error.message}`,
            param: null,
            event_id: null,
          },
        });
        return;
    }
  }

  /** Speech that has lasted long enough while the character speaks interrupts it. */
  function confirmTentative(): void {
    const u = tentative;
    if (!u || !input?.speaking) return;
    if (input.speechSoFar(u.speechStartMs) < kit!.settings.bargeInMinMs) return;
    tentative = undefined;
    send({
      type: 'input_audio_buffer.speech_started',
      audio_start_ms: Math.round(u.audioStartMs),
      item_id: u.itemId,
    });
    if (active && !active.controller.signal.aborted) {
      active.stoppedBy = 'turn_detected';
      active.controller.abort();
      voiceMetrics?.bargeIns.inc({ character: character.id });
      log.info({ response: active.id }, 'interrupted by the user');
      send({ type: 'unmute.interrupted_by_vad' });
    }
  }

  /** Ends an utterance: its item, its transcript, and (server VAD) the answer. */
  function commitUtterance(u: Utterance, auto: boolean): void {
    const speechEndedAt = performance.now();
    send({
      type: 'input_audio_buffer.committed',
      previous_item_id: newestItemId(),
      item_id: u.itemId,
    });
    const transcript = input!.commit();
    turnChain = turnChain
      .then(() => finishUtterance(u, transcript, auto, speechEndedAt))
      .catch((err: unknown) => log.error({ err }, 'utterance handling failed'));
  }

  async function finishUtterance(
    u: Utterance,
    pending: Promise<string>,
    auto: boolean,
    speechEndedAt: number,
  ): Promise<void> {
    const item = messageItem(
      'user',
      [{ type: 'input_audio', transcript: null }],
      u.itemId,
      'in_progress',
    );
    const previous = newestItemId();
    send({ type: 'conversation.item.added', previous_item_id: previous, item });
    const stt = kit?.stt?.name ?? 'none';
    let transcript = '';
    let sttMs: number | undefined;
    let failed = false;
    try {
      transcript = (await pending).trim();
      sttMs = performance.now() - speechEndedAt;
      voiceMetrics?.sttLatency.observe({ provider: stt }, sttMs / 1000);
    } catch (err) {
      failed = true;
      voiceMetrics?.errors.inc({ kind: 'stt', provider: stt });
      log.warn({ err: (err as Error).message, provider: stt }, 'transcription failed');
      send({
        type: 'conversation.item.input_audio_transcription.failed',
        item_id: u.itemId,
        content_index: 0,
        error: { type: 'server_error', code: 'stt_failed', message: (err as Error).message },
      });
    }
    if (closed) return;
    if (transcript && !u.streamed) {
      send({
        type: 'conversation.item.input_audio_transcription.delta',
        item_id: u.itemId,
        content_index: 0,
        delta: transcript,
      });
    }
    // `failed` and `completed` are alternatives, as in the Realtime API.
    if (!failed) {
      send({
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: u.itemId,
        content_index: 0,
        transcript,
      });
    }
    if (transcript === '') {
      // Nothing was understood: no message for the model, and no answer to nothing.
      log.info('utterance without words');
      send({ type: 'conversation.item.deleted', item_id: u.itemId });
      return;
    }
    item.content = [{ type: 'input_audio', transcript }];
    item.status = 'completed';
    history.addMessageItem(history.startGroup(), item, { role: 'user', content: transcript });
    log.debug({ item: item.id, text: content(transcript) }, 'utterance transcribed');
    send({ type: 'conversation.item.done', previous_item_id: previous, item });
    sendHistory();
    if (!auto || !turnDetection?.createResponse) return;
    // An interrupted response is still winding down: answer once it has.
    while (active) await active.done;
    if (closed) return;
    createResponse({}, null, speechEndedAt, sttMs);
  }

  /** `input_audio_buffer.commit`: the client ends the turn (turn_detection null, or early). */
  function manualCommit(eventId: string | null): void {
    const inp = input;
    if (!inp || inp.utteranceMs < MIN_COMMIT_MS) {
      return fail(
        new ProtocolError(
          'input_audio_buffer_commit_empty',
          `input_audio_buffer.commit: the buffer holds ${Math.round(inp?.utteranceMs ?? 0)} ms of audio; at least ${MIN_COMMIT_MS} ms is needed. Send input_audio_buffer.append first.`,
          { eventId },
        ),
      );
    }
    const u = utterance ?? {
      itemId: newId('item'),
      audioStartMs: 0,
      speechStartMs: 0,
      streamed: '',
    };
    utterance = undefined;
    tentative = undefined;
    commitUtterance(u, turnDetection !== null);
  }

  function truncate(
    event: { item_id: string; content_index: number; audio_end_ms: number },
    eventId: string | null,
  ): void {
    const speech = active?.speech ?? lastSpeech;
    const heard = speech?.heardUntil(event.item_id, event.audio_end_ms);
    if (heard === undefined) {
      if (!history.find(event.item_id)) {
        return fail(itemNotFound('conversation.item.truncate', event.item_id, eventId));
      }
      return fail(
        new ProtocolError(
          'invalid_value',
          `conversation.item.truncate: item "${event.item_id}" has no audio to truncate (only spoken assistant messages do).`,
          { param: 'item_id', eventId },
        ),
      );
    }
    if (active?.speech === speech) active!.truncations.set(event.item_id, heard);
    const round = spokenMessages.get(event.item_id);
    if (round) {
      for (const entry of round.items) {
        if (entry.item.id !== event.item_id) continue;
        entry.transcript = heard;
        entry.item.content = [{ type: 'output_audio', transcript: heard }];
        entry.item.status = 'incomplete';
      }
      round.message.content = round.items
        .map((i) => i.transcript)
        .filter(Boolean)
        .join(' ');
    }
    send({
      type: 'conversation.item.truncated',
      item_id: event.item_id,
      content_index: event.content_index,
      audio_end_ms: event.audio_end_ms,
    });
  }

  /** `unmute.additional_outputs`: the chat history as the model will see it. */
  function sendHistory(): void {
    if (!shareHistory) return;
    const system = instructions ?? opening.systemPrompt;
    const messages = history.trim(Number.MAX_SAFE_INTEGER, 0).messages;
    send({
      type: 'unmute.additional_outputs',
      args: {
        chat_history: [{ role: 'system', content: system }, ...messages.map(plainMessage)],
      },
    });
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
        case 'conversation.item.truncate':
          return truncate(event, eventId);
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
          active.stoppedBy = 'client_cancelled';
          active.controller.abort();
          return;
        }
        case 'input_audio_buffer.append':
        case 'input_audio_buffer.commit':
        case 'input_audio_buffer.clear':
          if (!kit) {
            return fail(
              new ProtocolError(
                'audio_not_supported',
                `${event.type}: this server takes no audio (no speech engines are configured); send conversation.item.create with input_text.`,
                { eventId },
              ),
            );
          }
          if (event.type === 'input_audio_buffer.append') return appendAudio(event.audio, eventId);
          if (event.type === 'input_audio_buffer.clear') {
            input?.clear();
            utterance = undefined;
            tentative = undefined;
            return send({ type: 'input_audio_buffer.cleared' });
          }
          return manualCommit(eventId);
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
    configureVoice(defaults: VoiceDefaults) {
      shareHistory = true;
      setInputEncoding(defaults.format);
      outputEncoding = defaults.format;
      outputModalities = kit?.tts ? defaults.outputModalities : ['text'];
      // The greeting waits for the frontend's first session.update: it may pick another character.
    },
    async idle() {
      while (active) await active.done;
    },
    close() {
      if (closed) return;
      closed = true;
      active?.controller.abort();
      input?.close();
      oggOut?.close();
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
  #text: { item: MessageItem; text: string; at: ItemPlace; round: number } | undefined;
  #calls = new Map<string, FunctionCallItem>();
  #outputIndex = 0;
  readonly #responseId: string;
  readonly #send: (event: ServerEvent) => void;
  /** The conversation's last item when the response began: its first item follows it. */
  readonly #before: string | null;
  /** Spoken replies: text becomes speech, and items end when their audio has played. */
  readonly #speech: SpeechOutput | undefined;
  readonly #spoken: Array<Promise<SpokenEntry>> = [];

  constructor(
    responseId: string,
    send: (event: ServerEvent) => void,
    before: string | null,
    speech?: SpeechOutput,
  ) {
    this.#responseId = responseId;
    this.#send = send;
    this.#before = before;
    this.#speech = speech;
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

  #delta(delta: string, round: number): void {
    const speech = this.#speech;
    if (!this.#text) {
      const item = messageItem('assistant', [], undefined, 'in_progress');
      this.#added(item);
      this.#text = { item, text: '', at: this.#at(item), round };
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
    `${param}: this server has no text-to-speech engine (TTS_PROVIDER=none); use ["text"].`,
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
  stoppedBy: string | undefined,
): ResponseObject['status_details'] {
  if (status === 'completed' || status === 'in_progress') return null;
  if (status === 'cancelled') return { type: 'cancelled', reason: stoppedBy ?? 'client_cancelled' };
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

/** Rounds of a response as `response.done` reports them, to the microsecond (overheads are sub-ms). */
function responseRounds(rounds: readonly RoundTiming[]): ResponseRound[] {
  const us = (ms: number): number => Math.round(ms * 1000) / 1000;
  return rounds.map((r, i) => {
    const next = rounds[i + 1];
    return {
      llm_ttft_ms: r.firstChunkAt === null ? null : us(r.firstChunkAt - r.requestAt),
      llm_ms:
        r.firstChunkAt === null || r.lastChunkAt === null ? null : us(r.lastChunkAt - r.requestAt),
      handler_ms: us(r.handlerMs),
      overhead_ms:
        next === undefined || r.lastChunkAt === null
          ? null
          : us(Math.max(0, next.requestAt - r.lastChunkAt - r.handlerMs)),
    };
  });
}

/** Server VAD settings of a session (`turn_detection`), with Realtime's two flags. */
interface TurnSettings extends VadSettings {
  createResponse: boolean;
  interruptResponse: boolean;
}

/** A user utterance from its first sound to its commit. */
interface Utterance {
  itemId: string;
  /** Where the utterance starts on the input clock, prefix padding included. */
  audioStartMs: number;
  /** Where its first sound is: barge-in measures from here. */
  speechStartMs: number;
  /** Transcript text already sent as deltas (streaming engines). */
  streamed: string;
}

/** An assistant message whose text was spoken in one or more items. */
interface SpokenRound {
  message: ChatMessage;
  items: Array<{ item: MessageItem; transcript: string }>;
}

/** Spoken items a late `conversation.item.truncate` can still cut. */
const MAX_SPOKEN_ITEMS = 64;

/** Less audio than this cannot be a turn (the Realtime API's own floor). */
const MIN_COMMIT_MS = 100;

function vadOf(t: VadSettings): VadSettings {
  return {
    threshold: t.threshold,
    prefixPaddingMs: t.prefixPaddingMs,
    silenceDurationMs: t.silenceDurationMs,
  };
}

function formatObject(encoding: AudioEncoding): AudioFormat {
  return encoding === 'pcm16'
    ? { type: 'audio/pcm', rate: 24000 }
    : { type: 'audio/ogg', rate: 24000 };
}

function encodingOf(format: AudioFormat): AudioEncoding {
  return format.type === 'audio/ogg' ? 'ogg_opus' : 'pcm16';
}

/** A spoken item of a response: its round (-1 for a filler), the model's text and what was heard. */
interface SpokenEntry {
  item: MessageItem;
  round: number;
  raw: string;
  spoken: SpokenItem;
}

/**
 * The model's messages cut to what the user heard: a reply interrupted (or
 * truncated by the client) keeps the words that played, so the model knows
 * what was actually said. Records which message holds each spoken item.
 */
function keepHeard(
  messages: ChatMessage[],
  entries: readonly SpokenEntry[],
  truncations: ReadonlyMap<string, string>,
  registry: Map<string, SpokenRound>,
): ChatMessage[] {
  const byRound = new Map<number, SpokenEntry[]>();
  for (const e of entries) {
    if (e.round < 0) continue;
    byRound.set(e.round, [...(byRound.get(e.round) ?? []), e]);
  }
  const out = [...messages];
  const used = new Set<ChatMessage>();
  for (const list of byRound.values()) {
    const raw = list.map((e) => e.raw).join('');
    const message = out.find((m) => m.role === 'assistant' && !used.has(m) && m.content === raw);
    if (!message) continue;
    used.add(message);
    const round: SpokenRound = { message, items: [] };
    let whole = true;
    for (const e of list) {
      const cut = truncations.get(e.item.id);
      if (cut !== undefined) {
        e.item.content = [{ type: 'output_audio', transcript: cut }];
        e.item.status = 'incomplete';
      }
      if (cut !== undefined || e.spoken.interrupted) whole = false;
      round.items.push({ item: e.item, transcript: cut ?? e.spoken.transcript });
      registry.set(e.item.id, round);
    }
    if (whole) continue;
    const heard = round.items
      .map((i) => i.transcript)
      .filter(Boolean)
      .join(' ');
    if (heard === '' && !('tool_calls' in message) && !('function_call' in message)) {
      out.splice(out.indexOf(message), 1);
      continue;
    }
    message.content = heard;
  }
  return out;
}

/**
 * Tool filler lines ("Let me check that…"): spoken when a tool with a
 * filler has not finished after its `afterMs`, dropped when its result
 * comes first. At most one per round.
 */
class FillerTimers {
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

/** A chat message as plain role and text (Unmute's chat history shape). */
function plainMessage(m: ChatMessage): { role: string; content: string } {
  const c = m.content;
  if (typeof c === 'string') return { role: m.role, content: c };
  if (Array.isArray(c)) {
    return {
      role: m.role,
      content: c.map((p) => ('text' in p && typeof p.text === 'string' ? p.text : '')).join(''),
    };
  }
  return { role: m.role, content: '' };
}

/**
 * Where a spoken response's time to first audio went: STT (end of speech →
 * transcript), LLM (request → the first clause complete), TTS (clause → its
 * first audio), and what is left: Troupe's own share.
 */
function voiceTimings(
  response: ActiveResponse,
  speech: SpeechOutput,
  requestAt: number | undefined,
): VoiceTimings {
  const { firstTextAt, firstEngineAudioAt } = speech.timings;
  const stt = response.sttMs ?? 0;
  const llm = requestAt !== undefined && firstTextAt !== undefined ? firstTextAt - requestAt : null;
  const tts =
    firstTextAt !== undefined && firstEngineAudioAt !== undefined
      ? firstEngineAudioAt - firstTextAt
      : null;
  const total = response.firstAudioMs;
  return {
    stt_ms: response.sttMs === undefined ? null : round(stt),
    llm_ms: llm === null ? null : round(llm),
    tts_ms: tts === null ? null : round(tts),
    troupe_ms:
      total === undefined || llm === null || tts === null
        ? null
        : round(Math.max(0, total - stt - llm - tts)),
  };
}
