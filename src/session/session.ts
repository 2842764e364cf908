/**
 * The session: a small dispatcher that owns one conversation's parts and the
 * character serving it, and routes each validated client event to its part.
 */
import type { Logger } from 'pino';
import { openConversation, type CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError, TroupeError } from '../errors.js';
import type { LlmClient } from '../llm/client.js';
import type { SessionMetrics } from '../metrics/index.js';
import { Conversation } from './conversation.js';
import type { ClientEvent, ResponseOptions, ServerEvent, SessionUpdate } from './events.js';
import {
  audioUnsupported,
  finishedMcpCall,
  itemNotFound,
  newId,
  responseOptionNotOffered,
} from './items.js';
import { ResponseQueue, type ResponseKind } from './response-queue.js';
import {
  runGreeting,
  runResponse,
  type ResponseContext,
  type SessionSettings,
} from './response-runner.js';
import { SessionConfig, defaultSettings, type VoiceDefaults } from './session-settings.js';
import { SNAPSHOT_VERSION, type SessionState } from './session-state.js';
import { VoiceInput } from './voice-input.js';
import { VoiceOutput } from './voice-output.js';
import type { SessionVoice } from './voice-settings.js';

export type { SessionSettings } from './response-runner.js';
export type { VoiceDefaults } from './session-settings.js';
export type { SessionState } from './session-state.js';

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
  /**
   * Called after a change that matters to a stored snapshot: items, settings,
   * character, or a response's end (never per delta). Keep it cheap; read
   * `session.snapshot()` when it suits.
   */
  onChange?: (session: Session) => void;
}

/** Options of {@link restoreSession}: a session's, its character and variant taken from the snapshot. */
export type RestoreOptions = Omit<SessionOptions, 'character' | 'variant' | 'id' | 'metadata'>;

/** What a session exposes to the server. */
export interface Session {
  readonly id: string;
  /** The character serving the session now. */
  readonly character: LoadedCharacter;
  /** Whether a response is running (or waiting to). */
  readonly busy: boolean;
  /** Counts changes that matter to a snapshot (see `SessionOptions.onChange`). */
  readonly version: number;
  /** Sends `session.created`, the items (a restored session's too), and the greeting. */
  start(): void;
  /** Handles one validated client event; never throws (errors become `error` events). */
  handle(event: ClientEvent, receivedAt?: number): Promise<void>;
  /**
   * Applies a voice frontend's defaults before its first event is handled
   * (the unmute dialect: Ogg/Opus both ways, spoken replies).
   */
  configureVoice(defaults: VoiceDefaults): void;
  /** Everything the conversation is, as plain JSON-safe data (a detached copy). */
  snapshot(): SessionState;
  /** The same as JSON text, written straight from the live state (no copy first): for stores. */
  snapshotText(): string;
  /** Resolves when no response is running. */
  idle(): Promise<void>;
  /** Stops the response in flight (if any) and records the session's end. */
  close(): void;
}

/** A snapshot that cannot be restored here (another format, an unknown character). */
export class SnapshotError extends TroupeError {
  override name = 'SnapshotError';
  constructor(message: string) {
    super('E_SNAPSHOT', message);
  }
}

function open(
  character: LoadedCharacter,
  sessionId: string,
  metadata: Record<string, unknown>,
  variant?: string,
): Promise<CharacterOpening> {
  return openConversation(character, {
    now: new Date(),
    sessionId,
    metadata,
    ...(variant !== undefined ? { variant } : {}),
  });
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
  const metadata = options.metadata ?? {};
  const opening = await open(options.character, options.id, metadata, options.variant);
  return new ConversationSession(options, options.character, opening, {
    version: SNAPSHOT_VERSION,
    id: options.id,
    character: options.character.id,
    variant: opening.variant,
    systemPrompt: opening.systemPrompt,
    metadata,
    characterState: {},
    turns: 0,
    settings: defaultSettings(options.voice),
    conversation: null,
  });
}

/**
 * Rebuilds a session from its snapshot (in this process or another): same
 * id, character, variant, system prompt, settings, items and state; the next
 * LLM request is the one the original would have sent. Call `start()` to
 * announce it to the (reconnected) client.
 *
 * @example
 * const session = await restoreSession(JSON.parse(stored), { characters, llm, settings, send, log });
 */
