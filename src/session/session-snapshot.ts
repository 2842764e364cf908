/**
 * A session as data, for the resume store and tests: a copy, its JSON, or
 * its head and parts (the history's groups as their own JSON, so a store
 * appends a turn rather than rewrite the conversation). Read from the live
 * parts at the call; the character states as JSON keeps them.
 */
import type { Logger } from 'pino';
import type { BackgroundCalls } from '../tools/background.js';
import type { Conversation } from './conversation.js';
import type { SessionState } from './session-state.js';
import { StateSaver } from './state-json.js';

/** What a snapshot is read from. */
export interface SnapshotSource {
  /** The session's state but its conversation. */
  state: Omit<SessionState, 'conversation'>;
  background: BackgroundCalls;
  conversation: Conversation;
  /** The character serving now (whose state is `state.characterState`). */
  character: () => string;
  log: () => Logger;
}

/** Snapshots of one session. */
export class SessionSnapshots {
  readonly #o: SnapshotSource;
  readonly #saver = new StateSaver();

  constructor(source: SnapshotSource) {
    this.#o = source;
  }

  /** A copy of the state: the session's to keep. */
  copy(): SessionState {
    return structuredClone(this.#live());
  }

  text(): string {
    return JSON.stringify(this.#live());
  }

  /** The head (all but the history's groups) as JSON, and each group's JSON. */
  parts(): { head: string; parts: string[] } {
    const live = this.#live();
    const { history } = live.conversation;
    const parts = this.#o.conversation.groupsJson();
    const conversation = { ...live.conversation, history: { ...history, groups: [] } };
    return { head: JSON.stringify({ ...live, conversation }), parts };
  }

  /** The state as it is now, sharing the live conversation: copy or serialise it at once. */
  #live(): SessionState {
    const { state, background, conversation } = this.#o;
    const running = background.pending();
    const pending = running.length > 0 ? { background: running } : {};
    const states = this.#saver.save(state, this.#o.character(), this.#o.log());
    return { ...state, ...pending, ...states, conversation: conversation.toState() };
  }
}
