/**
 * Schemas of conversation items a client sends: messages with their content
 * parts, function calls and their outputs, and (in `response.input`)
 * references to items by id.
 */
import { z } from 'zod';
import type { ContentPart } from '../session/events.js';
import { functionName, nullAsUnset } from './field-schemas.js';

const text = z.string();

/** Content parts; beta's `text` (assistant) becomes `output_text`. */
const contentPart = z.union([
  z.strictObject({ type: z.literal('input_text'), text }),
  z.strictObject({
    type: z.literal('input_image'),
    image_url: z.string().superRefine((u, ctx) => {
      const data = /^data:image\/[a-z0-9.+-]+;base64,/i.exec(u);
      if (data === null && !/^https?:\/\//i.test(u)) {
        ctx.addIssue({
          code: 'custom',
          message: 'expected a data:image/…;base64 URL or an http(s) URL',
        });
      } else if (data !== null && !isBase64(u.slice(data[0].length))) {
        // The LLM refuses the image on every later turn: better refused here, once.
        ctx.addIssue({
          code: 'custom',
          message:
            'expected base64 after ";base64," (letters, digits, + and /, padded with = to a multiple of 4 characters)',
        });
      }
    }),
    detail: nullAsUnset(z.enum(['auto', 'low', 'high'])),
  }),
  z.strictObject({
    type: z.literal('input_audio'),
    audio: nullAsUnset(z.string()),
    transcript: z.string().nullable().optional(),
  }),
  z
    .strictObject({ type: z.enum(['output_text', 'text']), text })
    .transform((p): ContentPart => ({ type: 'output_text', text: p.text })),
  z
    .strictObject({
      type: z.enum(['output_audio', 'audio']),
      audio: nullAsUnset(z.string()),
      transcript: z.string().nullable().optional(),
    })
    .transform((p): ContentPart => ({ ...p, type: 'output_audio' })),
]);

/** Most content parts of one message: a message is a turn, not a document store. */
export const MAX_CONTENT_PARTS = 64;

/** An item id. */
export const itemId = z.string().min(1).max(64);

/** The id a client gives a new item: printable, and not previous_item_id's `root`. */
const newItemId = itemId
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  .regex(/^[^\u0000-\u001f\u007f]*$/, { error: 'expected an id without control characters' })
  .refine((id) => id !== 'root', {
    error:
      'expected an id other than "root", which previous_item_id uses for the start of the conversation',
  });

const messageItem = z.strictObject({
  type: z.literal('message'),
  id: nullAsUnset(newItemId),
  object: nullAsUnset(z.literal('realtime.item')),
  status: nullAsUnset(z.string()),
  role: z.enum(['user', 'assistant', 'system']),
  content: z
    .array(contentPart)
    .min(1, { error: 'expected at least one content part' })
    .max(MAX_CONTENT_PARTS, { error: `expected at most ${MAX_CONTENT_PARTS} content parts` }),
});

const functionCallOutputItem = z.strictObject({
  type: z.literal('function_call_output'),
  id: nullAsUnset(newItemId),
  object: nullAsUnset(z.literal('realtime.item')),
  call_id: z.string().min(1),
  output: z.string(),
  status: nullAsUnset(z.string()),
});

/** GA: a call the client records as made; `arguments` must be JSON (the model reads it back). */
const functionCallItem = z.strictObject({
  type: z.literal('function_call'),
  id: nullAsUnset(newItemId),
  object: nullAsUnset(z.literal('realtime.item')),
  status: nullAsUnset(z.string()),
  call_id: nullAsUnset(z.string().min(1).max(128)),
  name: functionName,
  arguments: z.string().refine(isJsonObjectText, { error: 'expected a JSON object as text' }),
});

/** A conversation item by id (GA `item_reference`), in `response.input`. */
const itemReference = z.strictObject({ type: z.literal('item_reference'), id: itemId });

/** Items a response's `input` may hold (GA `response.input`). */
export const inputItem = z.discriminatedUnion(
  'type',
  [messageItem, functionCallOutputItem, functionCallItem, itemReference],
  {
    error:
      'expected an item of type "message", "function_call", "function_call_output" or "item_reference"',
  },
);

/** An item of `conversation.item.create`. */
export const item = z.discriminatedUnion(
  'type',
  [messageItem, functionCallOutputItem, functionCallItem],
  {
    error: 'expected an item of type "message", "function_call" or "function_call_output"',
  },
);

/** An item as the session takes it: without the read-only `object` and `status`. */
export function stripItem<T extends { object?: unknown; status?: unknown }>(
  item: T,
): Omit<T, 'object' | 'status'> {
  const { object: _object, status: _status, ...rest } = item;
  return rest;
}

/** Whether text is non-empty, padded base64 (no whitespace, no URL-safe alphabet). */
function isBase64(text: string): boolean {
  return text.length > 0 && text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text);
}

function isJsonObjectText(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value);
  } catch {
    return false;
  }
}