export async function restoreSession(
  snapshot: SessionState,
  options: RestoreOptions,
): Promise<Session> {
  if (snapshot?.version !== SNAPSHOT_VERSION) {
    throw new SnapshotError(
      `Session snapshot version ${String(snapshot?.version)} cannot be restored; this server reads version ${SNAPSHOT_VERSION}.`,
    );
  }
  const state = structuredClone(snapshot);
  const character = options.characters.get(state.character);
  if (!character) {
    throw new SnapshotError(
      `Session snapshot names character "${state.character}", which this server does not have; available: ${options.characters.ids().join(', ')}.`,
    );
  }
  const opening = await open(character, state.id, state.metadata, state.variant);
  // The prompt as the conversation began: a generator that reads the clock would differ now.
  opening.systemPrompt = state.systemPrompt;
  return new ConversationSession(
    { ...options, id: state.id, character },
    character,
    opening,
    state,
  );
}

function activeResponse(activeId: string, eventId: string | null): ProtocolError {
  return new ProtocolError(
    'conversation_already_has_active_response',
    `Conversation already has an active response in progress: ${activeId}. Wait until the response is finished before creating a new one.`,
    { eventId },
  );
}

/** The session state a new conversation starts from (its conversation comes with the greeting). */
type OpeningState = Omit<SessionState, 'conversation'> & {
  conversation: SessionState['conversation'] | null;
};

/** The dispatcher: owns the parts and the character serving now; routes events to parts. */
class ConversationSession implements Session {
  readonly id: string;
  readonly #o: SessionOptions;
  readonly #state: OpeningState;
  readonly #openedAt = performance.now();
  #character: LoadedCharacter;
  #opening: CharacterOpening;
  #log: Logger;
  #closed = false;
  #version = 0;
  readonly #config: SessionConfig;
  readonly #queue = new ResponseQueue(() => newId('resp'));
  readonly #conversation: Conversation;
  readonly #voiceOut: VoiceOutput | undefined;
  readonly #voiceIn: VoiceInput | undefined;
  readonly #ctx: ResponseContext;

