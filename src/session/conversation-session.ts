/**
 * The dispatcher behind a session: owns one conversation's parts and the
 * character serving it, and routes each validated client event to its part
 * (created and restored by session.ts).
 */
import type { Logger } from 'pino';
import type { CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';
import { Conversation } from './conversation.js';
import { SessionHandoffs, handoffFailed, swapCharacterState } from './handoff.js';
import { SessionSnapshots } from './session-snapshot.js';
import type { ChatMessage } from '../llm/chunk.js';
import type { ClientEvent, ResponseOptions, ServerEvent, SessionUpdate } from './events.js';
import { conversationId, finishedMcpCall, newId } from './items.js';
import { FOLLOW_UP_ANSWER, McpFollowUps, owesReply } from './mcp-follow-ups.js';
import { answerEmpty } from './response-report.js';
import type { BackgroundCalls } from '../tools/background.js';
import {
  resumeBackground,
  sessionBackgroundCalls,
  speakProgress,
  type SessionBackgroundOptions,
} from './background-results.js';
import { unknownCall } from './item-checks.js';
import { activeResponse, checkResponse, tooManyOutOfBand } from './response-checks.js';
import { cancelResponse, ResponseQueue, type ResponseKind } from './response-queue.js';
import { runGreeting, runResponse, type ResponseContext } from './response-runner.js';
import { SessionConfig, type VoiceDefaults } from './session-settings.js';
import type { SessionState } from './session-state.js';
import type { RunningResponse } from './response-queue.js';
import type { HandoffRequest } from '../characters/handoffs.js';
import { askedCharacter, openCharacter, updatedOpening } from './character-opening.js';
import { truncateItem } from './item-truncate.js';
import { VoiceInput, audioBufferEvent } from './voice-input.js';
import { VoiceOutput } from './voice-output.js';
import type { SessionVoice } from './voice-settings.js';
import type { Session, SessionOptions } from './session.js';

/**
 * How long a restored session's items wait for the client's first event
 * before they are announced anyway (see {@link ConversationSession.start}).
 */
export const RESTORED_ITEMS_WAIT_MS = 100;

/** The session state a new conversation starts from (its conversation comes with the greeting). */
export type OpeningState = Omit<SessionState, 'conversation'> & {
  conversation: SessionState['conversation'] | null;
};

/** The dispatcher: owns the parts and the character serving now; routes events to parts. */
export class ConversationSession implements Session {
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
  readonly #handoffs: SessionHandoffs;
  readonly #background: BackgroundCalls;
  readonly #backgroundOptions: SessionBackgroundOptions;
  /** A restored session's snapshot: the background calls it listed as running. */
  readonly #resumed: SessionState['background'] | undefined;
  /** Background outcomes in history that no response has started since (the follow-up tells them). */
  #untold = 0;
  /** A restored session's announcement, waiting for the client's first event (or its timer). */
  #restoredWait: NodeJS.Timeout | undefined;
  readonly #followUps = new McpFollowUps();
  readonly #snapshots: SessionSnapshots;

  constructor(
    options: SessionOptions,
    character: LoadedCharacter,
    opening: CharacterOpening,
    state: OpeningState,
  ) {
    this.id = options.id;
    // Every part sends through it: it sees what the client sees.
    if (options.toolCallsShown !== false) {
      options = { ...options, send: this.#followUps.watch(options.send) };
    }
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
        responseHas: (itemId) => this.#queue.active?.findItem?.(itemId) !== undefined,
        responseCheckpoint: () => this.#queue.active?.checkpoint?.(),
      },
      state.conversation ?? undefined,
    );
    this.#conversation.setTurnSettings(opening.turn);
    this.#resumed = state.conversation ? (state.background ?? []) : undefined;
    delete state.background;
    if (!state.conversation && state.settings.greeting !== false) {
      this.#conversation.addGreeting(character);
    }
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
    this.#handoffs = new SessionHandoffs({ characters: options.characters });
    this.#backgroundOptions = this.#backgroundCallOptions();
    this.#background = sessionBackgroundCalls(this.#backgroundOptions);
    this.#snapshots = new SessionSnapshots({
      state: this.#state,
      background: this.#background,
      conversation: this.#conversation,
      character: () => this.#character.id,
      log: () => this.#log,
    });
    this.#ctx = this.#responseContext();
    this.#voiceIn = kit ? this.#voiceInput(kit) : undefined;
    options.metrics?.active.inc();
    options.metrics?.total.inc({ character: character.id });
  }

  get character(): LoadedCharacter {
    return this.#character;
  }

  get busy(): boolean {
    return this.#queue.running;
  }

  get working(): boolean {
    return this.#queue.running || this.#background.running > 0;
  }

  get version(): number {
    return this.#version;
  }

  start(): void {
    this.#send({ type: 'session.created', session: this.#sessionObject() });
    if (this.#resumed === undefined) {
      this.#conversation.announce();
      // Spoken from the start (OpenAI's defaults): the greeting, if asked for, at once.
      if (this.#o.spokenByDefault) this.#maybeSpeakGreeting();
      return;
    }
    // A restored conversation is announced once the client has sent its
    // first event (or after a short wait), not in the same breath as the
    // handshake: the Agents SDK empties its history when its connect()
    // returns, which wiped items that arrived with the upgrade's answer.
    this.#restoredWait = setTimeout(() => this.#announceRestored(), RESTORED_ITEMS_WAIT_MS);
  }

  /** A restored session's items, then its background calls (once). */
  #announceRestored(): void {
    if (this.#restoredWait === undefined || this.#resumed === undefined) return;
    clearTimeout(this.#restoredWait);
    this.#restoredWait = undefined;
    this.#conversation.announce();
    this.#followUps.restored(owesReply(this.#conversation.items));
    const parked = this.#o.handover?.claim(this.id);
    resumeBackground(this.#backgroundOptions, this.#background, this.#resumed, parked);
  }

  configureVoice(defaults: VoiceDefaults): void {
    this.#config.applyVoiceDefaults(defaults);
    this.#voiceIn?.configure({ inputEncoding: true, turnDetection: false });
    // The greeting waits for the frontend's first session.update: it may pick another character.
  }

  // The session as data (a copy, its JSON, its head and parts): session-snapshot.ts.
  snapshot = (): SessionState => this.#snapshots.copy();
  snapshotText = (): string => this.#snapshots.text();
  snapshotParts = (): { head: string; parts: string[] } => this.#snapshots.parts();

  async idle(): Promise<void> {
    await this.#queue.idle();
  }

  close(options: { final?: boolean } = {}): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#restoredWait);
    this.#restoredWait = undefined;
    this.#queue.close();
    // A resume in this process takes over the calls still running; otherwise they stop.
    if (this.#o.handover && !options.final && this.#background.running > 0) {
      this.#o.handover.park(this.id, this.#background);
    } else this.#background.close();
    this.#voiceIn?.close();
    this.#voiceOut?.close();
    this.#o.metrics?.active.dec();
    this.#o.metrics?.duration.observe((performance.now() - this.#openedAt) / 1000);
  }

  async handle(event: ClientEvent, receivedAt = performance.now()): Promise<void> {
    if (this.#closed) return;
    // The client has its items before anything it sends is answered.
    this.#announceRestored();
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
      case 'conversation.item.create': {
        const unknown =
          event.item.type === 'function_call' &&
          unknownCall(event.item, this.#character, this.#config.current.tools, {
            event: 'conversation.item.create',
            at: 'item',
            eventId,
          });
        if (unknown) return unknown;
        return this.#changedUnless(
          conversation.create(event.item, event.previous_item_id, eventId),
        );
      }
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
      case 'conversation.item.delete': {
        // An item of the running response is not in the conversation yet, but it exists.
        const live = this.#queue.active?.findItem?.(event.item_id) !== undefined;
        return this.#changedUnless(
          conversation.delete(event.item_id, this.#queue.active !== undefined, eventId, live),
        );
      }
      case 'conversation.item.truncate':
        return truncateItem(
          {
            active: this.#queue.active,
            lastSpeech: this.#voiceOut?.lastSpeech,
            conversation,
            send: this.#send,
            changed: this.#clientChanged,
            stop: () => {
              this.#queue.stop('client_cancelled');
              this.#background.interrupt();
            },
          },
          event,
          eventId,
        );
      case 'response.create': {
        const answeredBy = this.#queue.busy ? undefined : this.#followUps.answered(event);
        if (answeredBy === undefined) {
          return this.#createResponse(event.response ?? {}, eventId, receivedAt);
        }
        return this.#answerEmpty(
          { troupe: FOLLOW_UP_ANSWER, answered_by: answeredBy },
          'response.create after tool calls that were answered already: answered empty',
        );
      }
      case 'response.cancel': {
        const stopped = cancelResponse(this.#queue, event.response_id, eventId);
        if (stopped instanceof ProtocolError) return stopped;
        if (stopped.kind !== 'out_of_band') this.#background.interrupt();
        return undefined;
      }
      case 'input_audio_buffer.append':
      case 'input_audio_buffer.commit':
      case 'input_audio_buffer.clear':
        return audioBufferEvent(this.#voiceIn, event, eventId);
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
  #changed = (settled = false): void => {
    this.#version++;
    try {
      this.#o.onChange?.(this, settled);
    } catch (err) {
      // A store that fails must not fail the event or the response that changed things.
      this.#log.error({ err }, 'change listener failed');
    }
  };

  /** A change the client made, acknowledged to it: stored at once. */
  #clientChanged = (): void => this.#changed(true);

  #changedUnless(problem: ProtocolError | undefined): ProtocolError | undefined {
    if (!problem) this.#clientChanged();
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
    const { metadata } = this.#state;
    return this.#config.sessionObject(this.id, this.#character, this.#opening, metadata);
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
      handoffs: this.#handoffs.forResponses(() => ({
        character: this.#character,
        toolset: this.#opening.toolset,
        clientTools: this.#config.current.tools,
        handedOff: this.#state.characterStates !== undefined,
      })),
      background: this.#background,
    };
  }

  #backgroundCallOptions(): SessionBackgroundOptions {
    return {
      send: this.#o.send,
      log: () => this.#log,
      character: () => this.#character,
      session: () => ({
        id: this.id,
        character: this.#character.id,
        state: this.#state.characterState,
      }),
      conversation: this.#conversation,
      metrics: this.#o.metrics,
      closed: () => this.#closed,
      followUp: () => {
        this.#untold++;
        this.#changed();
        this.#request('background', {}, performance.now());
      },
      speak: (text) =>
        speakProgress(
          {
            voice: this.#voiceOut,
            queue: this.#queue,
            userTurn: () => this.#voiceIn?.userTurn === true,
            audio: () => this.#config.current.outputModalities.includes('audio'),
            send: this.#o.send,
            log: () => this.#log,
            conversation: this.#conversation,
            changed: this.#changed,
          },
          this.id,
          text,
        ),
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
        this.#background.interrupt();
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
        this.#clientChanged();
      },
      // A background result held while the user spoke may be told now.
      userDone: () => this.#queue.resume(),
    });
  }

  // ── responses ───────────────────────────────────────────────────────────

  /** Asks the queue for a response; a refusal is the caller's to tell. */
  #request(
    kind: ResponseKind,
    r: ResponseOptions,
    receivedAt: number,
    sttMs?: number,
    input?: readonly ChatMessage[],
    heard?: Promise<boolean>,
  ) {
    let queued = false;
    const outcome = this.#queue.request({
      kind,
      ...(sttMs !== undefined ? { sttMs } : {}),
      // A background result is not told over the user's speech.
      ...(kind === 'background' ? { holdWhile: () => this.#voiceIn?.userTurn === true } : {}),
      run: async (response) => {
        // The user's words committed before the request are in what it reads;
        // speech without words leaves nothing to answer (the model would repeat itself).
        if (heard && !(await heard) && !response.stoppedBy) {
          return this.#answerEmpty(
            { troupe: 'nothing_heard' },
            'nothing heard: answered empty',
            response.id,
          );
        }
        // Beside the conversation: it reads stand-ins in a copy and changes nothing.
        if (kind === 'out_of_band') return runResponse(this.#ctx, response, r, receivedAt, input);
        // Any response that starts sees the background outcomes in history:
        // a follow-up with none left untold has nothing to say.
        const untold = this.#untold;
        this.#untold = 0;
        if (kind === 'background' && untold === 0) return;
        // Calls the client never answered get a stand-in, so history stays valid.
        this.#conversation.settlePendingCalls();
        // A client's response queued behind the greeting is timed from its start;
        // a voice turn from the end of speech (its wait is the user's wait).
        const from = queued && kind === 'client' ? performance.now() : receivedAt;
        if (kind !== 'handoff') this.#handoffs.newTurn();
        try {
          await runResponse(this.#ctx, response, r, from, input);
        } finally {
          this.#responseEnded();
        }
        const handoff = this.#handoffs.take();
        if (handoff) await this.#handOff(handoff, response, receivedAt);
      },
      onError: (err) => this.#log.error({ err }, 'response failed unexpectedly'),
    });
    queued = outcome.outcome === 'queued';
    return outcome;
  }

  /** An empty, completed response whose `metadata` says why; see {@link answerEmpty}. */
  #answerEmpty(metadata: Record<string, string>, why: string, id?: string): undefined {
    const target = { send: this.#send, log: this.#log, conversation: conversationId(this.id) };
    return answerEmpty(
      { ...target, modalities: this.#config.current.outputModalities },
      metadata,
      why,
      id,
    );
  }

  /** A conversation response ended: the user's silence is timed from here (`idle_timeout_ms`). */
  #responseEnded = (): void => this.#voiceIn?.responseEnded();

  /** A voice session hears the greeting spoken, once, before anything else is said. */
  #maybeSpeakGreeting(): void {
    if (!this.#voiceOut || this.#queue.busy || !this.#conversation.greetingToSpeak()) return;
    if (!this.#config.current.outputModalities.includes('audio')) return;
    if (this.#config.current.greeting === false) return;
    this.#queue.request({
      kind: 'greeting',
      run: (response) => runGreeting(this.#ctx, response).finally(this.#responseEnded),
      onError: (err) => this.#log.error({ err }, 'greeting failed unexpectedly'),
    });
  }

  #createResponse(
    r: ResponseOptions,
    eventId: string | null,
    receivedAt: number,
  ): ProtocolError | undefined {
    const kind: ResponseKind = r.conversation === 'none' ? 'out_of_band' : 'client';
    const inTheWay = this.#queue.refusal(kind);
    if (inTheWay !== undefined) {
      return kind === 'client'
        ? activeResponse(inTheWay, eventId)
        : tooManyOutOfBand(inTheWay, eventId);
    }
    const input = checkResponse(r, kind, {
      canSpeak: this.#o.voice?.tts != null,
      character: this.#character,
      clientTools: this.#config.current.tools,
      find: (id) => this.#conversation.find(id),
      turn: this.#opening.turn,
      transfers: this.#handoffs.transferNames(this.#character),
      eventId,
    });
    if (input instanceof ProtocolError) return input;
    const heard = input ? undefined : this.#voiceIn?.transcribed();
    const outcome = this.#request(kind, r, receivedAt, undefined, input, heard);
    return outcome.outcome === 'refused' ? activeResponse(outcome.activeId, eventId) : undefined;
  }

  // ── session.update and the character ───────────────────────────────────

  async #update(u: SessionUpdate, eventId: string | null): Promise<ProtocolError | undefined> {
    const next = askedCharacter(u.character, this.#character, {
      blocking: () => this.#queue.blocking(),
      characters: this.#o.characters,
      eventId,
    });
    if (next instanceof ProtocolError) return next;
    const problem = this.#config.check(u, next, eventId, this.#handoffs.transferNames(next));
    if (problem) return problem;
    const state = this.#state;
    const { variant, metadata } = state;
    const now = { sessionId: this.id, character: this.#character, variant, metadata };
    const opening = await updatedOpening(now, next, u.metadata, eventId, this.#log);
    if (opening instanceof ProtocolError) return opening;
    if (u.metadata !== undefined) state.metadata = u.metadata;
    const greeting = u.greeting ?? this.#config.current.greeting !== false;
    if (opening && next !== this.#character) await this.#changeCharacter(next, greeting, opening);
    else if (opening) this.#reprompted(opening);
    const change = this.#config.apply(u);
    if (!greeting) this.#greetingOff();
    this.#voiceIn?.configure(change);
    this.#send({ type: 'session.updated', session: this.#sessionObject() });
    this.#clientChanged();
    this.#maybeSpeakGreeting();
    return undefined;
  }

  /** The greeting turned off: one playing stops where it is, one not yet heard leaves the conversation. */
  #greetingOff(): void {
    if (this.#queue.active?.kind === 'greeting') this.#queue.stop('client_cancelled');
    this.#conversation.dropGreeting();
  }

  /** A new character starts a new conversation: its prompt, tools, greeting and state. */
  async #changeCharacter(
    next: LoadedCharacter,
    greeting: boolean,
    opening: CharacterOpening,
  ): Promise<void> {
    // The old character's greeting makes no sense any more.
    if (this.#queue.stop('client_cancelled')) await this.#queue.idle();
    // Its background calls belonged to the conversation that ends here: they stop.
    this.#background.drop();
    const state = this.#state;
    this.#conversation.restart(next, greeting);
    for (const key of Object.keys(state.characterState)) delete state.characterState[key];
    delete state.characterStates;
    this.#become(next, opening);
    this.#log.info({ from: this.#o.character.id, variant: opening.variant }, 'character changed');
    this.#o.metrics?.total.inc({ character: next.id });
    this.#conversation.announce();
  }

  /**
   * New metadata: the character serving goes on with its prompt made again
   * (a response under way keeps the one it started with; the next reads this).
   * The client's `instructions`, if any, still stand in for it.
   */
  #reprompted(opening: CharacterOpening): void {
    this.#opening = opening;
    this.#state.systemPrompt = opening.systemPrompt;
    this.#conversation.setTurnSettings(opening.turn);
    // Its values may be personal data: only how many keys it has is logged.
    const keys = Object.keys(this.#state.metadata).length;
    this.#log.info({ keys }, 'session metadata changed');
  }

  /** The character serving from now on: its prompt, tools and turn settings. */
  #become(next: LoadedCharacter, opening: CharacterOpening): void {
    const state = this.#state;
    this.#character = next;
    this.#opening = opening;
    state.character = next.id;
    state.variant = opening.variant;
    state.systemPrompt = opening.systemPrompt;
    this.#conversation.setTurnSettings(opening.turn);
    this.#config.resetInstructions();
    this.#log = this.#o.log.child({ character: next.id });
  }

  /**
   * The model transferred the user (`transfer_to_<id>`): the session switches
   * character in place. The conversation carries over; each character keeps
   * its own `ctx.session.state`; the new character's voice speaks from now on
   * (a voice the client chose is dropped with the old character). Then the
   * new character answers the user's message in a response of its own,
   * unless the user interrupted or the client still owes tool outputs.
   */
  async #handOff(h: HandoffRequest, response: RunningResponse, receivedAt: number): Promise<void> {
    const next = this.#o.characters.get(h.to);
    if (this.#closed || !next) {
      if (!next) this.#log.warn({ to: h.to }, 'handoff target is gone');
      return;
    }
    const from = this.#character;
    const state = this.#state;
    let opening: CharacterOpening;
    try {
      opening = await openCharacter(next, this.id, state.metadata);
    } catch (err) {
      // Its prompt generator failed now (it passed at load): the old character stays.
      this.#log.error({ err, to: next.id }, 'handoff failed');
      this.#fail(handoffFailed(next.id, from.name));
      return;
    }
    if (this.#closed) return;
    swapCharacterState(state, from.id, next.id);
    this.#become(next, opening);
    this.#config.resetForHandoff(next, this.#handoffs.transferNames(next));
    // The old character's greeting, if still unspoken, is not said any more.
    this.#conversation.markGreetingSpoken();
    this.#log.info(
      { from: from.id, reason: this.#content(h.reason), call: h.callId },
      'character handed off',
    );
    this.#o.metrics?.handoffs?.inc({ from: from.id, to: next.id });
    this.#send({ type: 'session.updated', session: this.#sessionObject() });
    this.#changed();
    if (response.stoppedBy || this.#conversation.hasPendingCalls()) return;
    this.#request('handoff', {}, receivedAt);
  }
}
