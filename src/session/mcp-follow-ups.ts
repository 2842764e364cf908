/**
 * The `response.create` a Realtime client sends after the `mcp_call` items
 * it sees done. OpenAI's Realtime API ends a response at a call of an MCP
 * tool and makes no response after it, so clients ask for one: the Agents
 * SDK (`@openai/agents-realtime`) does by default
 * (`automaticallyTriggerResponseForMcpToolCalls`), one request for each
 * `conversation.item.done` of an `mcp_call`, each sent once the response
 * under way is done. Troupe runs its tools within the response and answers
 * in it: a response made for such a request would say the answer again (over
 * the user, when they cut the reply off by speaking). This part watches what
 * the client is sent, as such a client does, and knows when a
 * `response.create` is that follow-up, already answered.
 */
import type { Item, ServerEvent } from './events.js';

/** Follow-ups of one session's `mcp_call` items. */
export class McpFollowUps {
  /** The `mcp_call` items done since the last conversation response ended (or announced by a resume). */
  #owed: string[] = [];
  /** What answered each follow-up still to come, while nothing came after it (a response's id, or a resumed call's). */
  #answers: string[] = [];
  /** A conversation response is under way. */
  #running = false;
  /** The user said something while it ran: that is the next response's to answer. */
  #userSpokeMeanwhile = false;
  /** Follow-ups still to come after a resume that owes a reply (see {@link restored}). */
  #owedLeft = 0;
  /** The response now running was made by the first of those: it answers the rest. */
  #goesOn = false;
  /** The items of the last conversation response: the client may cut them (truncate) and ask on. */
  #replyItems = new Set<string>();

  /** `send`, with what it sends watched. */
  watch(send: (event: ServerEvent) => void): (event: ServerEvent) => void {
    return (event) => {
      this.#saw(event);
      send(event);
    };
  }

  /**
   * The conversation a resume restored was announced. A client may ask for
   * a follow-up to each call it saw (the Agents SDK does, for every
   * `mcp_call` it sees done): the calls of finished replies were answered
   * in them, so those requests get empty responses. When a reply is owed
   * ({@link owesReply}), the first request makes it, whichever call it is
   * for, and it answers the rest: a client that asks once (not the SDK)
   * gets the reply, not an empty answer.
   */
  restored(owed: boolean): void {
    this.#answers = owed ? [] : this.#owed;
    this.#owedLeft = owed ? this.#owed.length : 0;
    this.#owed = [];
  }

  #saw(event: ServerEvent): void {
    switch (event.type) {
      case 'conversation.item.done':
        if (event.item.type === 'mcp_call') this.#owed.push(event.item.id);
        return;
      case 'response.done': {
        const { response } = event;
        // Out of band: not the conversation's; an empty answer to a follow-up: not a reply.
        if (response.conversation_id === null || isFollowUpAnswer(response.metadata)) return;
        // Cut off (the user spoke, or the client stopped it): the calls' follow-up would talk over them.
        const ended = response.status === 'completed' || response.status === 'cancelled';
        const answered = ended && !this.#userSpokeMeanwhile;
        this.#answers = answered ? this.#owed.map(() => response.id) : [];
        if (this.#goesOn) {
          if (answered) for (let i = 0; i < this.#owedLeft; i++) this.#answers.push(response.id);
          this.#owedLeft = 0;
          this.#goesOn = false;
        }
        this.#owed = [];
        this.#running = false;
        return;
      }
      case 'response.created':
        if (event.response.conversation_id === null || isFollowUpAnswer(event.response.metadata)) {
          return;
        }
        this.#answers = [];
        this.#running = true;
        this.#userSpokeMeanwhile = false;
        this.#replyItems.clear();
        return;
      // Anything added, taken out or cut after the answer: a request now asks for a new reply.
      case 'conversation.item.added':
        if (this.#running && event.item.type === 'message' && event.item.role === 'user') {
          this.#userSpokeMeanwhile = true;
        }
        this.#answers = [];
        if (this.#running) this.#replyItems.add(event.item.id);
        // Not the items of the response that makes the reply owed.
        else this.#owedLeft = 0;
        return;
      case 'conversation.item.truncated':
        // The reply's own audio, cut where the user stopped hearing it (the
        // SDK truncates it as it asks for the follow-up): nothing new.
        if (this.#replyItems.has(event.item_id)) return;
        this.#answers = [];
        this.#owedLeft = 0;
        return;
      case 'conversation.item.deleted':
        this.#answers = [];
        this.#owedLeft = 0;
        return;
      default:
        return;
    }
  }

  /**
   * What already answered, when a `response.create` with no `response` of
   * its own comes right after the calls' answer, nothing in between; one
   * request for each call is answered so.
   */
  answered(request: { response?: unknown }): string | undefined {
    if (request.response !== undefined) return undefined;
    const by = this.#answers.shift();
    if (by !== undefined || this.#owedLeft === 0) return by;
    // The first follow-up after a resume that owes a reply: the reply is made.
    this.#owedLeft--;
    this.#goesOn = true;
    return undefined;
  }
}

/** The metadata of the empty response that answers a follow-up. */
export const FOLLOW_UP_ANSWER = 'answered';

function isFollowUpAnswer(metadata: Record<string, string> | null | undefined): boolean {
  return metadata?.troupe === FOLLOW_UP_ANSWER;
}

/**
 * Whether a resumed conversation owes a reply: it ends with a reply cut
 * short (its calls, or an `incomplete` assistant message: a dropped
 * connection or a stopped process cut it) or with the user's message, whose
 * reply was never asked for (the connection dropped first).
 */
export function owesReply(items: readonly Item[]): boolean {
  const last = items.at(-1);
  if (last?.type === 'mcp_call') return true;
  if (last?.type !== 'message') return false;
  return last.role === 'user' || (last.role === 'assistant' && last.status === 'incomplete');
}
