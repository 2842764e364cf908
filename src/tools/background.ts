/**
 * Background tool calls: a `background: true` tool answers the model at once
 * ("started") and runs beside the conversation under its own, longer timeout;
 * its one outcome is reported when it ends. Closing stops them all; an
 * interruption (barge-in, `response.cancel`) stops only the cancellable ones.
 */
import { TroupeError } from '../errors.js';
import {
  DEFAULT_BACKGROUND_TOOL_TIMEOUT_MS,
  MAX_BACKGROUND_CALLS_PER_SESSION,
} from './constants.js';
import {
  runPreparedCall,
  type BackgroundStarter,
  type ExecutorOptions,
  type PreparedCall,
} from './executor.js';
import type { ToolContext, ToolLogger, ToolResult } from './types.js';

/** A background call's progress line (`ctx.progress(text)`). */
export interface BackgroundProgress {
  callId: string;
  name: string;
  text: string;
  /** Whether the tool asked for its progress to be spoken. */
  speak: boolean;
}

/** A background call that ended: its one outcome, and the call it answers. */
export interface BackgroundDone {
  result: ToolResult & { background: 'done' };
  /** The arguments as the model sent them. */
  arguments: string;
  /** The character that called it. */
  character?: string;
  /** Stopped because its conversation was replaced (`session.update {character}`): no history to join. */
  dropped?: boolean;
}

/** A background call still running: what a snapshot records of it. */
export interface BackgroundPending {
  callId: string;
  name: string;
  /** The arguments as the model sent them. */
  arguments: string;
  /** When it started, epoch ms. */
  startedAt: number;
  /** The character that called it (absent in older snapshots). */
  character?: string;
}

/** One running call; `owner` is the set that reports its end (it changes on {@link BackgroundCalls.adopt}). */
interface RunningCall {
  controller: AbortController;
  cancellable: boolean;
  pending: BackgroundPending;
  owner: BackgroundCalls;
  dropped: boolean;
  /** Progress reported before the client had the call's "started" result; `undefined` once it has. */
  held: BackgroundProgress[] | undefined;
}

/** Options of {@link BackgroundCalls}. */
export interface BackgroundCallsOptions {
  /** The session the calls belong to, when each starts (`ctx.session`). */
  session: () => ToolContext['session'];
  log: () => ToolLogger;
  /** Cap on each output the model sees, in UTF-8 bytes. @defaultValue 16384 */
  maxOutputBytes?: number;
  /** Calls that may run at once. @defaultValue 8 */
  maxRunning?: number;
  onProgress: (progress: BackgroundProgress) => void;
  /**
   * Hold each call's progress until {@link BackgroundCalls.announced} says the
   * client has its "started" result, so progress never arrives first (a tool
   * may report progress at once, before the result has gone out).
   * @defaultValue false
   */
  progressAfterStarted?: boolean;
  /** Called once per call that started, whatever its outcome: count and log it here. */
  onEnd?: (done: BackgroundDone) => void;
  /** Called once per call that started, after `onEnd` (unless {@link BackgroundCalls.park}ed). */
  onDone: (done: BackgroundDone) => void;
}

/** Why a background call was stopped: the session closed, or the user interrupted. */
export class BackgroundCancelledError extends TroupeError {
  override name = 'BackgroundCancelledError';
  constructor(reason: 'session_closed' | 'interrupted' | 'character_changed') {
    super('E_TOOL_CANCELLED', `background tool call stopped: ${reason.replace('_', ' ')}`);
  }
}

/** What the model is told when a background call starts. */
export function backgroundStartedText(name: string): string {
  return (
    `Started: ${name} is running in the background. Its result will come in a later message; ` +
    'tell the user you are on it and carry on meanwhile. Do not call it again for the same request.'
  );
}

