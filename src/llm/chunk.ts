/**
 * The shape of a streamed chat-completions chunk as real servers send it —
 * looser than the OpenAI type, because servers omit, repeat or null out
 * fields (see docs/llm-streams.md). Every field is optional here.
 */

/** One entry of `delta.tool_calls`. */
export interface ToolCallDeltaLike {
  index?: number | null;
  id?: string | null;
  type?: string | null;
  /**
   * Normally a string of JSON text; some servers and proxies send the parsed
   * object instead (it is taken as the arguments).
   */
  function?: { name?: string | null; arguments?: string | object | null } | null;
}

/** Token counts as servers report them. */
export interface UsageLike {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
}

/** `choices[i].delta`. */
export interface DeltaLike {
  role?: string | null;
  content?: string | null;
  /** vLLM, DeepSeek */
  reasoning_content?: string | null;
  /** OpenRouter, newer vLLM, Ollama */
  reasoning?: string | null;
  tool_calls?: ToolCallDeltaLike[] | null;
  /** Legacy `functions` format: one call, no id. */
  function_call?: { name?: string | null; arguments?: string | object | null } | null;
}

/** One streamed chunk (`chat.completion.chunk`). */
export interface ChunkLike {
  id?: string;
  object?: string;
  created?: number;
  model?: string;
  choices?: Array<{ index?: number; delta?: DeltaLike | null; finish_reason?: string | null }>;
  usage?: UsageLike | null;
  /** Set by the Troupe simulator: epoch milliseconds when the chunk was written. */
  x_sim_sent_at?: number;
}

/** A chat message in the OpenAI format, the only history format Troupe keeps. */
export type ChatMessage =
  | { role: 'system' | 'developer'; content: string }
  | { role: 'user'; content: string | UserContentPart[]; name?: string }
  | {
      role: 'assistant';
      content: string | null;
      tool_calls?: AssistantToolCall[];
      /** Legacy functions format. */
      function_call?: { name: string; arguments: string };
    }
  | { role: 'tool'; tool_call_id: string; content: string }
  | { role: 'function'; name: string; content: string };

/** Content parts of a user message (text and images). */
export type UserContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string; detail?: 'auto' | 'low' | 'high' } };

/** A tool call inside an assistant message. */
export interface AssistantToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * Put among a stream's chunks by a transport that watches for silence
 * (`LlmClient.streamWatched`): `slowNoticeMs` passed without a chunk
 * (again each time as long).
 */
export const LLM_SILENT: unique symbol = Symbol('llm silent');

/**
 * Takes a chunk where the transport reads it, with no async step between
 * the socket and the reader: true when it handled the chunk whole, false
 * when the stream should yield the chunk as usual (the sink may have begun
 * it and kept the rest for the reader, which knows). It must not throw: a
 * failure of its own is kept for the reader too.
 */
export type ChunkSink = (chunk: ChunkLike) => boolean;
