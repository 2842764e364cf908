/**
 * A conversation as data: the one plain, typed object a session's snapshot
 * is, which round-trips through JSON (`snapshot()` / `restoreSession`).
 */
import type { ChatMessage } from '../llm/chunk.js';
import type { BackgroundPending } from '../tools/background.js';
import type { VadSettings } from './audio-input.js';
import type { ClientTool, GaSessionSettings, Item, ToolChoice } from './events.js';
import type { AudioEncoding } from './voice-settings.js';

/** The snapshot format; a restore refuses any other. */
export const SNAPSHOT_VERSION = 1;

/** Server VAD settings of a session (`turn_detection`), with Realtime's two flags. */
export interface TurnSettings extends VadSettings {
  createResponse: boolean;
  interruptResponse: boolean;
  /** `idle_timeout_ms`: input audio without speech after a response before the server answers it; absent/null = off. */
  idleTimeoutMs?: number | null;
}

/** What `session.update` sets (null = not set: the character's or engine's default). */
export interface SettingsState {
  instructions: string | null;
  tools: ClientTool[];
  toolChoice: ToolChoice;
  temperature: number | null;
  maxOutputTokens: number | 'inf';
  voice: string | null;
  outputModalities: Array<'text' | 'audio'>;
  inputEncoding: AudioEncoding;
  outputEncoding: AudioEncoding;
  /** Server VAD; null = the client commits turns. */
  turnDetection: TurnSettings | null;
  /** Unmute's frontend is sent the chat history after each change. */
  shareHistory: boolean;
  /** GA settings shown back as given (absent in older snapshots: the GA defaults). */
  ga?: GaSessionSettings;
  /** Whether the character's greeting opens the conversation; absent = on. */
  greeting?: boolean;
}

/** A chat message by its place in history: group, then message index. */
export interface MessagePlace {
  group: number;
  message: number;
}

/** Items and messages, in groups (see `History`), as data. */
export interface HistoryState {
  groups: Array<{ items: Item[]; messages: ChatMessage[] }>;
  /** Items that stand for exactly one message (deletable), with that message's place. */
  singles: Array<{ item: string } & MessagePlace>;
  /**
   * A response's assistant message items (deletable when no response runs),
   * with the place of the model's message that holds their words; `message`
   * null: one the model does not read. Absent: none (older states have none).
   */
  replies?: Array<{ item: string; group: number; message: number | null }>;
}

/** The conversation: history, client calls awaiting output, the greeting. */
export interface ConversationState {
  history: HistoryState;
  /** Client-side calls awaiting `function_call_output`, with the message that made each. */
  pendingCalls: Array<{ callId: string; name: string; owner: MessagePlace | null }>;
  /** The greeting item, and whether it has been spoken (a voice session speaks it once). */
  greeting: { itemId: string; spoken: boolean } | null;
  /**
   * A reply under way when the state was written, as history would keep it
   * if it were cut then (items `incomplete`): a restore adds it to the
   * exchange at `group` (its place in `history.groups`). Absent: none.
   */
  reply?: { group: number; messages: ChatMessage[]; items: Item[] };
}

/** Everything a conversation is; `JSON.parse(JSON.stringify(state))` is the same state. */
export interface SessionState {
  version: typeof SNAPSHOT_VERSION;
  id: string;
  /** The character serving the session and its tool variant. */
  character: string;
  variant: string;
  /** The prompt generator's output when the conversation began (it may depend on the time). */
  systemPrompt: string;
  /** Passed to the prompt generator. */
  metadata: Record<string, unknown>;
  /** The characters' per-session state (`ctx.session.state`): JSON values only. */
  characterState: Record<string, unknown>;
  /**
   * After a handoff: the `ctx.session.state` of each other character that
   * served this session, by id, restored if the user is handed back. Absent
   * until the first handoff (older snapshots have none).
   */
  characterStates?: Record<string, Record<string, unknown>>;
  /**
   * Background tool calls running when the snapshot was written (absent:
   * none). A restored session takes over those still running in its process
   * and ends the others as interrupted.
   */
  background?: BackgroundPending[];
  /** Responses run so far (log field `turn`). */
  turns: number;
  settings: SettingsState;
  conversation: ConversationState;
}
