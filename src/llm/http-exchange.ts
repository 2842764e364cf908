import { Client, type Dispatcher } from 'undici';
import { LlmStreamError } from '../errors.js';
import { QuietClock } from './quiet-clock.js';

/** Receives an exchange's body as it comes. */
export interface BodySink {
  data(piece: Buffer): void;
  end(): void;
  fail(err: unknown): void;
}

/** Options of {@link Exchange}. */
export interface ExchangeOptions {
  /** Where the request goes, for messages (credentials redacted). */
  where: string;
  /** Longest wait for the answer's headers, then longest time without a chunk. */
  timeoutMs: number;
  /** Longest the whole exchange may take; 0 = no limit. */
  totalMs: number;
  /** The turn's signal: aborting it stops the exchange. */
  signal: AbortSignal;
  /** Called once when the exchange is over: `complete` if the whole answer came. */
  onOver?: (complete: boolean) => void;
}

/**
 * Kept-alive undici connections to one origin, each carrying one exchange
 * at a time; the one freed last serves the next request. Unlike undici's
 * `Pool`, a connection is free again the moment its answer ends: a `Pool`
 * learns it a microtask later, so a request sent right after an answer (the
 * round after a tool call) opened a second connection.
 */
export class Connections {
  readonly #origin: string;
  readonly #options: Client.Options;
  readonly #idle: Client[] = [];

  constructor(origin: string, options: Client.Options) {
    this.#origin = origin;
    this.#options = options;
  }

  /** A connection for one exchange: give it back with {@link give}. */
  take(): Client {
    for (let client = this.#idle.pop(); client !== undefined; client = this.#idle.pop()) {
      if (!client.closed && !client.destroyed) return client;
    }
    return new Client(this.#origin, this.#options);
  }

  /** Its exchange is over: kept for the next if the answer ended cleanly, else closed. */
  give(client: Client, reusable: boolean): void {
    if (reusable) this.#idle.push(client);
    else client.destroy().catch(() => {});
  }
}

/**
 * One request and its answer, as undici's dispatcher hands them over: no
 * streams between the socket and the reader, one callback per piece of the
 * body. Resolves {@link answered} at the headers; then the body goes to the
 * sink {@link attach}ed (pieces that come before one are held). Its
 * deadlines — `timeoutMs` for the headers, then `timeoutMs` without a chunk
 * (bytes may be comments: only {@link heard} counts), `totalMs` in all — stop
 * the exchange with their {@link LlmStreamError}, which {@link silence} gives.
 *
 * @example
 * const exchange = new Exchange({ where, timeoutMs: 60_000, totalMs: 0, signal });
 * client.dispatch({ path: '/v1/chat/completions', method: 'POST', body }, exchange);
 * await exchange.answered;
 */
export class Exchange implements Dispatcher.DispatchHandlers {
  /** The answer's HTTP status (0 until the headers came). */
  status = 0;
  /** The answer's headers, names in lower case. */
  headers: Record<string, string> = {};
  /** The whole body came: the connection serves the next request. */
  complete = false;
  /** Resolves when the headers came; rejects if the exchange failed before. */
  readonly answered: Promise<Exchange>;
  readonly #options: ExchangeOptions;
  #answer!: { resolve: (exchange: Exchange) => void; reject: (err: unknown) => void };
  /** The exchange ended (completed or failed): later callbacks are ignored. */
  #over = false;
  #sink: BodySink | undefined;
  /** No sink: drop the body (a drain after `[DONE]`). */
  #discard = false;
  #held: Buffer[] = [];
  #heldEnd = false;
  #heldFailure: unknown = undefined;
  #abort: ((err?: Error) => void) | undefined;
  /** Why the exchange was stopped before undici connected it. */
  #stopped: Error | undefined;
  #silence: LlmStreamError | undefined;
  /** `timeoutMs` for the headers, then without a chunk. */
  readonly #quiet: QuietClock;
  #total: NodeJS.Timeout | undefined;
  #ended: (() => void) | undefined;

