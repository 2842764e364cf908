/**
 * One simulated user: a WebSocket session over the public protocol that
 * plays the scripted conversation turn after turn, typed or spoken, and
 * records what it measures into the pool's current recorder.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { epochNow, readStamps } from '../../src/testing/simulator/index.js';
import { encodePcm16Base64 } from '../../src/voice/audio/pcm.js';
import type { Recorder } from './recorder.js';
import type { ResumeLog } from './resume-log.js';
import { CONVERSATION } from './scenarios.js';

/** Audio frames a spoken session sends, like a microphone: 20 ms each. */
const FRAME_MS = 20;
const FRAME_SAMPLES = (24_000 * FRAME_MS) / 1000;
const SILENT_FRAME = encodePcm16Base64(new Int16Array(FRAME_SAMPLES));
/** How long the session may take to open and say `session.created`. */
const OPEN_TIMEOUT_MS = 15_000;

/** A spoken line: its audio at 24 kHz and where its last sound ends. */
export interface Utterance {
  pcm: Int16Array;
  endMs: number;
}

/** How a pool's sessions talk: the same for all of them. */
export interface SessionSettings {
  /** Server WebSocket URL (or, for direct sessions, the LLM's base URL). */
  url: string;
  /** Character id; null: the server's default. */
  character: string | null;
  /** Pause between a reply and the user's next line. */
  thinkMs: number;
  /**
   * Each pause is drawn evenly from `thinkMs` ± this. 0: every pause the
   * same, so sessions that started at the same moment stay in step for the
   * whole run (their turns come in waves).
   */
  thinkJitterMs: number;
  /** Longest a turn may take before it counts as a `timeout`. */
  turnTimeoutMs: number;
  /** Compare each reply with the script's (the load test runs the simulator). */
  checkText: boolean;
  /** Spoken sessions: the conversation's lines as audio; typed sessions: undefined. */
  speech?: readonly Utterance[];
  /** Spoken sessions: the server VAD's silence window. */
  silenceMs: number;
  /**
   * Sessions the server closes (1001 draining, 1006 gone, 1011, 1012)
   * reconnect with their resume token and carry on, recording here how long
   * each took (reconnect → first delta of the next reply) and how many failed.
   */
  resume?: ResumeLog;
}

/**
 * The pause before a session's next line: `thinkMs`, or a draw from
 * `thinkMs` ± `thinkJitterMs` (never below 0).
 */
export function thinkPause(settings: Pick<SessionSettings, 'thinkMs' | 'thinkJitterMs'>): number {
  const { thinkMs, thinkJitterMs } = settings;
  if (thinkJitterMs <= 0) return thinkMs;
  return Math.max(0, thinkMs + (Math.random() * 2 - 1) * thinkJitterMs);
}

/** Close codes after which a session resumes (when asked to); 1013 (overloaded, full) after a pause. */
const RESUMABLE_CLOSES = new Set([
  'closed:1001',
  'closed:1006',
  'closed:1011',
  'closed:1012',
  'closed:1013',
  'refused:server_overloaded',
  // nginx's own refusal when no instance took the upgrade (all down, full or overloaded).
  'refused:http_503',
]);
/** `error` codes of a session refused before it opens: the close that follows is the refusal. */
const REFUSALS = new Set(['server_overloaded']);
/** Reconnections one session may make in a run. */
const MAX_RESUMES = 8;
/** A reconnection refused before its session opened is tried again after this, doubling. */
const RESUME_RETRY_MS = 100;
const RESUME_RETRY_MAX_MS = 2_000;

/** What a session needs from its pool. */
export interface ClientContext extends Readonly<SessionSettings> {
  /** Where samples go right now (a capacity search swaps it between steps). */
  readonly rec: Recorder;
  /** Set when sessions should finish their turn and leave. */
  readonly stopping: boolean;
  /** Fires when sessions must leave at once. */
  readonly signal: AbortSignal;
  opened(): void;
  closed(): void;
  /** A session ended by an error before it ever opened (the error is counted already). */
  failedUnopened(): void;
  /** A turn began (+1) or ended (−1). */
  turnsInFlight(change: 1 | -1): void;
}

