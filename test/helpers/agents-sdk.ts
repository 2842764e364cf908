/**
 * The OpenAI Agents SDK (`@openai/agents-realtime`) as a client of a test
 * server: a `RealtimeSession` over its WebSocket transport with the SDK's
 * default session config, with everything it sends and receives recorded and
 * bounded waits on its history.
 */
import type { RealtimeAgent } from '@openai/agents-realtime';
import {
  OpenAIRealtimeWebSocket,
  RealtimeSession,
  type RealtimeItem,
} from '@openai/agents-realtime';
import type { TestServer } from './server.js';
import { DEFAULT_WAIT_MS } from './wait.js';

/** A wire event as the SDK sent or received it. */
export type WireEvent = { type: string } & Record<string, unknown>;

/** An SDK session against a test server, with what went each way. */
export interface SdkClient {
  session: RealtimeSession;
  /** Events the SDK sent to the server, in order. */
  sent: WireEvent[];
  /** Events the server sent to the SDK, in order. */
  received: WireEvent[];
  /** What the SDK's `error` event carried, as text. */
  errors: string[];
  /** Bytes of audio the SDK's `audio` event delivered. */
  audioBytes(): number;
  /**
   * The SDK's history once `match` holds for it; rejects after a bounded
   * wait naming what it waited for.
   */
  historyWhere(
    what: string,
    match: (history: RealtimeItem[]) => boolean,
    ms?: number,
  ): Promise<RealtimeItem[]>;
  /** The first received event of `type` for which `where` holds (already here or still to come). */
  nextReceived(type: string, where?: (e: WireEvent) => boolean, ms?: number): Promise<WireEvent>;
  /** The `session.updated` (or `error`) answering each `session.update` the SDK sent so far. */
  settled(): Promise<WireEvent[]>;
  close(): void;
}

/**
 * Connects a `RealtimeSession` of `agent` to `t` (query string without `?`),
 * leaving every session setting at the SDK's default.
 *
 * @example
 * const c = await connectSdk(t, new RealtimeAgent({ name: 'A', tools: [clock] }), 'model=weather');
 */
export async function connectSdk(
  t: TestServer,
  agent: RealtimeAgent,
  query = '',
): Promise<SdkClient> {
  const url = query ? `${t.wsUrl}?${query}` : t.wsUrl;
  const transport = new OpenAIRealtimeWebSocket({ url });
  const sent: WireEvent[] = [];
  const received: WireEvent[] = [];
  const errors: string[] = [];
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const l of listeners) l();
  };
  // Every event the SDK sends goes through sendEvent (response.create included).
  const sendEvent = transport.sendEvent.bind(transport);
  transport.sendEvent = (event) => {
    sent.push(structuredClone(event) as WireEvent);
    sendEvent(event);
  };
  transport.on('*', (event: WireEvent) => {
    received.push(event);
    notify();
  });
  const session = new RealtimeSession(agent, { transport });
  session.on('error', (e) => {
    const err = e.error as { message?: unknown; error?: { message?: unknown } } | undefined;
    errors.push(String(err?.error?.message ?? err?.message ?? JSON.stringify(e.error)));
    notify();
  });
  session.on('history_updated', notify);
  let audio = 0;
  session.on('audio', (e) => {
    audio += e.data.byteLength;
  });
  await session.connect({ apiKey: 'sdk-test-key', url });

  /** Resolves with `find()` once defined; the failure names `what()` as it is then. */
  const waitFor = <T>(what: () => string, find: () => T | undefined, ms = DEFAULT_WAIT_MS) => {
    const found = find();
    if (found !== undefined) return Promise.resolve(found);
    return new Promise<T>((resolve, reject) => {
      const check = () => {
        const value = find();
        if (value === undefined) return;
        listeners.delete(check);
        clearTimeout(timer);
        resolve(value);
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`${what()}: not within ${ms} ms`));
      }, ms);
      listeners.add(check);
    });
  };

  return {
    session,
    sent,
    received,
    errors,
    audioBytes: () => audio,
    historyWhere: (what, match, ms) =>
      waitFor(
        () =>
          `${what} (SDK history: ${JSON.stringify(session.history.map(describe))}; SDK errors: ${errors.join(' | ') || 'none'}; received: ${received.map((e) => (e.type === 'error' ? JSON.stringify(e.error) : e.type)).join(', ')})`,
        () => (match(session.history) ? session.history : undefined),
        ms,
      ),
    nextReceived: (type, where = () => true, ms) =>
      waitFor(
        () => `${type} from the server (got: ${received.map((e) => e.type).join(', ')})`,
        () => received.find((e) => e.type === type && where(e)),
        ms,
      ),
    settled: () =>
      waitFor(
        () => 'an answer to each session.update',
        () => {
          const asked = sent.filter((e) => e.type === 'session.update').length;
          const answers = received.filter(
            (e) =>
              e.type === 'session.updated' ||
              (e.type === 'error' &&
                String((e.error as { message?: unknown }).message).startsWith('session.update')),
          );
          return answers.length >= asked ? answers : undefined;
        },
      ),
    close: () => session.close(),
  };
}

/** The text of a history item: message text or transcripts, a tool call's name and output. */
export function itemText(item: RealtimeItem): string {
  if (item.type === 'message') {
    return item.content
      .map((c) => ('text' in c ? c.text : 'transcript' in c ? (c.transcript ?? '') : ''))
      .join('');
  }
  if (item.type === 'function_call' || item.type === 'mcp_call' || item.type === 'mcp_tool_call') {
    return `${item.name}(${item.arguments}) → ${item.output ?? ''}`;
  }
  return '';
}

/** Whether the history holds a completed assistant message containing `text`. */
export function hasReply(history: RealtimeItem[], text: string): boolean {
  return history.some(
    (i) =>
      i.type === 'message' &&
      i.role === 'assistant' &&
      i.status === 'completed' &&
      itemText(i).includes(text),
  );
}

function describe(item: RealtimeItem): string {
  const role = item.type === 'message' ? `${item.role} ` : '';
  const status = 'status' in item ? ` [${item.status}]` : '';
  return `${role}${item.type}${status}: ${itemText(item).slice(0, 80)}`;
}
