/**
 * Tokens told from text, without a tokenizer: for the context budget, and
 * for the usage of a request cut before the server's own count came.
 */
import type { ChatMessage } from './chunk.js';

/** Tokens counted for an image, whatever its size (a high-detail tile set is ~765). */
const IMAGE_TOKENS = 765;
/** Per-message overhead of the chat format. */
const MESSAGE_TOKENS = 4;

/** A cheap, provider-neutral estimate: about 4 characters per token. */
export function estimateTokens(message: ChatMessage): number {
  let chars = 0;
  let images = 0;
  const content = message.content;
  if (typeof content === 'string') chars += content.length;
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (part.type === 'text') chars += part.text.length;
      else images++;
    }
  }
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) {
      chars += call.function.name.length + call.function.arguments.length + 16;
    }
    if (message.function_call) chars += message.function_call.arguments.length + 16;
  }
  return MESSAGE_TOKENS + Math.ceil(chars / 4) + images * IMAGE_TOKENS;
}

/**
 * What a round the model began but never finished used, estimated the same
 * way: the request's messages read, and the text and call arguments it wrote
 * before the cut.
 */
export function estimateRoundUsage(
  request: readonly ChatMessage[],
  written: { text: string; toolCalls: ReadonlyArray<{ name: string; arguments: string }> },
): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  let prompt = 0;
  for (const m of request) prompt += estimateTokens(m);
  let chars = written.text.length;
  for (const call of written.toolCalls) chars += call.name.length + call.arguments.length;
  const completion = Math.ceil(chars / 4);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  };
}
