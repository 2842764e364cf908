/**
 * Ids, items and the small shared errors of a session: what every part
 * builds items and protocol errors with. Owns no state but the id counter.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolError, type TroupeError } from '../errors.js';
import type { ChatMessage, UserContentPart } from '../llm/chunk.js';
import type { ToolDescription } from '../tools/types.js';
import type {
  ClientTool,
  ContentPart,
  ErrorPayload,
  Item,
  MessageItem,
  ResponseObject,
  ResponseUsage,
} from './events.js';

let itemCounter = 0;
/** Item and response ids: short, unique within the process, OpenAI-looking. */
export function newId(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}${(itemCounter++).toString(36)}`;
}

/** A message item. */
export function messageItem(
  role: MessageItem['role'],
  content: ContentPart[],
  id?: string,
  status: MessageItem['status'] = 'completed',
): MessageItem {
  return {
    id: id ?? newId('item'),
    object: 'realtime.item',
    type: 'message',
    status,
    role,
    content,
  };
}

/** The text parts of a message, joined. */
export function textOf(parts: readonly ContentPart[]): string {
  return parts.map((p) => ('text' in p ? p.text : '')).join('');
}

/**
 * What the model is told was said of a spoken reply: the transcripts the
 * listener heard of its items, in order, the empty ones left out.
 */
export function heardText(transcripts: ReadonlyArray<string | null | undefined>): string {
  return transcripts.filter(Boolean).join(' ');
}

/**
 * Spoken parts as their transcripts (what the model reads), without their
 * audio: a client's audio part is kept as a voice session keeps its own.
 */
export function spokenAsText(parts: readonly ContentPart[]): ContentPart[] {
  return parts.map((p) => {
    if (p.type === 'input_audio') return { type: 'input_text', text: p.transcript ?? '' };
    if (p.type === 'output_audio') return { type: 'output_text', text: p.transcript ?? '' };
    return p;
  });
}

/** Audio parts without their audio: the transcript is what is kept. */
export function withoutAudio(parts: readonly ContentPart[]): ContentPart[] {
  return parts.map((p) =>
    p.type === 'input_audio' || p.type === 'output_audio'
      ? { type: p.type, transcript: p.transcript ?? null }
      : p,
  );
}

/** A client message as the model sees it; images become `image_url` parts. */
export function toChatMessage(
  role: MessageItem['role'],
  parts: readonly ContentPart[],
): ChatMessage {
  if (role !== 'user' || !parts.some((p) => p.type === 'input_image')) {
    return { role, content: textOf(parts) };
  }
  const content: UserContentPart[] = [];
  for (const p of parts) {
    if (p.type === 'input_text') content.push({ type: 'text', text: p.text });
    else if (p.type === 'input_image') {
      content.push({
        type: 'image_url',
        image_url: { url: p.image_url, ...(p.detail ? { detail: p.detail } : {}) },
      });
    }
  }
  return { role: 'user', content };
}

/** A client tool as the turn runner takes it. */
export function toDescription(t: ClientTool): ToolDescription {
  return { name: t.name, description: t.description, parameters: t.parameters };
}

/** A chat message as plain role and text (Unmute's chat history shape). */
export function plainMessage(m: ChatMessage): { role: string; content: string } {
  const c = m.content;
  if (typeof c === 'string') return { role: m.role, content: c };
  if (Array.isArray(c)) {
    return {
      role: m.role,
      content: c.map((p) => ('text' in p && typeof p.text === 'string' ? p.text : '')).join(''),
    };
  }
  return { role: m.role, content: '' };
}

export function audioUnsupported(param: string, eventId: string | null): ProtocolError {
  return new ProtocolError(
    'audio_not_supported',
    `${param}: this server has no text-to-speech engine (TTS_PROVIDER=none); use ["text"].`,
    { param, eventId },
  );
}

/** OpenAI's error code for an item id it does not know, by the event that named it. */
const UNKNOWN_ITEM_CODES: Record<string, string> = {
  'conversation.item.retrieve': 'item_retrieve_invalid_item_id',
  'conversation.item.delete': 'item_delete_invalid_item_id',
  'conversation.item.truncate': 'item_truncate_invalid_item_id',
};

/**
 * An item id the conversation does not hold, with OpenAI's code for the
 * event (clients such as Pipecat wait on exactly that code).
 */
export function itemNotFound(type: string, itemId: string, eventId: string | null): ProtocolError {
  return new ProtocolError(
    UNKNOWN_ITEM_CODES[type] ?? 'item_not_found',
    `${type}: no item "${itemId}" in the conversation.`,
    { param: 'item_id', eventId },
  );
}

/** An LLM failure as the client sees it: what failed and whether retrying may help. */
export function llmErrorPayload(err: TroupeError): ErrorPayload {
  return {
    type: 'llm_error',
    code: err.code === 'E_CONFIG' ? 'llm_unavailable' : 'llm_stream_error',
    message: `${err.message}${err.retryable ? ' (retrying may help)' : ''}`,
    param: null,
    event_id: null,
  };
}

/** Milliseconds to a tenth. */
export function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

/** Whether an item is a server-run tool call that has its result (or its error). */
export function finishedMcpCall(item: Item): boolean {
  return item.type === 'mcp_call' && (item.output !== null || item.error !== null);
}

/** The id of a session's one conversation (`response.conversation_id`). */
export function conversationId(sessionId: string): string {
  return `conv_${sessionId.replace(/^sess_/, '')}`;
}

/**
 * A response's `usage` from the LLM's counts, in OpenAI's shape: every token a
 * text token. Without counts (a response the LLM had no part in, or whose
 * request never reached it) every count is 0.
 */
export function responseUsage(
  counts: { prompt_tokens: number; completion_tokens: number; total_tokens: number } = {
    prompt_tokens: 0,
    completion_tokens: 0,
    total_tokens: 0,
  },
): ResponseUsage {
  return {
    total_tokens: counts.total_tokens,
    input_tokens: counts.prompt_tokens,
    output_tokens: counts.completion_tokens,
    input_token_details: {
      text_tokens: counts.prompt_tokens,
      audio_tokens: 0,
      image_tokens: 0,
      cached_tokens: 0,
      cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
    },
    output_token_details: { text_tokens: counts.completion_tokens, audio_tokens: 0 },
  };
}

/**
 * A response without the LLM (the greeting, a spoken progress line) as
 * `response.done` ends it: cancelled when something stopped it, with why;
 * its usage all zeros, as no tokens were used.
 */
export function endedResponse(
  base: ResponseObject,
  stoppedBy: string | undefined,
  output: Item[],
): ResponseObject {
  return {
    ...base,
    status: stoppedBy ? 'cancelled' : 'completed',
    status_details: stoppedBy ? { type: 'cancelled', reason: stoppedBy } : null,
    output,
    usage: responseUsage(),
  };
}

/** A response as `response.created` announces it: in progress, no output yet. */
export function inProgressResponse(
  id: string,
  modalities: ResponseObject['output_modalities'],
  metadata: ResponseObject['metadata'],
  conversation: string | null,
): ResponseObject {
  return {
    object: 'realtime.response',
    id,
    status: 'in_progress',
    status_details: null,
    output: [],
    output_modalities: modalities,
    usage: null,
    metadata,
    conversation_id: conversation,
  };
}