/** One session's background calls. */
export class BackgroundCalls implements BackgroundStarter {
  readonly #o: BackgroundCallsOptions;
  readonly #running = new Map<string, RunningCall>();
  readonly #settled = new Set<Promise<void>>();
  #closed = false;
  /** Calls that ended before the client had their "started" result: their ends wait for it. */
  readonly #unannounced = new Map<string, { entry: RunningCall; done: BackgroundDone }>();
  /** After {@link park}: where outcomes go instead of `onDone`. */
  #parkedTo: ((done: BackgroundDone) => void) | undefined;

  constructor(options: BackgroundCallsOptions) {
    this.#o = options;
  }

  /** Calls running now. */
  get running(): number {
    return this.#running.size;
  }

  start(prepared: PreparedCall): { ok: true; output: string } | { ok: false; output: string } {
    const { call, tool } = prepared;
    const max = this.#o.maxRunning ?? MAX_BACKGROUND_CALLS_PER_SESSION;
    if (this.#closed) {
      return { ok: false, output: `Error: ${call.name} was not run: the session is closing.` };
    }
    if (this.#running.size >= max) {
      return {
        ok: false,
        output: `Error: ${call.name} was not run: ${max} background tasks are already running. Wait for one to finish, then call it again.`,
      };
    }
    const controller = new AbortController();
    const options: ExecutorOptions = {
      signal: controller.signal,
      session: this.#o.session(),
      log: this.#o.log(),
      ...(this.#o.maxOutputBytes !== undefined ? { maxOutputBytes: this.#o.maxOutputBytes } : {}),
    };
    const character = options.session.character;
    const entry: RunningCall = {
      controller,
      cancellable: tool.cancellable ?? false,
      pending: {
        callId: call.id,
        name: call.name,
        arguments: call.arguments,
        startedAt: Date.now(),
        character,
      },
      owner: this,
      dropped: false,
      held: this.#o.progressAfterStarted ? [] : undefined,
    };
    this.#running.set(call.id, entry);
    // Whatever `cancellable` says, the call's own signal is what stops it:
    // this class decides which stops reach it.
    const runnable = { ...prepared, tool: { ...tool, cancellable: true } };
    const speak = tool.speakProgress === true;
    const settled = runPreparedCall(runnable, options, performance.now(), {
      timeoutMs: tool.timeoutMs ?? DEFAULT_BACKGROUND_TOOL_TIMEOUT_MS,
      progress: (text) => {
        const progress = { callId: call.id, name: call.name, text, speak };
        if (entry.held) entry.held.push(progress);
        else entry.owner.#o.onProgress(progress);
      },
    }).then((result) =>
      entry.owner.#ended(entry, {
        result: { ...result, background: 'done' },
        arguments: call.arguments,
        character,
        ...(entry.dropped ? { dropped: true } : {}),
      }),
    );
    const tracked = settled.finally(() => this.#settled.delete(tracked));
    this.#settled.add(tracked);
    return { ok: true, output: backgroundStartedText(call.name) };
  }

  /**
   * The client has the call's "started" result: the progress held until now
   * goes out, then its end if it has ended, and the call's later progress
   * and end at once.
   */
  announced(callId: string): void {
    const entry = this.#running.get(callId);
    if (entry) this.#release(entry);
    const ended = this.#unannounced.get(callId);
    if (ended) this.#deliver(ended.entry, ended.done);
  }

  /**
   * The response that started calls has ended: whatever of them waits for a
   * "started" result goes out now, so nothing waits on one that never came.
   */
  responseEnded(): void {
    for (const entry of this.#running.values()) this.#release(entry);
    for (const { entry, done } of this.#unannounced.values()) this.#deliver(entry, done);
  }

  #release(entry: RunningCall): void {
    const held = entry.held;
    entry.held = undefined;
    for (const progress of held ?? []) entry.owner.#o.onProgress(progress);
  }

  #ended(entry: RunningCall, done: BackgroundDone): void {
    this.#running.delete(entry.pending.callId);
    // Done before the client heard it started: its end follows the "started" result.
    if (entry.held !== undefined && !this.#closed) {
      this.#unannounced.set(entry.pending.callId, { entry, done });
      return;
    }
    this.#deliver(entry, done);
  }

