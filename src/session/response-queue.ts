/**
 * The response queue: decides what runs next — a client `response.create`, the
 * greeting, a voice turn — one conversation response at a time; cancellation.
 */
import { ProtocolError } from '../errors.js';
import type { SpeechOutput } from './speech-output.js';
import type { Item } from './events.js';
import type { ExchangeCheckpoint } from './response-writer.js';

/**
 * Where a response comes from: a client's `response.create`, the greeting, a
 * voice turn, a `handoff` (the new character answering), `background` (a
 * background tool's result, or its progress spoken) or `out_of_band`
 * (`response.conversation: "none"`, which runs beside the conversation's
 * response and never waits for it). Each kind gets its own policy in
 * {@link ResponseQueue.request}.
 */
export type ResponseKind =
  'client' | 'greeting' | 'voice' | 'handoff' | 'background' | 'out_of_band';

/** Most out-of-band responses one session runs at once. */
export const MAX_OUT_OF_BAND_RESPONSES = 4;

/** Why a response was stopped. */
export type StopReason = 'client_cancelled' | 'turn_detected';

/** A response that runs (or ran). */
export interface RunningResponse {
  id: string;
  kind: ResponseKind;
  controller: AbortController;
  done: Promise<void>;
  /** Its newest output item: history takes the response's items when it ends. */
  lastItemId?: () => string | null;
  /** One of its output items by id, before history takes them (`conversation.item.retrieve`). */
  findItem?: (id: string) => { item: Item; previous_item_id: string | null } | undefined;
  /**
   * Itself as history would keep it if it were cut now, with the exchange it
   * joins (a resume store's checkpoint); undefined when it has said nothing
   * yet or once history has taken it.
   */
  checkpoint?: () => ExchangeCheckpoint | undefined;
  /** Its speech, when it speaks. */
  speech?: SpeechOutput;
  /** Why it was stopped, when it was. */
  stoppedBy?: StopReason;
  /** Response start (or end of the user's speech) → first audio sent, ms. */
  firstAudioMs?: number;
  /** End of the user's speech → transcript, for responses their speech started. */
  sttMs?: number;
}

/** A request for a response. */
export interface ResponseRequest {
  kind: ResponseKind;
  /** Runs the response; it ends when the promise settles. */
  run: (response: RunningResponse) => Promise<void>;
  /** Called when the run throws (a bug): the queue goes on. */
  onError: (err: unknown) => void;
  sttMs?: number;
  /**
   * A waiting request that must not start while this says so (a background
   * result while the user speaks); the owner calls {@link ResponseQueue.resume}
   * when it may have changed.
   */
  holdWhile?: () => boolean;
}

/** What became of a request. */
export type RequestOutcome =
  | { outcome: 'started' | 'queued'; started: Promise<RunningResponse> }
  | { outcome: 'refused'; activeId: string };

/**
 * One conversation response at a time. Policies: a client `response.create`
 * is refused while a client or voice response runs or waits (as OpenAI's API
 * does) and queued behind a server-started greeting; a voice turn waits for
 * whatever runs; the greeting starts only when nothing else runs or waits.
 * A `background` response is server-started like the greeting: a client's
 * request queues behind it, and every other waiting kind starts before it.
 */
export class ResponseQueue {
  #active: RunningResponse | undefined;
  readonly #waiting: Array<{ request: ResponseRequest; start: (r: RunningResponse) => void }> = [];
  readonly #newId: () => string;
  /** Out-of-band responses: they run beside the conversation's, each on its own. */
  readonly #beside = new Map<string, RunningResponse>();
  #closed = false;

  constructor(newId: () => string) {
    this.#newId = newId;
  }

  /** The conversation response that runs, if any. */
  get active(): RunningResponse | undefined {
    return this.#active;
  }

  /** Whether a conversation response runs or waits. */
  get busy(): boolean {
    return this.#active !== undefined || this.#waiting.length > 0;
  }

  /** Whether any response runs or waits, out-of-band ones included. */
  get running(): boolean {
    return this.busy || this.#beside.size > 0;
  }

  /** Out-of-band responses running now. */
  get outOfBand(): number {
    return this.#beside.size;
  }

  /** A running response by id: the conversation's or an out-of-band one. */
  find(id: string): RunningResponse | undefined {
    return this.#active?.id === id ? this.#active : this.#beside.get(id);
  }