  constructor(
    options: SessionOptions,
    character: LoadedCharacter,
    opening: CharacterOpening,
    state: OpeningState,
  ) {
    this.id = options.id;
    this.#o = options;
    this.#state = state;
    this.#character = character;
    this.#opening = opening;
    this.#log = options.log.child({ character: character.id });
    const kit = options.voice;
    this.#config = new SessionConfig(state.settings, kit);
    this.#conversation = new Conversation(
      {
        send: options.send,
        log: () => this.#log,
        content: this.#content,
        responseLastItemId: () => this.#queue.active?.lastItemId?.(),
      },
      state.conversation ?? undefined,
    );
    this.#conversation.setTurnSettings(opening.turn);
    if (!state.conversation) this.#conversation.addGreeting(character);
    // The conversation part holds it from here; a snapshot asks the part.
    state.conversation = null;
    this.#voiceOut = kit?.tts
      ? new VoiceOutput({
          kit,
          send: options.send,
          config: this.#config,
          character: () => this.#character,
          metrics: options.metrics?.voice,
        })
      : undefined;
    this.#ctx = this.#responseContext();
    this.#voiceIn = kit ? this.#voiceInput(kit) : undefined;
    options.metrics?.active.inc();
    options.metrics?.total.inc({ character: character.id });
  }

  get character(): LoadedCharacter {
    return this.#character;
  }

  get busy(): boolean {
    return this.#queue.busy;
  }

  get version(): number {
    return this.#version;
  }

  start(): void {
    this.#send({ type: 'session.created', session: this.#sessionObject() });
    this.#conversation.announce();
  }

  configureVoice(defaults: VoiceDefaults): void {
    this.#config.applyVoiceDefaults(defaults);
    this.#voiceIn?.configure({ inputEncoding: true, turnDetection: false });
    // The greeting waits for the frontend's first session.update: it may pick another character.
  }

  snapshot(): SessionState {
    return structuredClone({ ...this.#state, conversation: this.#conversation.toState() });
  }

  snapshotText(): string {
    return JSON.stringify({ ...this.#state, conversation: this.#conversation.toState() });
  }

  async idle(): Promise<void> {
    await this.#queue.idle();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue.close();
    this.#voiceIn?.close();
    this.#voiceOut?.close();
    this.#o.metrics?.active.dec();
    this.#o.metrics?.duration.observe((performance.now() - this.#openedAt) / 1000);
  }

  async handle(event: ClientEvent, receivedAt = performance.now()): Promise<void> {
    if (this.#closed) return;
    const eventId = event.event_id ?? null;
    try {
      const problem = await this.#route(event, eventId, receivedAt);
      if (problem) this.#fail(problem);
    } catch (err) {
      // A bug here must not end the session: tell the client, log the stack.
      this.#log.error({ err, event: event.type }, 'event handling failed');
      this.#fail(
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

  /** Routes one event to the part that owns it; returns the error to send, if any. */
  async #route(
    event: ClientEvent,
    eventId: string | null,
    receivedAt: number,
  ): Promise<ProtocolError | undefined> {
    const conversation = this.#conversation;
    switch (event.type) {
      case 'session.update':
        return this.#update(event.session, eventId);
      case 'conversation.item.create':
        return this.#changedUnless(
          conversation.create(event.item, event.previous_item_id, eventId),
        );
      case 'conversation.item.retrieve': {
        // An item of the running response (clients retrieve an mcp_call as it starts).
        const live = this.#queue.active?.findItem?.(event.item_id);
        if (!live) return conversation.retrieve(event.item_id, eventId);
        this.#send({ type: 'conversation.item.retrieved', item: live.item });
        if (finishedMcpCall(live.item)) {
          // See Conversation.retrieve: a finished call is said to be done again.
          this.#send({ type: 'conversation.item.done', ...live });
        }
        return undefined;
      }
      case 'conversation.item.delete':
        return this.#changedUnless(
          conversation.delete(event.item_id, this.#queue.active !== undefined, eventId),
        );
      case 'conversation.item.truncate':
        return this.#truncate(event, eventId);
      case 'response.create':
        return this.#createResponse(event.response ?? {}, eventId, receivedAt);
      case 'response.cancel':
        return this.#cancelResponse(event.response_id, eventId);
      case 'input_audio_buffer.append':
      case 'input_audio_buffer.commit':
      case 'input_audio_buffer.clear': {
        const voiceIn = this.#voiceIn;
        if (!voiceIn) {
          return new ProtocolError(
            'audio_not_supported',
            `${event.type}: this server takes no audio (no speech engines are configured); send conversation.item.create with input_text.`,
            { eventId },
          );
        }
        if (event.type === 'input_audio_buffer.append') return voiceIn.append(event.audio, eventId);
        if (event.type === 'input_audio_buffer.commit') return voiceIn.commit(eventId);
        voiceIn.clear();
        return undefined;
      }
    }
  }

  // ── wiring ──────────────────────────────────────────────────────────────

  #send = (event: ServerEvent): void => this.#o.send(event);

  #content = (text: string): string | { chars: number } =>
    this.#o.logContent ? text : { chars: text.length };

  #fail(err: ProtocolError): void {
    this.#send({ type: 'error', error: err.payload });
  }

  /** Counts a change that matters to a snapshot and tells the listener. */
  #changed = (): void => {
    this.#version++;
    try {
      this.#o.onChange?.(this);
    } catch (err) {
      // A store that fails must not fail the event or the response that changed things.
      this.#log.error({ err }, 'change listener failed');
    }
  };

  #changedUnless(problem: ProtocolError | undefined): ProtocolError | undefined {
    if (!problem) this.#changed();
    return problem;
  }

  /** `unmute.additional_outputs`: the chat history as the model will see it. */
  #shareHistory = (): void => {
    if (!this.#config.current.shareHistory) return;
    const system = this.#config.systemPrompt(this.#opening);
    this.#send({
      type: 'unmute.additional_outputs',
      args: { chat_history: this.#conversation.plainHistory(system) },
    });
  };

  #sessionObject() {
    return this.#config.sessionObject(this.id, this.#character, this.#opening);
  }

  #responseContext(): ResponseContext {
    const o = this.#o;
    return {
      sessionId: this.id,
      send: o.send,
      settings: o.settings,
      llm: o.llm,
      log: () => this.#log,
      character: () => this.#character,
      opening: () => this.#opening,
      characterState: this.#state.characterState,
      config: this.#config,
      conversation: this.#conversation,
      voice: this.#voiceOut,
      metrics: o.metrics,
      content: this.#content,
      nextTurn: () => ++this.#state.turns,
      shareHistory: this.#shareHistory,
      changed: this.#changed,
    };
  }

  #voiceInput(kit: SessionVoice): VoiceInput {
    return new VoiceInput({
      kit,
      send: this.#o.send,
      log: () => this.#log,
      content: this.#content,
      config: this.#config,
      conversation: this.#conversation,
      metrics: this.#o.metrics?.voice,
      responding: () => this.#queue.active !== undefined,
      bargeIn: () => {
        const stopped = this.#queue.stop('turn_detected');
        if (!stopped) return;
        this.#o.metrics?.voice.bargeIns.inc({ character: this.#character.id });
        this.#log.info({ response: stopped.id }, 'interrupted by the user');
        this.#send({ type: 'unmute.interrupted_by_vad' });
      },
      respond: async (speechEndedAt, sttMs) => {
        if (this.#closed) return;
        const outcome = this.#request('voice', {}, speechEndedAt, sttMs);
        if (outcome.outcome !== 'refused') await outcome.started;
      },
      changed: () => {
        this.#shareHistory();
        this.#changed();
      },
    });
  }

  // ── responses ───────────────────────────────────────────────────────────

  /** Asks the queue for a conversation response; a refusal is the caller's to tell. */
  #request(kind: ResponseKind, r: ResponseOptions, receivedAt: number, sttMs?: number) {
    let queued = false;
    const outcome = this.#queue.request({
      kind,
      ...(sttMs !== undefined ? { sttMs } : {}),
      run: (response) => {
        // Calls the client never answered get a stand-in, so history stays valid.
        this.#conversation.settlePendingCalls();
        // A client's response queued behind the greeting is timed from its start;
        // a voice turn from the end of speech (its wait is the user's wait).
        const from = queued && kind === 'client' ? performance.now() : receivedAt;
        return runResponse(this.#ctx, response, r, from);
      },
      onError: (err) => this.#log.error({ err }, 'response failed unexpectedly'),
    });
    queued = outcome.outcome === 'queued';
    return outcome;
  }

  /** A voice session hears the greeting spoken, once, before anything else is said. */
  #maybeSpeakGreeting(): void {
    if (!this.#voiceOut || this.#queue.busy || !this.#conversation.greetingToSpeak()) return;
    if (!this.#config.current.outputModalities.includes('audio')) return;
    this.#queue.request({
      kind: 'greeting',
      run: (response) => runGreeting(this.#ctx, response),
      onError: (err) => this.#log.error({ err }, 'greeting failed unexpectedly'),
    });
  }

  #createResponse(
    r: ResponseOptions,
    eventId: string | null,
    receivedAt: number,
  ): ProtocolError | undefined {
    const inTheWay = this.#queue.refusal('client');
    if (inTheWay !== undefined) return activeResponse(inTheWay, eventId);
    if (r.output_modalities?.includes('audio') && !this.#o.voice?.tts) {
      return audioUnsupported('response.output_modalities', eventId);
    }
    const notOffered = responseOptionNotOffered(r, eventId);
    if (notOffered) return notOffered;
    if (typeof r.tool_choice === 'object') {
      const names = [
        ...this.#character.toolNames,
        ...this.#config.current.tools.map((t) => t.name),
      ];
      if (!names.includes(r.tool_choice.name)) {
        return new ProtocolError(
          'invalid_value',
          `response.create: response.tool_choice.name: no tool "${r.tool_choice.name}"; tools: ${names.join(', ') || 'none'}.`,
          { param: 'response.tool_choice.name', eventId },
        );
      }
    }
    const outcome = this.#request('client', r, receivedAt);
    return outcome.outcome === 'refused' ? activeResponse(outcome.activeId, eventId) : undefined;
  }

  #cancelResponse(
    responseId: string | undefined,
    eventId: string | null,
  ): ProtocolError | undefined {
    const active = this.#queue.active;
    if (!active) {
      return new ProtocolError(
        'response_cancel_not_active',
        'response.cancel: there is no active response to cancel.',
        { eventId },
      );
    }
    if (responseId !== undefined && responseId !== active.id) {
      return new ProtocolError(
        'invalid_value',
        `response.cancel: response_id: the active response is ${active.id}, not ${responseId}.`,
        { param: 'response_id', eventId },
      );
    }
    this.#queue.stop('client_cancelled');
    return undefined;
  }

  // ── session.update and the character ───────────────────────────────────

  async #update(u: SessionUpdate, eventId: string | null): Promise<ProtocolError | undefined> {
    let next = this.#character;
    if (u.character !== undefined && u.character !== next.id) {
      const blocking = this.#queue.blocking();
      if (blocking) {
        return new ProtocolError(
          'conversation_already_has_active_response',
          `session.update: cannot change character while response ${blocking} is in progress; wait for response.done or send response.cancel.`,
          { param: 'session.character', eventId },
        );
      }
      const found = this.#o.characters.get(u.character);
      if (found === undefined) {
        return new ProtocolError(
          'unknown_character',
          `session.update: no character "${u.character}"; available: ${this.#o.characters.ids().join(', ')}.`,
          { param: 'session.character', eventId },
        );
      }
      next = found;
    }
    const problem = this.#config.check(u, next, eventId);
    if (problem) return problem;
    if (next !== this.#character) await this.#changeCharacter(next);
    const change = this.#config.apply(u);
    this.#voiceIn?.configure(change);
    this.#send({ type: 'session.updated', session: this.#sessionObject() });
    this.#changed();
    this.#maybeSpeakGreeting();
    return undefined;
  }

  /** A new character starts a new conversation: its prompt, tools, greeting and state. */
  async #changeCharacter(next: LoadedCharacter): Promise<void> {
    // The old character's greeting makes no sense any more.
    if (this.#queue.stop('client_cancelled')) await this.#queue.idle();
    const state = this.#state;
    const opening = await open(next, this.id, state.metadata);
    this.#conversation.restart(next);
    for (const key of Object.keys(state.characterState)) delete state.characterState[key];
    this.#character = next;
    this.#opening = opening;
    state.character = next.id;
    state.variant = opening.variant;
    state.systemPrompt = opening.systemPrompt;
    this.#conversation.setTurnSettings(opening.turn);
    this.#config.resetInstructions();
    this.#log = this.#o.log.child({ character: next.id });
    this.#log.info({ from: this.#o.character.id, variant: opening.variant }, 'character changed');
    this.#o.metrics?.total.inc({ character: next.id });
    this.#conversation.announce();
  }

  // ── conversation.item.truncate ──────────────────────────────────────────

  /** The client played only part of a spoken item: history keeps what was heard. */
  #truncate(
    event: { item_id: string; content_index: number; audio_end_ms: number },
    eventId: string | null,
  ): ProtocolError | undefined {
    const active = this.#queue.active;
    const speech = active?.speech ?? this.#voiceOut?.lastSpeech;
    const heard = speech?.heardUntil(event.item_id, event.audio_end_ms);
    if (heard === undefined) {
      if (!this.#conversation.find(event.item_id)) {
        return itemNotFound('conversation.item.truncate', event.item_id, eventId);
      }
      return new ProtocolError(
        'invalid_value',
        `conversation.item.truncate: item "${event.item_id}" has no audio to truncate (only spoken assistant messages do).`,
        { param: 'item_id', eventId },
      );
    }
    if (active?.speech === speech) active!.truncations.set(event.item_id, heard);
    this.#conversation.cutToHeard(event.item_id, heard);
    this.#send({
      type: 'conversation.item.truncated',
      item_id: event.item_id,
      content_index: event.content_index,
      audio_end_ms: event.audio_end_ms,
    });
    this.#changed();
    return undefined;
  }
}
