/**
 * The bytes of a chat-completions request, put together from the JSON of
 * each message. A conversation's history keeps its messages' JSON
 * ({@link keepMessageJson}) as they join it, so a request does not
 * serialise the whole conversation again at every turn: only what is new
 * (the system prompt, a round's tool results) and the request's own fields.
 */
import type { ChatMessage } from './chunk.js';

/** Messages whose JSON is longer than this, in characters (an inline image), are serialised per request instead. */
const MAX_KEPT_LENGTH = 256 * 1024;

const kept = new WeakMap<ChatMessage, Buffer>();
const OPEN = Buffer.from('{"messages":[');
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']}');

/**
 * Checks every kept JSON against a fresh serialisation when a request is
 * built: a difference (a message changed after it was kept, and not kept
 * again) is noted in `stale` and the fresh JSON sent. For tests.
 */
export const messageJsonCheck = { verify: false, stale: [] as string[] };

/**
 * Keeps `message`'s JSON (`json`, its `JSON.stringify`) for the requests
 * that send it. Call again whenever the message is changed in place.
 */
export function keepMessageJson(message: ChatMessage, json: string): void {
  if (json.length > MAX_KEPT_LENGTH) {
    kept.delete(message);
    return;
  }
  // Its own memory, not a slice of Node's shared pool: a kept slice would keep its 8 KiB slab.
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(json));
  bytes.write(json);
  kept.set(message, bytes);
}

/**
 * The request `body` as JSON bytes: the same JSON as `JSON.stringify(body)`
 * (its `messages` first), each message's part kept or serialised now.
 *
 * @example
 * client.dispatch({ path, method: 'POST', headers, body: requestBody({ model, messages, stream: true }) }, handler);
 */
export function requestBody(body: object): Buffer {
  const { messages, ...rest } = body as { messages?: unknown };
  if (!Array.isArray(messages)) return Buffer.from(JSON.stringify(body));
  const pieces: Buffer[] = [OPEN];
  for (const [i, m] of (messages as ChatMessage[]).entries()) {
    if (i > 0) pieces.push(COMMA);
    pieces.push(messageBytes(m));
  }
  const fields = JSON.stringify(rest);
  pieces.push(fields === '{}' ? CLOSE : Buffer.from(`],${fields.slice(1)}`));
  return Buffer.concat(pieces);
}

function messageBytes(m: ChatMessage): Buffer {
  const bytes = kept.get(m);
  if (bytes === undefined) return Buffer.from(JSON.stringify(m) ?? 'null');
  if (messageJsonCheck.verify) {
    const fresh = JSON.stringify(m);
    if (!bytes.equals(Buffer.from(fresh))) {
      messageJsonCheck.stale.push(`message changed after its JSON was kept: was ${String(bytes)}`);
      return Buffer.from(fresh);
    }
  }
  return bytes;
}
