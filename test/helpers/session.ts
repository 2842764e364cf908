/**
 * Helpers for session suites over real sockets: open a session, read what
 * the LLM simulator was sent, wait for an error by code.
 */
import { expect } from 'vitest';
import type { ChatMessage } from '../../src/llm/chunk.js';
import type { Simulator } from '../../src/testing/index.js';
import { connect, say, type Received, type TestClient } from './realtime-client.js';
import type { TestServer } from './server.js';

/** A chat-completions request body as the simulator recorded it. */
export interface ChatBody {
  model: string;
  messages: ChatMessage[];
  tools?: Array<{
    type: 'function';
    function: { name: string; description?: string; parameters?: object };
  }>;
  tool_choice?: unknown;
  temperature?: number;
  max_tokens?: number;
}

/**
 * Connects (query string without `?`) and waits for `session.created`.
 *
 * @example const c = await openSession(t, 'character=weather');
 */
export async function openSession(t: TestServer, query = ''): Promise<TestClient> {
  const client = await connect(query ? `${t.wsUrl}?${query}` : t.wsUrl);
  await client.next('session.created');
  return client;
}

/** The bodies of every chat-completions request the simulator received, in order. */
export function chatBodies(sim: Simulator): ChatBody[] {
  return sim.requests
    .filter((r) => r.path === '/v1/chat/completions')
    .map((r) => r.body as ChatBody);
}

/** The newest chat-completions request body. */
export function lastChat(sim: Simulator): ChatBody {
  const bodies = chatBodies(sim);
  expect(bodies.length).toBeGreaterThan(0);
  return bodies.at(-1)!;
}

/** A user turn, to its `response.done`; returns the turn's events. */
export async function turn(client: TestClient, text: string): Promise<Received[]> {
  say(client, text);
  return client.untilDone();
}

/** The `response.done` response of a turn's events. */
export function doneOf(events: readonly Received[]): Record<string, unknown> & {
  status: string;
  output: Array<Record<string, unknown>>;
  troupe: Record<string, unknown>;
} {
  const done = events.find((e) => e.type === 'response.done');
  expect(done, 'a response.done').toBeDefined();
  return done!.response as ReturnType<typeof doneOf>;
}

/** The `usage` of a response no tokens went into (a greeting, an empty answer): zeros, in the usual shape. */
export const NO_USAGE = {
  total_tokens: 0,
  input_tokens: 0,
  output_tokens: 0,
  input_token_details: {
    text_tokens: 0,
    audio_tokens: 0,
    image_tokens: 0,
    cached_tokens: 0,
    cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
  },
  output_token_details: { text_tokens: 0, audio_tokens: 0 },
};

/** The text deltas of a turn's events, joined. */
export function textOf(
  events: readonly Received[],
  deltaType = 'response.output_text.delta',
): string {
  return events
    .filter((e) => e.type === deltaType)
    .map((e) => e.delta as string)
    .join('');
}

/** The next `error` event; checks its code and returns its payload. */
export async function nextError(
  client: TestClient,
  code: string,
): Promise<{
  type: string;
  code: string;
  message: string;
  param: string | null;
  event_id: string | null;
}> {
  const event = await client.next('error');
  const error = event.error as Awaited<ReturnType<typeof nextError>>;
  expect(error.code, error.message).toBe(code);
  return error;
}

/** A user message event with `input_text`. */
export function userMessage(text: string, extra: Record<string, unknown> = {}): object {
  return {
    type: 'conversation.item.create',
    item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }], ...extra },
  };
}

/** Role and text of each message, for comparing histories at a glance. */
/** The id of the item an item event carries. */
export function idOf(event: Received): string {
  return (event.item as { id: string }).id;
}

/**
 * The conversation as a client builds it from `conversation.item.added`, the
 * way the Agents SDK does: each new item right after its `previous_item_id`,
 * at the end when that is null or unknown. Returns the item ids in order.
 */
export function listByPrevious(events: readonly Received[]): string[] {
  const ids: string[] = [];
  for (const e of events) {
    if (e.type === 'conversation.item.deleted') {
      const at = ids.indexOf(e.item_id as string);
      if (at !== -1) ids.splice(at, 1);
    }
    if (e.type !== 'conversation.item.added') continue;
    const id = idOf(e);
    if (ids.includes(id)) continue;
    const after = ids.indexOf(e.previous_item_id as string);
    if (after === -1) ids.push(id);
    else ids.splice(after + 1, 0, id);
  }
  return ids;
}

export function outline(messages: readonly ChatMessage[]): string[] {
  return messages.map((m) => {
    if (m.role === 'tool') return `tool(${m.tool_call_id}): ${m.content}`;
    if (m.role === 'assistant' && m.tool_calls) {
      const calls = m.tool_calls.map((c) => `${c.function.name}(${c.id})`).join(', ');
      return `assistant: ${m.content ?? ''}[${calls}]`;
    }
    const content = typeof m.content === 'string' ? m.content : JSON.stringify(m.content);
    return `${m.role}: ${content}`;
  });
}
