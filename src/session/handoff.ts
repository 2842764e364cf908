/**
 * A session's handoffs: the transfer tools its character is offered, the
 * limit per user turn, the transfer the model asked for, and what the next
 * character sees of the conversation (its own tools' calls, not others').
 */
import {
  handoffToolName,
  transferTool,
  withTransfers,
  type HandoffRequest,
} from '../characters/handoffs.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';
import type { ChatMessage } from '../llm/chunk.js';
import type { Toolset } from '../tools/library.js';
import type { SessionState } from './session-state.js';

/** Most transfers per user turn; past it the transfer tool answers the model with an error. */
export const MAX_HANDOFFS_PER_TURN = 2;

/** What the model is told when an out-of-band response calls a transfer tool. */
export const OUT_OF_BAND_TRANSFER =
  'this reply is out of band (outside the conversation) and cannot hand the user over; answer it yourself';

/** Options of {@link SessionHandoffs}. */
export interface SessionHandoffsOptions {
  /** The characters there are now (a transfer to one that is gone is not offered). */
  characters: { get(id: string): LoadedCharacter | undefined };
  /** @defaultValue {@link MAX_HANDOFFS_PER_TURN} */
  maxPerTurn?: number;
}

/** The character serving a session, as a response's view of history needs it. */
export interface ServingCharacter {
  character: LoadedCharacter;
  toolset: Toolset;
  /** The client's own tools (`session.update`): their calls stay in view. */
  clientTools: readonly { name: string }[];
  /** Whether the conversation was handed off since it began. */
  handedOff: boolean;
}

/** What a response asks of a session's handoffs. */
export interface ResponseHandoffs {
  /** Out of band, the transfer tools are offered but refuse (the character serving stays). */
  toolset(character: LoadedCharacter, base: Toolset, outOfBand: boolean): Toolset;
  /** Whether the model asked for a transfer this response (the turn ends after that round). */
  requested(): boolean;
  /** What the character serving now sees of history (all of it before any handoff). */
  view(messages: ChatMessage[]): ChatMessage[];
}

/** The handoffs of one session. */
export class SessionHandoffs {
  readonly #o: SessionHandoffsOptions;
  readonly #max: number;
  /** Transfers since the user last asked for something. */
  #count = 0;
  #pending: HandoffRequest | undefined;

  constructor(options: SessionHandoffsOptions) {
    this.#o = options;
    this.#max = options.maxPerTurn ?? MAX_HANDOFFS_PER_TURN;
  }

  /** The user asked for something new (a response not started by a handoff): the count starts again. */
  newTurn(): void {
    this.#count = 0;
  }

  /** Whether the model asked for a transfer this response (the turn ends after that round). */
  get requested(): boolean {
    return this.#pending !== undefined;
  }

  /** The transfer asked for, taken (once). */
  take(): HandoffRequest | undefined {
    const pending = this.#pending;
    this.#pending = undefined;
    return pending;
  }

  /**
   * The character's tools and a `transfer_to_<id>` tool for each character
   * it hands off to that is there now (one removed on reload is withdrawn).
   */
  toolset(character: LoadedCharacter, base: Toolset, outOfBand = false): Toolset {
    if (character.handoffs.length === 0) return base;
    const transfers = [];
    for (const id of character.handoffs) {
      const target = this.#o.characters.get(id);
      if (!target) continue;
      transfers.push(
        transferTool(target, (reason, callId) => {
          // Outside the conversation: it answers, but the character serving stays.
          if (outOfBand) throw new Error(OUT_OF_BAND_TRANSFER);
          return this.#transfer(character.id, target, reason, callId);
        }),
      );
    }
    return withTransfers(base, transfers);
  }

