/**
 * One round's stream read into turn events: the assembler, the prompt-mode
 * filter, and the sink that takes a text chunk where the transport reads it
 * (no async step per chunk when the turn hands its text to `onTextDelta`).
 */
import { StreamAssembler, type AssemblerEvent } from './assembler.js';
import type { ChunkLike, ChunkSink } from './chunk.js';
import { PromptToolCallFilter, type PromptCall } from './prompt-tools.js';
import type { RoundTiming, TurnEvent } from './turn-runner.js';
import { epochNow, type TurnState } from './turn-state.js';

/** Options of {@link RoundReader}. */
export interface RoundReaderOptions {
  turn: TurnState;
  round: number;
  timing: RoundTiming;
  /** The turn's signal: a stopped turn takes no more chunks. */
  signal: AbortSignal;
  /** Whether a call's id is taken (see `StreamAssembler`). */
  idTaken: (id: string) => boolean;
  /** Tool calls come as lines in the text (prompt mode): filter them out. */
  promptTools: boolean;
  /** The turn hands its text to `onTextDelta`: text needs no yield, so a sink takes it. */
  textTaken: boolean;
}

/** A chunk the stream yielded, as far as the sink had taken it. */
export interface BegunChunk {
  /** The event the sink stopped at, to yield first. */
  first?: TurnEvent;
  /** The chunk's output still to turn into events ({@link RoundReader.event}), in order. */
  rest: AssemblerEvent[];
}

/**
 * Reads one round. The turn runner gives the transport {@link sink}, then,
 * for each chunk the stream yields, calls {@link begin} and yields
 * {@link BegunChunk.first} and the {@link event} of each of the rest.
 *
 * @example
 * const reader = new RoundReader({ turn, round, timing, signal, idTaken, promptTools: false, textTaken: true });
 * for await (const chunk of llm.stream(request, signal, reader.sink)) {
 *   const begun = reader.begin(chunk);
 *   if (begun === null) break;
 *   if (begun.first) yield begun.first;
 *   for (const ev of begun.rest) { const e = reader.event(ev); if (e) yield e; }
 * }
 */
export class RoundReader {
  readonly asm: StreamAssembler;
  readonly filter: PromptToolCallFilter | undefined;
  /** Calls the prompt-mode filter found in the text. */
  readonly promptCalls: PromptCall[] = [];
  /** Takes chunks as the transport reads them; undefined when text must be yielded. */
  readonly sink: ChunkSink | undefined;
  readonly #o: RoundReaderOptions;
  /**
   * What the sink began and left for the stream's reader: an event to yield
   * and the chunk's output after it, or the sink's own failure.
   */
  #left: { event: TurnEvent; rest: AssemblerEvent[] } | { failure: unknown } | undefined;

  constructor(options: RoundReaderOptions) {
    this.#o = options;
    this.asm = new StreamAssembler({ idTaken: options.idTaken });
    this.filter = options.promptTools ? new PromptToolCallFilter() : undefined;
    this.sink = options.textTaken ? this.#take : undefined;
  }

  /**
   * A chunk the stream yielded: what of it is left to yield, or null when
   * the turn was stopped (the reader stops reading).
   *
   * @throws what the sink failed with on this chunk.
   */
  begin(chunk: ChunkLike): BegunChunk | null {
    const left = this.#left;
    if (left !== undefined) {
      // The sink took this chunk as far as its first event to yield.
      this.#left = undefined;
      if ('failure' in left) throw left.failure;
      return { first: left.event, rest: left.rest };
    }
    // Stopped: the turn stamps the round's end itself.
    if (this.#o.signal.aborted) return null;
    return { rest: this.#open(chunk) };
  }

  /** A piece of a chunk's output as a turn event, or nothing to yield. */
  event(ev: AssemblerEvent): TurnEvent | undefined {
    const { round } = this.#o;
    switch (ev.type) {
      case 'text': {
        let visible = ev.delta;
        if (this.filter) {
          const out = this.filter.push(ev.delta);
          visible = out.text;
          this.promptCalls.push(...out.calls);
        }
        return this.#o.turn.say(round, visible);
      }
      case 'reasoning':
        return { type: 'reasoning.delta', round, delta: ev.delta };
      case 'tool_call.start':
        return { type: 'tool_call.start', round, callId: ev.id, name: ev.name };
      case 'tool_call.arguments':
        return { type: 'tool_call.arguments.delta', round, callId: ev.id, delta: ev.delta };
    }
  }

  /** The chunk's output, its arrival stamped. */
  #open(chunk: ChunkLike): AssemblerEvent[] {
    const timing = this.#o.timing;
    timing.lastChunkAt = epochNow();
    const events = this.asm.push(chunk);
    // The first token, not the first chunk: servers open with a role-only chunk.
    if (events.length > 0) timing.firstTokenAt ??= timing.lastChunkAt;
    return events;
  }

  /** The sink: the chunk whole when nothing of it needs a yield, else up to what does. */
  #take = (chunk: ChunkLike): boolean => {
    if (this.#o.signal.aborted) return false;
    try {
      const events = this.#open(chunk);
      for (let i = 0; i < events.length; i++) {
        const event = this.event(events[i]!);
        if (event !== undefined) {
          this.#left = { event, rest: events.slice(i + 1) };
          return false;
        }
      }
      return true;
    } catch (err) {
      this.#left = { failure: err };
      return false;
    }
  };
}