  constructor(options: ExchangeOptions) {
    this.#options = options;
    this.answered = new Promise((resolve, reject) => (this.#answer = { resolve, reject }));
    // Nobody may be waiting yet (a reader that leaves during a notice).
    this.answered.catch(() => {});
    this.#quiet = new QuietClock(options.timeoutMs, () => this.#expire(this.#silentFor()));
    if (options.totalMs > 0) this.#total = setTimeout(this.#tooLong, options.totalMs);
    options.signal.addEventListener('abort', this.#onAbort);
  }

  /** The deadline that stopped the exchange, if one did. */
  silence(): LlmStreamError | undefined {
    return this.#silence;
  }

  /** A chunk came at `at` (`performance.now()`): the silence starts again. */
  heard(at: number): void {
    this.#quiet.heard(at);
  }

  /** Stops the deadlines (the answer is read, or given up); the turn's signal still stops it. */
  stop(): void {
    this.#quiet.stop();
    clearTimeout(this.#total);
    this.#total = undefined;
  }

  /**
   * Sends the body from here on to `sink` (first what came before), or
   * drops it with `undefined`.
   */
  attach(sink: BodySink | undefined): void {
    this.#sink = sink;
    this.#discard = sink === undefined;
    if (sink === undefined) return;
    const held = this.#held;
    this.#held = [];
    for (const piece of held) sink.data(piece);
    if (this.#heldFailure !== undefined) sink.fail(this.#heldFailure);
    else if (this.#heldEnd) sink.end();
  }

  /** Stops the exchange (its connection is closed) unless it is over. */
  destroy(err: Error = new Error('the reader stopped')): void {
    if (this.#over) return;
    this.#fail(err);
    if (this.#abort) this.#abort(err);
    // Not connected yet: undici stops it once it is.
    else this.#stopped = err;
  }

  /**
   * Waits up to `ms` for the body to end, else stops the exchange: a
   * well-behaved server ends it with `[DONE]`'s packet, and only an ended
   * answer frees its kept-alive connection.
   */
  finish(ms: number): Promise<void> {
    if (this.#over) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#ended = undefined;
        this.destroy();
        resolve();
      }, ms);
      this.#ended = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.#stopped) abort(this.#stopped);
    else this.#abort = abort;
  }

  onHeaders(status: number, raw: Buffer[] | string[] | null): boolean {
    if (this.#over) return false;
    // 1xx: informational, the answer follows.
    if (status < 200) return true;
    this.status = status;
    const headers: Record<string, string> = {};
    if (raw) {
      for (let i = 0; i + 1 < raw.length; i += 2) {
        headers[raw[i]!.toString().toLowerCase()] = raw[i + 1]!.toString();
      }
    }
    this.headers = headers;
    // From here only chunks count as news.
    this.#quiet.heard(performance.now());
    this.#answer.resolve(this);
    return true;
  }

  onData(piece: Buffer): boolean {
    if (this.#over) return false;
    if (this.#sink) this.#sink.data(piece);
    else if (!this.#discard) this.#held.push(piece);
    return true;
  }

  onComplete(): void {
    if (this.#over) return;
    this.#end(true);
    if (this.#sink) this.#sink.end();
    else this.#heldEnd = true;
    this.#ended?.();
  }

  onError(err: Error): void {
    if (!this.#over) this.#fail(err);
  }

  #end(complete: boolean): void {
    this.#over = true;
    this.complete = complete;
    this.stop();
    this.#options.signal.removeEventListener('abort', this.#onAbort);
    this.#options.onOver?.(complete);
  }

  #fail(err: unknown): void {
    this.#end(false);
    this.#answer.reject(err);
    if (this.#sink) this.#sink.fail(err);
    else this.#heldFailure = err;
    this.#ended?.();
  }

  #expire(error: LlmStreamError): void {
    this.#silence ??= error;
    this.destroy(error);
  }

  #onAbort = (): void => {
    const reason = this.#options.signal.reason as unknown;
    this.destroy(reason instanceof Error ? reason : new Error('aborted'));
  };

  #silentFor(): LlmStreamError {
    const { timeoutMs, where } = this.#options;
    return new LlmStreamError(`The LLM was silent for ${timeoutMs} ms.`, {
      retryable: true,
      detail: `${where} sent no chunk for ${timeoutMs} ms`,
    });
  }

  #tooLong = (): void => {
    const { totalMs, where } = this.#options;
    this.#expire(
      new LlmStreamError(`The LLM took longer than ${totalMs} ms in all.`, {
        retryable: true,
        detail: `${where} still streaming after ${totalMs} ms`,
      }),
    );
  };
}