/** A turn in flight. */
interface Turn {
  line: number;
  /** Typed: response.create sent; spoken: the user's last sound. */
  startAt: number;
  text: string;
  firstTextAt: number | null;
  firstAudioAt: number | null;
  /** A tool call came before any text. */
  toolFirst: boolean;
  /** A call the server ran has its result (`mcp_call` done with its output). */
  toolsDone: boolean;
  /** The response answering this turn: the first one created once the user has finished. */
  responseId: string | null;
  done: (event: ResponseDone) => void;
}

interface ResponseDone {
  at: number;
  status: string;
  troupe?: {
    rounds?: Array<{
      llm_ttft_ms?: number | null;
      llm_ms: number | null;
      overhead_ms: number | null;
    }>;
    tools?: Array<{ name: string; outcome: string }>;
  };
}

/** The few fields of server events a session reads. */
interface ServerEventLite {
  type: string;
  delta?: string;
  response_id?: string;
  item?: {
    type?: string;
    role?: string;
    status?: string;
    content?: Array<{ text?: string }>;
    output?: string | null;
  };
  response?: Omit<ResponseDone, 'at'> & { id?: string };
  error?: { type?: string; code?: string | null; message?: string };
  session?: { troupe?: { character?: { greeting?: string | null }; resume_token?: string } };
}

/** What an announced item tells of a reply under way: cut short, or at its tools' results. */
function endsWith(item: ServerEventLite['item']): 'cut' | 'tools' | undefined {
  if (item?.role === 'assistant' && item.status === 'incomplete') return 'cut';
  if (item?.type === 'mcp_call' && item.output != null) return 'tools';
  return undefined;
}

/**
 * Runs one session until the pool stops: connect, converse, leave. Never
 * throws: what goes wrong is counted as an error of its kind.
 *
 * @example await runSession(ctx, 3, signal);
 */
export async function runSession(
  ctx: ClientContext,
  index: number,
  signal: AbortSignal,
): Promise<void> {
  let resume: { token: string; turn: number; asked: boolean; at: number } | undefined;
  let opened = false;
  for (let attempt = 0; ; attempt++) {
    const client = new SessionClient(ctx, signal, resume);
    try {
      await client.run(index, resume?.turn ?? 0, resume?.asked ?? false);
      return;
    } catch (err) {
      opened ||= client.everOpened;
      const kind = err instanceof SessionError ? err.kind : 'client';
      // Refused before its session opened (it reached a draining server): the token it had.
      const token = client.token ?? resume?.token;
      if (
        ctx.resume !== undefined &&
        RESUMABLE_CLOSES.has(kind) &&
        token !== undefined &&
        attempt < MAX_RESUMES &&
        !ctx.stopping &&
        !ctx.signal.aborted
      ) {
        client.handOver();
        if (client.token !== undefined) {
          resume = { token: client.token, turn: client.turn, asked: client.asked, at: epochNow() };
        } else {
          // Refused before its session opened: again with the same token, after a pause.
          ctx.resume.retries++;
          const pause = Math.min(RESUME_RETRY_MAX_MS, RESUME_RETRY_MS * 2 ** attempt);
          await sleep(pause, undefined, { signal }).catch(() => undefined);
        }
        continue;
      }
      // Closed by the server with no way back, or a reconnection that could
      // not get through: the conversation is lost (a session refused before
      // it ever opened had none to lose).
      if (
        ctx.resume !== undefined &&
        !ctx.stopping &&
        (resume !== undefined || (RESUMABLE_CLOSES.has(kind) && token !== undefined))
      ) {
        ctx.resume.failed++;
      }
      if (client.turnCut) ctx.rec.turnsFailed++;
      ctx.rec.error(kind);
      if (!opened) ctx.failedUnopened();
      return;
    } finally {
      client.close();
    }
  }
}

/** A failure that ends a session, counted under `kind`. */
class SessionError extends Error {
  constructor(readonly kind: string) {
    super(kind);
  }
}

