/**
 * The session: what a session is to the server (its options and interface),
 * opening one for a character and restoring one from its snapshot. The
 * dispatcher itself is ConversationSession (conversation-session.ts).
 */
import type { Logger } from 'pino';
import type { LoadedCharacter } from '../characters/types.js';
import { TroupeError } from '../errors.js';
import type { LlmClient } from '../llm/client.js';
import type { SessionMetrics } from '../metrics/index.js';
import type { ClientEvent, ServerEvent } from './events.js';
import type { BackgroundHandover } from './background-handover.js';
import type { SessionSettings } from './response-runner.js';
import { defaultSettings, type VoiceDefaults } from './session-settings.js';
import { SNAPSHOT_VERSION, type SessionState } from './session-state.js';
import type { SessionVoice } from './voice-settings.js';
import { openCharacter as open } from './character-opening.js';
import { ConversationSession } from './conversation-session.js';

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
   * Whether the character's greeting opens the conversation (`?greeting=0`
   * turns it off before anything is sent). @defaultValue true
   */
  greeting?: boolean;
  /**
   * Replies are spoken unless the client asks for text, as OpenAI's API
   * starts (`?compat=openai`); only where the server can speak. @defaultValue false
   */
  spokenByDefault?: boolean;
  /**
   * Whether the client is shown the server's tool calls (`mcp_call` items):
   * not in OpenAI's compatibility mode. Only a client that saw a call sends
   * the follow-up `response.create` it is answered for (see
   * mcp-follow-ups.ts). @defaultValue true
   */
  toolCallsShown?: boolean;
  /**
   * Called after a change that matters to a stored snapshot: items, settings,
   * character, or a response's end (never per delta). Keep it cheap; read
   * `session.snapshot()` when it suits. `settled` is true where the change
   * is acknowledged as it is made: a turn's end (just before its
   * `response.done` goes out) and what the client changed (an item it
   * created, deleted or truncated, a transcribed utterance, its settings),
   * its acknowledgement sent in the same turn of the event loop: the moment
   * to store at once, so a process killed right after loses nothing the
   * client heard was done. A round of the server's own tool calls with its
   * results, in a reply still under way (`replySaveMs`), is settled too: the
   * tools have done their work.
   */
  onChange?: (session: Session, settled?: boolean) => void;
  /** Where a closing session's background calls wait for a resume in this process; absent = they stop. */
  handover?: BackgroundHandover;
}

/** Options of {@link restoreSession}: a session's, its character and variant taken from the snapshot. */
export type RestoreOptions = Omit<SessionOptions, 'character' | 'variant' | 'id' | 'metadata'>;

/** What a session exposes to the server. */
export interface Session {
  readonly id: string;
  /** The character serving the session now. */
  readonly character: LoadedCharacter;
  /** Whether a response is running (or waiting to), out-of-band ones included. */
  readonly busy: boolean;
  /** Whether the session works for its client: a response, or a background tool call, runs. */
  readonly working: boolean;
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
  /**
   * The same as JSON text in parts: the history's groups (a turn's items and
   * messages each), and the rest with no groups; put back with `joinParts`.
   */
  snapshotParts(): { head: string; parts: string[] };
  /** Resolves when no response is running. */
  idle(): Promise<void>;
  /**
   * Stops the response in flight (if any) and records the session's end.
   * Background calls run on for a resume in this process (see `handover`)
   * unless `final` (the client said it is done): then they stop.
   */
  close(options?: { final?: boolean }): void;
}

/** A snapshot that cannot be restored here (another format, an unknown character). */
export class SnapshotError extends TroupeError {
  override name = 'SnapshotError';
  constructor(message: string) {
    super('E_SNAPSHOT', message);
  }
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
    settings: {
      ...defaultSettings(options.voice),
      ...(options.greeting === false ? { greeting: false } : {}),
      ...(options.spokenByDefault && options.voice?.tts ? { outputModalities: ['audio'] } : {}),
    },
    conversation: null,
  });
}

/**
 * Rebuilds a session from its snapshot (in this process or another): same
 * id, character, variant, system prompt, settings, items and state; the next
 * LLM request is the one the original would have sent. Call `start()` to
 * announce it to the (reconnected) client. The snapshot is copied unless
 * `copy` is false: then it must be the caller's to give (parsed for this).
 *
 * @example
 * const session = await restoreSession(JSON.parse(stored), { characters, llm, settings, send, log }, { copy: false });
 */
export async function restoreSession(
  snapshot: SessionState,
  options: RestoreOptions,
  { copy = true }: { copy?: boolean } = {},
): Promise<Session> {
  if (snapshot?.version !== SNAPSHOT_VERSION) {
    throw new SnapshotError(
      `Session snapshot version ${String(snapshot?.version)} cannot be restored; this server reads version ${SNAPSHOT_VERSION}.`,
    );
  }
  // The session takes the state as its own: a copy, unless the caller gives
  // it up (a snapshot just parsed from a store, used by nothing else).
  const state = copy ? structuredClone(snapshot) : snapshot;
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