  /** A call's progress, if still held, then its end. */
  #deliver(entry: RunningCall, done: BackgroundDone): void {
    this.#unannounced.delete(entry.pending.callId);
    this.#release(entry);
    this.#o.onEnd?.(done);
    if (this.#parkedTo) this.#parkedTo(done);
    else this.#o.onDone(done);
  }

  /** The calls running now, as a snapshot records them. */
  pending(): BackgroundPending[] {
    return [...this.#running.values()].map((r) => ({ ...r.pending }));
  }

  /**
   * The session closes but may be resumed in this process: the calls run on
   * (no new ones start) and each outcome goes to `to` instead of `onDone`.
   */
  park(to: (done: BackgroundDone) => void): void {
    this.#closed = true;
    this.#parkedTo = to;
    this.responseEnded();
  }

  /** Takes over the calls `other` is running: their outcomes come here from now on. */
  adopt(other: BackgroundCalls): BackgroundPending[] {
    const taken: BackgroundPending[] = [];
    for (const [id, entry] of other.#running) {
      other.#running.delete(id);
      entry.owner = this;
      this.#running.set(id, entry);
      // Started before this client came: nothing of it is to wait for here.
      this.#release(entry);
      taken.push({ ...entry.pending });
    }
    for (const s of other.#settled) {
      const tracked = s.finally(() => this.#settled.delete(tracked));
      this.#settled.add(tracked);
    }
    return taken;
  }

  /** The user interrupted (barge-in, `response.cancel`): cancellable calls stop; returns how many. */
  interrupt(): number {
    let stopped = 0;
    for (const { controller, cancellable } of this.#running.values()) {
      if (!cancellable || controller.signal.aborted) continue;
      controller.abort(new BackgroundCancelledError('interrupted'));
      stopped++;
    }
    return stopped;
  }

  /**
   * The conversation is replaced (a new character starts afresh): every call
   * stops, and each outcome is reported as `dropped` (no history to join).
   */
  drop(): number {
    for (const entry of this.#running.values()) {
      entry.dropped = true;
      if (!entry.controller.signal.aborted)
        entry.controller.abort(new BackgroundCancelledError('character_changed'));
    }
    return this.#running.size;
  }

  /** The session closes: every call stops (each still reports its `cancelled` outcome). */
  close(): void {
    this.#closed = true;
    this.responseEnded();
    for (const { controller } of this.#running.values()) {
      if (!controller.signal.aborted)
        controller.abort(new BackgroundCancelledError('session_closed'));
    }
  }

  /** Resolves when every call started so far has reported its outcome. */
  async settled(): Promise<void> {
    while (this.#settled.size > 0) await Promise.all([...this.#settled]);
  }
}

/** Starts the message that hands a background result to the model (the simulator looks for it). */
export const BACKGROUND_RESULT_PREFIX = '[Background tool result]';

/**
 * The user-role message that hands a background call's outcome to the model
 * (`handedOverBy`: the character that started it, when another serves now).
 * A `user` message is the one form every chat template takes anywhere in a
 * conversation (many refuse a `system` message after the first, and an
 * invented assistant/tool pair would claim a call the model never made).
 */
export function backgroundResultMessage(
  result: Pick<ToolResult, 'callId' | 'name' | 'outcome' | 'output'>,
  handedOverBy?: string,
): string {
  const how = result.outcome === 'ok' ? 'finished' : `ended (${result.outcome})`;
  // After a handoff the character serving did not start it: say who did.
  const whose = handedOverBy
    ? `work that character "${handedOverBy}" started before the conversation was handed to you`
    : 'the work you started earlier';
  return (
    `${BACKGROUND_RESULT_PREFIX} ${result.name} (call ${result.callId}) ${how}:\n${result.output}\n` +
    `(Not from the user: ${whose}. Tell the user what it found, briefly.)`
  );
}