class SessionClient {
  readonly #ctx: ClientContext;
  /** The session's own signal, aborted with the pool's (the pool's `sessionSignal`). */
  readonly #signal: AbortSignal;
  #ws: WebSocket | undefined;
  #turn: Turn | undefined;
  #opened = false;
  #everOpened = false;
  #closedByUs = false;
  /** Resolvers of `session.created`/`session.updated` and of an unexpected close. */
  #waiting = new Map<string, (e: ServerEventLite) => void>();
  #lost: ((err: SessionError) => void) | undefined;
  /**
   * Settles when the connection is lost: the turn under way stops waiting.
   * A resumed session asks it again; one that is not resumed counts it as
   * failed ({@link turnCut}) beside the close.
   */
  #cut: Promise<'lost'> = new Promise(() => {});
  /** The server refused the session before it opened (its `error` code): counted once, as `refused:CODE`. */
  #refused: string | undefined;
  /** Spoken sessions: the line being spoken and how far, in samples. */
  #speaking: { pcm: Int16Array; at: number } | undefined;
  /** A reconnection: the token it resumes, and when it began (until the first delta). */
  readonly #resume: { token: string; at: number } | undefined;
  #resumeAt: number | undefined;
  /** When this reconnection's socket opened, its session was created, and its next turn asked. */
  #resumeMarks: { open?: number; created?: number; ask?: number } = {};
  /** The last user line the resumed conversation announced. */
  #lastUserLine: string | undefined;
  /**
   * What the resumed conversation's last item is: a reply cut short
   * (`incomplete`), or a call the server ran, with its result.
   */
  #endsWith: 'cut' | 'tools' | undefined;
  /** The session's resume token (from `session.created`). */
  token: string | undefined;
  /** The turn the conversation is at: the one under way, or the next one. */
  turn = 0;
  /** Whether this turn's line was sent (typed): a resumed session has it and only asks for the reply. */
  asked = false;
  /** The connection was lost during a turn: failed, unless a resumed session asks it again. */
  turnCut = false;

  constructor(ctx: ClientContext, signal: AbortSignal, resume?: { token: string; at: number }) {
    this.#ctx = ctx;
    this.#signal = signal;
    this.#resume = resume;
    this.#resumeAt = resume?.at;
    // It carries on the session its predecessor opened (and counts its close).
    this.#opened = resume !== undefined;
  }

  /** Whether this connection's session opened (or carried on one that had). */
  get everOpened(): boolean {
    return this.#everOpened;
  }