  /**
   * What a response asks of the handoffs: the tools offered, whether a
   * transfer was asked, and what the character serving (`serving()`, read as
   * each response runs) sees of history: all of it before any handoff, then
   * only calls of the tools it is offered.
   */
  forResponses(serving: () => ServingCharacter): ResponseHandoffs {
    return {
      toolset: (character, base, outOfBand) => this.toolset(character, base, outOfBand),
      requested: () => this.requested,
      view: (messages) => {
        const now = serving();
        if (!now.handedOff) return messages;
        return visibleTo(messages, now.character, now.toolset, now.clientTools);
      },
    };
  }

  /** The `transfer_to_<id>` tools `character` is offered now. */
  transferNames(character: LoadedCharacter): string[] {
    return character.handoffs.filter((id) => this.#o.characters.get(id)).map(handoffToolName);
  }

  #transfer(from: string, target: LoadedCharacter, reason: string, callId: string): string {
    if (this.#pending) {
      throw new Error(
        `this reply already hands the user to ${this.#pending.to}; make one transfer per reply`,
      );
    }
    if (this.#count >= this.#max) {
      throw new Error(
        `the user was already handed over ${this.#count} times since their last message (the limit); answer them yourself`,
      );
    }
    if (!this.#o.characters.get(target.id)) {
      throw new Error(`${target.name} is not available now; answer the user yourself`);
    }
    this.#count++;
    this.#pending = { from, to: target.id, reason, callId };
    return `Transferred to ${target.name}.`;
  }
}

/**
 * What a character sees of a conversation that other characters had a part
 * in: user and assistant text as they were, and the calls of the tools it is
 * offered (its own, its transfers, the client's) with their results; calls
 * of tools it does not have (another character's, and the transfer that
 * brought it in) are left out, with their results, so the request never
 * names a tool it is not offered. Prompt-mode calls are text and stay.
 */
export function visibleTo(
  messages: readonly ChatMessage[],
  character: LoadedCharacter,
  toolset: Toolset,
  clientTools: readonly { name: string }[],
): ChatMessage[] {
  const offered = new Set(toolset.descriptions.map((d) => d.name));
  for (const id of character.handoffs) offered.add(handoffToolName(id));
  for (const t of clientTools) offered.add(t.name);
  const hidden = new Set<string>();
  const out: ChatMessage[] = [];
  for (const m of messages) {
    if (m.role === 'assistant' && m.tool_calls?.length) {
      const kept = m.tool_calls.filter((c) => offered.has(c.function.name));
      if (kept.length === m.tool_calls.length) {
        out.push(m);
        continue;
      }
      for (const c of m.tool_calls) if (!offered.has(c.function.name)) hidden.add(c.id);
      if (kept.length > 0) out.push({ ...m, tool_calls: kept });
      else if (m.content) out.push({ role: 'assistant', content: m.content });
      continue;
    }
    if (m.role === 'assistant' && m.function_call && !offered.has(m.function_call.name)) {
      if (m.content) out.push({ role: 'assistant', content: m.content });
      continue;
    }
    if (m.role === 'tool' && hidden.has(m.tool_call_id)) continue;
    if (m.role === 'function' && !offered.has(m.name)) continue;
    out.push(m);
  }
  return out;
}

/**
 * Puts the state of the character handing off aside (`characterStates`) and
 * gives the one taking over its own (empty the first time). The live
 * `characterState` object stays the same: tools hold it by reference.
 */
export function swapCharacterState(
  state: Pick<SessionState, 'characterState' | 'characterStates'>,
  from: string,
  to: string,
): void {
  const states = (state.characterStates ??= {});
  states[from] = { ...state.characterState };
  for (const key of Object.keys(state.characterState)) delete state.characterState[key];
  Object.assign(state.characterState, states[to] ?? {});
  delete states[to];
}

/** The error a client gets when the character taken over cannot start (its prompt generator failed). */
export function handoffFailed(to: string, stays: string): ProtocolError {
  return new ProtocolError(
    'handoff_failed',
    `The transfer to "${to}" failed: its system prompt could not be made. ${stays} goes on.`,
    { type: 'server_error', eventId: null },
  );
}
