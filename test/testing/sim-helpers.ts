/** Helpers for simulator tests: raw requests and SSE parsing. */
import type { ChunkLike, ToolCallDeltaLike } from '../../src/llm/chunk.js';
import type { Simulator } from '../../src/testing/simulator/index.js';

/** A parsed SSE body. */
export interface ParsedStream {
  chunks: ChunkLike[];
  /** Error events (`data: {"error":…}`). */
  errors: Array<{ error: { message: string; type: string; code: number } }>;
  done: boolean;
  raw: string;
}

/** Splits an SSE body into chunk objects. */
export function parseSse(raw: string): ParsedStream {
  const out: ParsedStream = { chunks: [], errors: [], done: false, raw };
  for (const event of raw.split('\n\n')) {
    if (event === '') continue;
    if (!event.startsWith('data: ')) throw new Error(`not an SSE data event: ${event}`);
    const data = event.slice('data: '.length);
    if (data === '[DONE]') {
      out.done = true;
      continue;
    }
    const json = JSON.parse(data) as Record<string, unknown>;
    if ('error' in json) out.errors.push(json as ParsedStream['errors'][number]);
    else out.chunks.push(json as ChunkLike);
  }
  return out;
}

/** A weather tool in the OpenAI format. */
export const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_current_weather',
    description: 'Current weather for a city',
    parameters: {
      type: 'object',
      properties: { location: { type: 'string' } },
      required: ['location'],
    },
  },
} as const;

/** A second tool, for parallel calls. */
export const TIME_TOOL = {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: {} } },
} as const;

/** POSTs a chat request as JSON. */
export function postChat(
  sim: Simulator,
  body: unknown,
  init: { signal?: AbortSignal } = {},
): Promise<Response> {
  return fetch(`${sim.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...init,
  });
}

/** A streamed request with one user message; returns the parsed body. */
export async function streamChat(
  sim: Simulator,
  body: Record<string, unknown>,
): Promise<ParsedStream> {
  const res = await postChat(sim, { model: 'sim-model', stream: true, ...body });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return parseSse(await res.text());
}

/** The deltas' tool-call entries, in order. */
export function toolEntries(chunks: ChunkLike[]): ToolCallDeltaLike[] {
  return chunks.flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? []);
}

/** All streamed text content, concatenated. */
export function textOf(chunks: ChunkLike[]): string {
  return chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
}

/** Finish reasons sent, in order (nulls left out). */
export function finishReasons(chunks: ChunkLike[]): string[] {
  return chunks.flatMap((c) => (c.choices ?? []).flatMap((ch) => ch.finish_reason ?? []));
}

/** The chunks that carry tool calls. */
export function toolChunks(chunks: ChunkLike[]): ChunkLike[] {
  return chunks.filter((c) => (c.choices?.[0]?.delta?.tool_calls ?? []).length > 0);
}

/**
 * A tolerant assembler, enough to check that every profile's output can be
 * put back together: match by non-empty id, else continue the latest call.
 */
export function assembleCalls(
  chunks: ChunkLike[],
): Array<{ id: string; name: string; arguments: string }> {
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  for (const entry of toolEntries(chunks)) {
    let call =
      typeof entry.id === 'string' && entry.id !== ''
        ? calls.find((c) => c.id === entry.id)
        : calls[calls.length - 1];
    if (call === undefined) {
      call = { id: entry.id ?? '', name: '', arguments: '' };
      calls.push(call);
    }
    const name = entry.function?.name;
    if (typeof name === 'string' && name !== '') call.name = name;
    call.arguments += entry.function?.arguments ?? '';
  }
  return calls;
}

/** Messages of a one-user-message conversation. */
export function ask(text: string): Array<{ role: 'user'; content: string }> {
  return [{ role: 'user', content: text }];
}
