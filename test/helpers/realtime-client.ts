/**
 * A WebSocket client for tests: records every server event and waits for the
 * ones a test names (bounded waits that say what they were waiting for).
 */
import WebSocket, { type ClientOptions } from 'ws';
import { bound, DEFAULT_WAIT_MS } from './wait.js';

/** A server event as received. */
export type Received = { type: string; event_id?: string } & Record<string, unknown>;

/** An event as a failed wait names it: its type, and an error's code and message. */
function describe(e: Received): string {
  if (e.type !== 'error') return e.type;
  const error = e.error as { code?: string | null; message?: string } | undefined;
  return `error (${error?.code ?? 'no code'}: ${error?.message ?? ''})`;
}

/** A connected test client. */
export interface TestClient {
  readonly ws: WebSocket;
  /** Every event so far, in order. */
  readonly events: Received[];
  /** Sends an event (an object is JSON-encoded; a string goes as is). */
  send(event: object | string): void;
  /** Socket errors seen after the socket opened (a frame the client could not take, a reset). */
  readonly errors: Error[];
  /** The next event of `type` (after those already taken) matching `where`, within `bound(timeoutMs)` (default 2 min). */
  next(type: string, where?: (e: Received) => boolean, timeoutMs?: number): Promise<Received>;
  /** Every event up to and including the next `response.done`. */
  untilDone(): Promise<Received[]>;
  /** Resolves with the close code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

/**
 * Connects and waits for the socket to open (not for `session.created`).
 *
 * @example
 * const c = await connect(`${t.wsUrl}?character=weather`);
 * await c.next('session.created');
 */
export async function connect(
  url: string,
  options: ClientOptions & { protocols?: string[] } = {},
): Promise<TestClient> {
  const { protocols, ...rest } = options;
  const ws = new WebSocket(url, protocols ?? [], rest);
  const events: Received[] = [];
  let cursor = 0;
  const waiters = new Set<() => void>();
  ws.on('message', (data) => {
    events.push(JSON.parse(data.toString()) as Received);
    for (const w of waiters) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  // After the handshake an error only precedes a close: record it rather than crash the test.
  const errors: Error[] = [];
  ws.on('error', (err) => errors.push(err));

  function next(
    type: string,
    where: (e: Received) => boolean = () => true,
    timeoutMs = DEFAULT_WAIT_MS,
  ): Promise<Received> {
    const limit = bound(timeoutMs);
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        for (let i = cursor; i < events.length; i++) {
          const e = events[i]!;
          if (e.type === type && where(e)) {
            cursor = i + 1;
            resolve(e);
            return true;
          }
        }
        return false;
      };
      if (check()) return;
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(
          new Error(
            `no ${type} within ${limit} ms; got: ${events.slice(cursor).map(describe).join(', ')}`,
          ),
        );
      }, limit);
      const waiter = () => {
        if (check()) {
          clearTimeout(timer);
          waiters.delete(waiter);
        }
      };
      waiters.add(waiter);
    });
  }

  return {
    ws,
    events,
    errors,
    send: (event) => ws.send(typeof event === 'string' ? event : JSON.stringify(event)),
    next,
    async untilDone() {
      const from = cursor;
      await next('response.done');
      return events.slice(from, cursor);
    },
    closed,
    async close() {
      if (ws.readyState === WebSocket.OPEN) ws.close(1000);
      await closed;
    },
  };
}

/** The two events of a user text turn. */
export function say(client: TestClient, text: string): void {
  client.send({
    type: 'conversation.item.create',
    item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
  });
  client.send({ type: 'response.create' });
}
