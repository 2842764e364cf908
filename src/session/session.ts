/**
 * The session: a small dispatcher that wires one conversation's parts (see
 * docs/sessions.md) and routes each validated client event to the part that owns it.
 */
import type { Logger } from 'pino';
import { openConversation, type CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError, TroupeError } from '../errors.js';
import type { LlmClient } from '../llm/client.js';
import type { SessionMetrics } from '../metrics/index.js';
import { Conversation } from './conversation.js';
import type { ClientEvent, ResponseOptions, ServerEvent, SessionUpdate } from './events.js';
import { audioUnsupported, itemNotFound, newId } from './items.js';
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
  return wire(options, options.character, opening, {
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
  return wire({ ...options, id: state.id, character }, character, opening, state);
}

/** A session's parts, wired; `state.conversation` null = a new conversation. */
function wire(
  options: SessionOptions,
  firstCharacter: LoadedCharacter,
  firstOpening: CharacterOpening,
  state: Omit<SessionState, 'conversation'> & { conversation: SessionState['conversation'] | null },
): Session {
  const { id, send } = options;
  const logContent = options.logContent ?? false;
  const metrics = options.metrics;
  const kit = options.voice;
  const openedAt = performance.now();
  let character = firstCharacter;
  let opening = firstOpening;
  let log = options.log.child({ character: character.id });
  let closed = false;
  let version = 0;

  const content = (text: string): string | { chars: number } =>
    logContent ? text : { chars: text.length };
  const fail = (err: ProtocolError): void => send({ type: 'error', error: err.payload });
  const config = new SessionConfig(state.settings, kit);
  const queue = new ResponseQueue(() => newId('resp'));
  const conversation = new Conversation(
    {
      send,
      log: () => log,
      content,
      responseLastItemId: () => queue.active?.lastItemId?.(),
    },
    state.conversation ?? undefined,
  );
  conversation.setTurnSettings(opening.turn);
  if (!state.conversation) conversation.addGreeting(character);
  const voiceOut = kit?.tts
    ? new VoiceOutput({ kit, send, config, character: () => character, metrics: metrics?.voice })
    : undefined;

  function changed(): void {
    version++;
    options.onChange?.(session);
  }

  function shareHistory(): void {
    if (!config.current.shareHistory) return;
    send({
      type: 'unmute.additional_outputs',
      args: { chat_history: conversation.plainHistory(config.systemPrompt(opening)) },
    });
  }

  const ctx: ResponseContext = {
    sessionId: id,
    send,
    settings: options.settings,
    llm: options.llm,
    log: () => log,
    character: () => character,
    opening: () => opening,
    characterState: state.characterState,
    config,
    conversation,
    voice: voiceOut,
    metrics,
    content,
    nextTurn: () => ++state.turns,
    shareHistory,
    changed,
  };

  /** Asks the queue for a conversation response; the refusal is the caller's to tell. */
  function request(kind: ResponseKind, r: ResponseOptions, receivedAt: number, sttMs?: number) {
    return queue.request({
      kind,
      ...(sttMs !== undefined ? { sttMs } : {}),
      run: (response) => {
        // Calls the client never answered get a stand-in, so history stays valid.
        conversation.settlePendingCalls();
        return runResponse(ctx, response, r, receivedAt);
      },
      onError: (err) => log.error({ err }, 'response failed unexpectedly'),
    });
  }

  const voiceIn = kit
    ? new VoiceInput({
        kit,
        send,
        log: () => log,
        content,
        config,
        conversation,
        metrics: metrics?.voice,
        responding: () => queue.active !== undefined,
        bargeIn: () => {
          const stopped = queue.stop('turn_detected');
          if (!stopped) return;
          metrics?.voice.bargeIns.inc({ character: character.id });
          log.info({ response: stopped.id }, 'interrupted by the user');
          send({ type: 'unmute.interrupted_by_vad' });
        },
        respond: async (speechEndedAt, sttMs) => {
          if (closed) return;
          const outcome = request('voice', {}, speechEndedAt, sttMs);
          if (outcome.outcome !== 'refused') await outcome.started;
        },
        changed: () => {
          shareHistory();
          changed();
        },
      })
    : undefined;

  /** A voice session hears the greeting spoken, once, before anything else is said. */
  function maybeSpeakGreeting(): void {
    if (!voiceOut || queue.busy || !conversation.greetingToSpeak()) return;
    if (!config.current.outputModalities.includes('audio')) return;
    queue.request({
      kind: 'greeting',
      run: (response) => runGreeting(ctx, response),
      onError: (err) => log.error({ err }, 'greeting failed unexpectedly'),
    });
  }

  metrics?.active.inc();
  metrics?.total.inc({ character: character.id });

  // ── session.update ──────────────────────────────────────────────────────

  async function update(u: SessionUpdate, eventId: string | null): Promise<void> {
    const next =
      u.character !== undefined && u.character !== character.id
        ? options.characters.get(u.character)
        : character;
    if (u.character !== undefined && u.character !== character.id) {
      const blocking = queue.blocking();
      if (blocking) {
        return fail(
          new ProtocolError(
            'conversation_already_has_active_response',
            `session.update: cannot change character while response ${blocking} is in progress; wait for response.done or send response.cancel.`,
            { param: 'session.character', eventId },
          ),
        );
      }
      if (next === undefined) {
        return fail(
          new ProtocolError(
            'unknown_character',
            `session.update: no character "${u.character}"; available: ${options.characters.ids().join(', ')}.`,
            { param: 'session.character', eventId },
          ),
        );
      }
    }
    const problem = config.check(u, next!, eventId);
    if (problem) return fail(problem);
    if (next !== character) await changeCharacter(next!);
    const change = config.apply(u);
    voiceIn?.configure(change);
    send({ type: 'session.updated', session: config.sessionObject(id, character, opening) });
    changed();
    maybeSpeakGreeting();
  }

  /** A new character starts a new conversation: its prompt, tools, greeting and state. */
  async function changeCharacter(next: LoadedCharacter): Promise<void> {
    // The old character's greeting makes no sense any more.
    if (queue.stop('client_cancelled')) await queue.idle();
    const nextOpening = await open(next, id, state.metadata);
    conversation.restart(next);
    for (const key of Object.keys(state.characterState)) delete state.characterState[key];
    character = next;
    opening = nextOpening;
    state.character = next.id;
    state.variant = nextOpening.variant;
    state.systemPrompt = nextOpening.systemPrompt;
    conversation.setTurnSettings(nextOpening.turn);
    config.resetInstructions();
    log = options.log.child({ character: next.id });
    log.info({ from: options.character.id, variant: opening.variant }, 'character changed');
    metrics?.total.inc({ character: next.id });
    conversation.announce();
  }

  // ── response.create / response.cancel ──────────────────────────────────

  function createResponse(r: ResponseOptions, eventId: string | null, receivedAt: number): void {
    if (r.output_modalities?.includes('audio') && !kit?.tts) {
      return fail(audioUnsupported('response.output_modalities', eventId));
    }
    if (typeof r.tool_choice === 'object') {
      const names = [...character.toolNames, ...config.current.tools.map((t) => t.name)];
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
    const outcome = request('client', r, receivedAt);
    if (outcome.outcome === 'refused') {
      fail(
        new ProtocolError(
          'conversation_already_has_active_response',
          `Conversation already has an active response in progress: ${outcome.activeId}. Wait until the response is finished before creating a new one.`,
          { eventId },
        ),
      );
    }
  }

  function cancelResponse(responseId: string | undefined, eventId: string | null): void {
    const active = queue.active;
    if (!active) {
      return fail(
        new ProtocolError(
          'response_cancel_not_active',
          'response.cancel: there is no active response to cancel.',
          { eventId },
        ),
      );
    }
    if (responseId !== undefined && responseId !== active.id) {
      return fail(
        new ProtocolError(
          'invalid_value',
          `response.cancel: response_id: the active response is ${active.id}, not ${responseId}.`,
          { param: 'response_id', eventId },
        ),
      );
    }
    queue.stop('client_cancelled');
  }

  // ── conversation.item.truncate ──────────────────────────────────────────

  function truncate(
    event: { item_id: string; content_index: number; audio_end_ms: number },
    eventId: string | null,
  ): void {
    const active = queue.active;
    const speech = active?.speech ?? voiceOut?.lastSpeech;
    const heard = speech?.heardUntil(event.item_id, event.audio_end_ms);
    if (heard === undefined) {
      if (!conversation.find(event.item_id)) {
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
    conversation.cutToHeard(event.item_id, heard);
    send({
      type: 'conversation.item.truncated',
      item_id: event.item_id,
      content_index: event.content_index,
      audio_end_ms: event.audio_end_ms,
    });
    changed();
  }

  // ── dispatch ────────────────────────────────────────────────────────────

  /** A change was made unless there is a problem to tell. */
  function changedUnless(problem: ProtocolError | undefined): ProtocolError | undefined {
    if (!problem) changed();
    return problem;
  }

  /** Routes one event to its part; returns the error to send, if any. */
  async function route(
    event: ClientEvent,
    eventId: string | null,
    receivedAt: number,
  ): Promise<ProtocolError | void> {
    switch (event.type) {
      case 'session.update':
        return update(event.session, eventId);
      case 'conversation.item.create':
        return changedUnless(conversation.create(event.item, event.previous_item_id, eventId));
      case 'conversation.item.retrieve':
        return conversation.retrieve(event.item_id, eventId);
      case 'conversation.item.delete':
        return changedUnless(
          conversation.delete(event.item_id, queue.active !== undefined, eventId),
        );
      case 'conversation.item.truncate':
        return truncate(event, eventId);
      case 'response.create':
        return createResponse(event.response ?? {}, eventId, receivedAt);
      case 'response.cancel':
        return cancelResponse(event.response_id, eventId);
      case 'input_audio_buffer.append':
      case 'input_audio_buffer.commit':
      case 'input_audio_buffer.clear':
        if (!voiceIn) {
          return new ProtocolError(
            'audio_not_supported',
            `${event.type}: this server takes no audio (no speech engines are configured); send conversation.item.create with input_text.`,
            { eventId },
          );
        }
        if (event.type === 'input_audio_buffer.append') return voiceIn.append(event.audio, eventId);
        if (event.type === 'input_audio_buffer.clear') return voiceIn.clear();
        return voiceIn.commit(eventId);
    }
  }

  async function handle(event: ClientEvent, receivedAt = performance.now()): Promise<void> {
    if (closed) return;
    const eventId = event.event_id ?? null;
    try {
      const problem = await route(event, eventId, receivedAt);
      if (problem) fail(problem);
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

  const session: Session = {
    id,
    get character() {
      return character;
    },
    get busy() {
      return queue.busy;
    },
    get version() {
      return version;
    },
    start() {
      send({ type: 'session.created', session: config.sessionObject(id, character, opening) });
      conversation.announce();
    },
    handle,
    configureVoice(defaults: VoiceDefaults) {
      config.applyVoiceDefaults(defaults);
      voiceIn?.configure({ inputEncoding: true, turnDetection: false });
      // The greeting waits for the frontend's first session.update: it may pick another character.
    },
    snapshot() {
      return structuredClone({ ...state, conversation: conversation.toState() });
    },
    async idle() {
      await queue.idle();
    },
    close() {
      if (closed) return;
      closed = true;
      queue.close();
      voiceIn?.close();
      voiceOut?.close();
      metrics?.active.dec();
      metrics?.duration.observe((performance.now() - openedAt) / 1000);
    },
  };
  return session;
}