  async run(index: number, firstTurn = 0, askedAlready = false): Promise<void> {
    const ctx = this.#ctx;
    const lost = new Promise<never>((_, reject) => {
      this.#lost = (err) => {
        if (this.#turn !== undefined) this.turnCut = true;
        if (this.#turn?.text && ctx.resume) ctx.resume.cutMidReply++;
        if (this.#turn?.toolsDone && ctx.resume) ctx.resume.toolsMidReply++;
        reject(err);
      };
    });
    // Also what keeps the loss from being an unhandled rejection.
    this.#cut = lost.catch(() => 'lost' as const);
    const created = await Promise.race([this.#connect(), lost]);
    this.#opened = true;
    this.#everOpened = true;
    // A resumed session is the same user: counted once, when it first opened.
    if (this.#resume === undefined) ctx.opened();
    const spoken = ctx.speech !== undefined;
    if (this.#resume && !spoken) {
      // A resumed conversation is announced before the server answers the
      // client's first event: its items are all here once this is answered.
      this.#send({ type: 'session.update', session: {} });
      await Promise.race([this.#await('session.updated'), lost]);
    }
    if (spoken) {
      this.#send({
        type: 'session.update',
        session: {
          output_modalities: ['audio'],
          audio: {
            input: {
              turn_detection: { type: 'server_vad', silence_duration_ms: ctx.silenceMs },
            },
          },
        },
      });
      // A resumed session does not greet again.
      const greeting = this.#resume ? null : created.session?.troupe?.character?.greeting;
      const greeted = greeting ? this.#await('response.done') : undefined;
      await Promise.race([this.#await('session.updated'), lost]);
      void this.#microphone();
      // The greeting is spoken first; the user talks after it.
      if (greeted !== undefined) await Promise.race([greeted, lost]);
    }
    // The items are all here: did the reply under way at the loss come back?
    if (this.#resume && ctx.resume) {
      if (this.#endsWith === 'cut') ctx.resume.repliesKept++;
      if (this.#endsWith === 'tools') ctx.resume.toolRoundsKept++;
    }
    for (let t = firstTurn; !ctx.stopping && !ctx.signal.aborted; t++) {
      this.turn = t;
      const line = (index + t) % CONVERSATION.length;
      // The line of a turn cut by the reconnection, when the resumed
      // conversation has it (announced again, before the answer to the first
      // session.update): only the reply is asked for again. Else the line is
      // sent again.
      this.asked =
        t === firstTurn && askedAlready && this.#lastUserLine === CONVERSATION[line]!.user;
      await Promise.race([this.#playTurn(line), lost]);
      // Done: a reconnection during the pause goes on with the next line, not this one again.
      this.turn = t + 1;
      this.asked = false;
      if (ctx.stopping) break;
      await Promise.race([sleep(thinkPause(ctx), undefined, { signal: this.#signal }), lost]).catch(
        (err: unknown) => {
          if (err instanceof SessionError) throw err;
        },
      );
    }
  }

  /** The session goes on in a resumed client: this one leaves without counting a close. */
  handOver(): void {
    this.#opened = false;
  }

  close(): void {
    this.#closedByUs = true;
    if (this.#opened) {
      this.#opened = false;
      this.#ctx.closed();
    }
    this.#ws?.close(1000);
  }

  #connect(): Promise<ServerEventLite> {
    const ctx = this.#ctx;
    const url = new URL(ctx.url);
    if (ctx.character !== null) url.searchParams.set('character', ctx.character);
    if (this.#resume) url.searchParams.set('resume', this.#resume.token);
    const ws = new WebSocket(url, { perMessageDeflate: false });
    this.#ws = ws;
    ws.on('message', (data) => this.#onMessage(data.toString()));
    if (this.#resume) ws.once('open', () => (this.#resumeMarks.open = epochNow()));
    ws.on('close', (code) => {
      if (this.#closedByUs) return;
      this.#lost?.(new SessionError(this.#refused ? `refused:${this.#refused}` : `closed:${code}`));
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new SessionError('connect_timeout')), OPEN_TIMEOUT_MS);
      ws.once('error', (err) => {
        clearTimeout(timer);
        // A 503 to the upgrade is a refusal (a load balancer's or the server's), not a failure to connect.
        const refused = /Unexpected server response: 503/.test(err.message);
        reject(new SessionError(refused ? 'refused:http_503' : 'connect'));
      });
      this.#waiting.set('session.created', (e) => {
        clearTimeout(timer);
        if (this.#resume) this.#resumeMarks.created = epochNow();
        this.token = e.session?.troupe?.resume_token;
        resolve(e);
      });
    });
  }

  #await(type: string): Promise<ServerEventLite> {
    return new Promise((resolve) => this.#waiting.set(type, resolve));
  }

  #send(event: object): void {
    this.#ws?.send(JSON.stringify(event));
  }

  /** One turn: say the line, wait for the whole reply, record what it took. */
  async #playTurn(line: number): Promise<void> {
    const ctx = this.#ctx;
    const turnDone = new Promise<ResponseDone>((resolve) => {
      this.#turn = {
        line,
        startAt: epochNow(),
        text: '',
        firstTextAt: null,
        firstAudioAt: null,
        toolFirst: false,
        toolsDone: false,
        responseId: null,
        done: resolve,
      };
    });
    const turn = this.#turn!;
    ctx.turnsInFlight(1);
    try {
      await this.#converse(turn, turnDone);
    } finally {
      ctx.turnsInFlight(-1);
    }
  }

  async #converse(turn: Turn, turnDone: Promise<ResponseDone>): Promise<void> {
    const ctx = this.#ctx;
    const line = turn.line;
    const utterance = ctx.speech?.[line];
    if (utterance !== undefined) {
      // Spoken: the turn starts at the user's last sound, once it has been sent.
      this.#speaking = { pcm: utterance.pcm, at: 0 };
      turn.startAt = Number.POSITIVE_INFINITY;
    } else {
      if (!this.asked) {
        this.#send({
          type: 'conversation.item.create',
          item: {
            type: 'message',
            role: 'user',
            content: [{ type: 'input_text', text: CONVERSATION[line]!.user }],
          },
        });
        this.asked = true;
      }
      turn.startAt = epochNow();
      this.#resumeMarks.ask ??= turn.startAt;
      this.#send({ type: 'response.create' });
    }
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const timedOut = new Promise<null | 'aborted'>((resolve) => {
      timer = setTimeout(() => resolve(null), ctx.turnTimeoutMs);
      onAbort = () => resolve('aborted');
      this.#signal.addEventListener('abort', onAbort, { once: true });
    });
    const done = await Promise.race([turnDone, timedOut, this.#cut]);
    clearTimeout(timer);
    this.#signal.removeEventListener('abort', onAbort!);
    this.#turn = undefined;
    // Cut off by the end of the run: neither a success nor a failure. Cut
    // off by the connection's loss: counted where the session goes on or ends.
    if (done === 'aborted' || done === 'lost') return;
    if (done === null) {
      ctx.rec.turnsFailed++;
      // The session's state is unknown now: leave rather than talk over it.
      throw new SessionError('timeout');
    }
    this.#finish(turn, done);
  }

  #finish(turn: Turn, done: ResponseDone): void {
    const rec = this.#ctx.rec;
    const ok = done.status === 'completed';
    if (ok) rec.turnsCompleted++;
    else {
      rec.turnsFailed++;
      rec.error(`response:${done.status}`);
    }
    rec.samples.turnDuration.push(done.at - turn.startAt);
    if (turn.firstTextAt !== null) rec.samples.ttft.push(turn.firstTextAt - turn.startAt);
    else if (ok) rec.error('no_text');
    if (turn.firstAudioAt !== null) rec.samples.firstAudio.push(turn.firstAudioAt - turn.startAt);
    const rounds = done.troupe?.rounds ?? [];
    for (const r of rounds) {
      if (r.overhead_ms !== null) rec.samples.toolRoundOverhead.push(r.overhead_ms);
    }
    for (const t of done.troupe?.tools ?? []) {
      if (t.outcome !== 'ok') rec.error(`tool:${t.outcome}`);
    }
    if (turn.firstTextAt !== null) {
      // The model's own time in the tool rounds before the text: not Troupe's to answer for.
      let model = 0;
      if (turn.toolFirst) for (const r of rounds.slice(0, -1)) model += r.llm_ms ?? 0;
      const exModel = turn.firstTextAt - turn.startAt - model;
      rec.samples.ttftExModel.push(exModel);
      // The same, split by whether the turn had a tool round: a gap the turns
      // without one share is the run's conditions, not the tool round's.
      if (turn.toolFirst) rec.samples.ttftExModelToolTurns.push(exModel);
      else rec.samples.ttftExModelOtherTurns.push(exModel);
      // Less the model's time to first token of the round that spoke (server-measured):
      // what is left is Troupe's (and the wire's) part of the TTFT.
      const spoke = turn.toolFirst ? rounds.at(-1) : rounds[0];
      if (typeof spoke?.llm_ttft_ms === 'number') {
        rec.samples.ttftTroupe.push(exModel - spoke.llm_ttft_ms);
      }
    }
    if (ok && this.#ctx.checkText && this.#ctx.speech === undefined) {
      if (turn.text !== CONVERSATION[turn.line]!.reply) rec.error('lost_text');
    }
  }

  #onMessage(raw: string): void {
    const now = epochNow();
    let e: ServerEventLite;
    try {
      e = JSON.parse(raw) as ServerEventLite;
    } catch {
      this.#ctx.rec.error('bad_frame');
      return;
    }
    // Only the response answering the turn counts: a spoken line the VAD
    // split gets a response while the user still speaks (counted, ignored).
    const turn = this.#turn;
    const ours =
      turn !== undefined && turn.responseId !== null && e.response_id === turn.responseId
        ? turn
        : undefined;
    switch (e.type) {
      case 'response.created':
        if (turn === undefined) break;
        if (turn.startAt === Number.POSITIVE_INFINITY)
          this.#ctx.rec.error('response_while_speaking');
        else turn.responseId ??= e.response?.id ?? null;
        return;
      case 'response.output_text.delta':
      case 'response.output_audio_transcript.delta':
        if (ours !== undefined && typeof e.delta === 'string') this.#text(ours, e.delta, now);
        return;
      case 'response.output_audio.delta':
        if (ours !== undefined && ours.firstAudioAt === null) ours.firstAudioAt = now;
        return;
      case 'conversation.item.added':
        if (e.item?.type === 'message' && e.item.role === 'user') {
          this.#lastUserLine = e.item.content?.[0]?.text;
        }
        this.#endsWith = endsWith(e.item);
        break;
      case 'response.output_item.added':
        // Server-run tools come as `mcp_call` items; a client's own as `function_call`.
        if (
          ours !== undefined &&
          (e.item?.type === 'function_call' || e.item?.type === 'mcp_call') &&
          ours.firstTextAt === null
        ) {
          ours.toolFirst = true;
        }
        return;
      case 'response.output_item.done':
        if (ours !== undefined && e.item?.type === 'mcp_call' && e.item.output != null) {
          ours.toolsDone = true;
        }
        return;
      case 'response.done':
        if (turn !== undefined && turn.responseId !== null && e.response?.id === turn.responseId) {
          turn.done({ ...e.response, at: now, status: e.response.status ?? 'unknown' });
          return;
        }
        break;
      case 'error':
        if (e.error?.code === 'server_shutting_down' && this.#ctx.resume !== undefined) {
          // The server drains: go on elsewhere now rather than wait to be closed.
          this.#lost?.(new SessionError('closed:1001'));
          return;
        }
        if (!this.#opened && REFUSALS.has(e.error?.code ?? '')) {
          // Refused at the door (overloaded, full): its close says so, once.
          this.#refused = e.error?.code ?? undefined;
          return;
        }
        this.#ctx.rec.error(`error:${e.error?.code ?? e.error?.type ?? 'unknown'}`);
        if (e.error?.code === 'resume_failed' && this.#ctx.resume !== undefined) {
          // A fresh session: the conversation was lost.
          this.#ctx.resume.failed++;
          this.#resumeAt = undefined;
        }
        return;
      default:
        break;
    }
    const wake = this.#waiting.get(e.type);
    if (wake !== undefined) {
      this.#waiting.delete(e.type);
      wake(e);
    }
  }

  #text(turn: Turn, delta: string, now: number): void {
    const rec = this.#ctx.rec;
    rec.deltaFrames++;
    if (this.#resumeAt !== undefined) this.#resumed(now);
    if (turn.firstTextAt === null) turn.firstTextAt = now;
    if (!delta.includes('⟦')) {
      rec.deltas++;
      turn.text += delta;
      return;
    }
    // A frame may join several of the LLM's deltas (DELTA_BATCH_MS): each
    // counts, with its own send time.
    const { text, sentAt } = readStamps(delta);
    rec.deltas += Math.max(1, sentAt.length);
    turn.text += text;
    for (const t of sentAt) rec.samples.addedPerDelta.push(now - t);
  }

  /** The first delta after a reconnection: what the resume took, and where. */
  #resumed(now: number): void {
    const at = this.#resumeAt!;
    this.#resumeAt = undefined;
    const log = this.#ctx.resume;
    if (log === undefined) return;
    log.times.push(now - at);
    const { open, created, ask } = this.#resumeMarks;
    if (open === undefined || created === undefined) return;
    log.splits.connect.push(open - at);
    log.splits.restore.push(created - open);
    // Spoken turns start at the end of speech: no "asked" moment to split at.
    if (ask === undefined || ask < created) return;
    log.splits.ask.push(ask - created);
    log.splits.reply.push(now - ask);
  }

  /**
   * Spoken sessions stream audio like a microphone, one 20 ms frame when
   * it has been "recorded": the current line, else silence, until the end.
   */
  async #microphone(): Promise<void> {
    const ctx = this.#ctx;
    const start = performance.now();
    for (let frame = 1; this.#ws?.readyState === WebSocket.OPEN; frame++) {
      const due = start + frame * FRAME_MS;
      const wait = due - performance.now();
      if (wait > 0) {
        try {
          await sleep(wait, undefined, { signal: this.#signal });
        } catch {
          return;
        }
      }
      const speaking = this.#speaking;
      if (speaking === undefined) {
        this.#send({ type: 'input_audio_buffer.append', audio: SILENT_FRAME });
        continue;
      }
      const chunk = speaking.pcm.subarray(speaking.at, speaking.at + FRAME_SAMPLES);
      speaking.at += FRAME_SAMPLES;
      this.#send({ type: 'input_audio_buffer.append', audio: encodePcm16Base64(chunk) });
      const line = this.#turn?.line;
      const endMs = line === undefined ? 0 : (ctx.speech?.[line]?.endMs ?? 0);
      if (this.#turn !== undefined && this.#turn.startAt === Number.POSITIVE_INFINITY) {
        // The frame holding the last sound is out: the user has stopped speaking.
        if ((speaking.at / 24_000) * 1000 >= endMs) {
          this.#turn.startAt = epochNow() - ((speaking.at / 24_000) * 1000 - endMs);
        }
      }
      if (speaking.at >= speaking.pcm.length) this.#speaking = undefined;
    }
  }
}