  /**
   * The response that stops the conversation from changing (a new
   * character): any that runs or waits, except the greeting alone.
   */
  blocking(): string | undefined {
    if (this.#active && this.#active.kind !== 'greeting') return this.#active.id;
    if (this.#waiting.length > 0) return 'a queued response';
    return undefined;
  }

  /** Why a request of this kind would be refused now: the response in the way, if any. */
  refusal(kind: ResponseKind): string | undefined {
    const active = this.#active;
    const inTheWay = active?.id ?? 'a queued response';
    if (this.#closed) return active?.id ?? 'none';
    if (kind === 'out_of_band') {
      return this.#beside.size >= MAX_OUT_OF_BAND_RESPONSES
        ? [...this.#beside.keys()].join(', ')
        : undefined;
    }
    if (kind === 'greeting' && this.busy) return inTheWay;
    if (kind !== 'client') return undefined;
    const serverStarted = (k: ResponseKind) => k === 'greeting' || k === 'background';
    const waitingClient = this.#waiting.some((w) => !serverStarted(w.request.kind));
    if ((active && !serverStarted(active.kind)) || waitingClient) return inTheWay;
    return undefined;
  }

  /** Asks for a response: it starts now, waits its turn, or is refused. */
  request(request: ResponseRequest): RequestOutcome {
    const refused = this.refusal(request.kind);
    if (refused !== undefined) return { outcome: 'refused', activeId: refused };
    if (request.kind === 'out_of_band') {
      return { outcome: 'started', started: Promise.resolve(this.#startBeside(request)) };
    }
    if (!this.busy && !request.holdWhile?.()) {
      return { outcome: 'started', started: Promise.resolve(this.#start(request)) };
    }
    const started = new Promise<RunningResponse>((start) => this.#waiting.push({ request, start }));
    // Nothing runs (what waits is held): this one may start at once.
    if (!this.#active) this.#next();
    return { outcome: 'queued', started };
  }

  /** Stops the running conversation response, or the one named (its run ends it as cancelled). */
  stop(reason: StopReason, id?: string): RunningResponse | undefined {
    const active = id === undefined ? this.#active : this.find(id);
    if (!active || active.controller.signal.aborted) return undefined;
    active.stoppedBy = reason;
    active.controller.abort();
    return active;
  }

  /** Resolves when nothing runs or waits. */
  async idle(): Promise<void> {
    while (this.#active || this.#beside.size > 0) {
      await Promise.all([this.#active?.done, ...[...this.#beside.values()].map((r) => r.done)]);
    }
  }

  /** Stops what runs; what waits never starts. */
  close(): void {
    this.#closed = true;
    this.#waiting.length = 0;
    this.#active?.controller.abort();
    for (const r of this.#beside.values()) r.controller.abort();
  }

  #startBeside(request: ResponseRequest): RunningResponse {
    const response = this.#response(request);
    this.#beside.set(response.id, response);
    response.done = request
      .run(response)
      .catch(request.onError)
      .finally(() => this.#beside.delete(response.id));
    return response;
  }

  #response(request: ResponseRequest): RunningResponse {
    return {
      id: this.#newId(),
      kind: request.kind,
      controller: new AbortController(),
      done: Promise.resolve(),
      ...(request.sttMs !== undefined ? { sttMs: request.sttMs } : {}),
    };
  }

  #start(request: ResponseRequest): RunningResponse {
    const response = this.#response(request);
    this.#active = response;
    response.done = request
      .run(response)
      .catch(request.onError)
      .finally(() => {
        if (this.#active === response) this.#active = undefined;
        this.#next();
      });
    return response;
  }

  /** Starts what waits, if nothing runs (a held request may be free to start now). */
  resume(): void {
    this.#next();
  }

  #next(): void {
    if (this.#active || this.#closed) return;
    // Background responses go last: what the user asked for comes first.
    let index = this.#waiting.findIndex((w) => w.request.kind !== 'background');
    if (index === -1) index = this.#waiting.findIndex((w) => !w.request.holdWhile?.());
    if (index === -1) return;
    const [next] = this.#waiting.splice(index, 1);
    next!.start(this.#start(next!.request));
  }
}

/**
 * `response.cancel`: stops the response it names (an out-of-band one by its
 * id) or the conversation's, and gives the one it stopped, or the error to
 * send when there is none to stop.
 */
export function cancelResponse(
  queue: ResponseQueue,
  responseId: string | undefined,
  eventId: string | null,
): RunningResponse | ProtocolError {
  const named = responseId !== undefined ? queue.find(responseId) : undefined;
  if (named && named.kind === 'out_of_band') {
    queue.stop('client_cancelled', named.id);
    return named;
  }
  const active = queue.active;
  if (!active) {
    // OpenAI's words: clients (LiveKit Agents) know a cancel that came too late by them.
    return new ProtocolError(
      'response_cancel_not_active',
      'Cancellation failed: no active response found.',
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
  queue.stop('client_cancelled');
  return active;
}
