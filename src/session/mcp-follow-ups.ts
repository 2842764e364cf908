/**
 * The `response.create` a Realtime client sends after the `mcp_call` items
 * it sees done. OpenAI's Realtime API ends a response at a call of an MCP
 * tool and makes no response after it, so clients ask for one: the Agents
 * SDK (`@openai/agents-realtime`) does by default
 * (`automaticallyTriggerResponseForMcpToolCalls`), once the response under
 * way is done. Troupe runs its tools within the response and answers in it:
 * a response made for that request would say the answer again. This part
 * watches what the client is sent, as such a client does, and knows when a
 * `response.create` is that follow-up, already answered.
 */
import type { ServerEvent } from './events.js';

/** Follow-ups of one session's `mcp_call` items. */
export class McpFollowUps {
  /** An `mcp_call` was done since the last conversation response ended. */
  #owed = false;
  /** The response that answered the calls, while nothing came after it. */
  #answeredBy: string | undefined;
  /** A conversation response is under way. */
  #running = false;
  /** The user said something while it ran: that is the next response's to answer. */
  #userSpokeMeanwhile = false;

  /** `send`, with what it sends watched. */
  watch(send: (event: ServerEvent) => void): (event: ServerEvent) => void {
    return (event) => {
      this.#saw(event);
      send(event);
    };
  }

  #saw(event: ServerEvent): void {
    switch (event.type) {
      case 'conversation.item.done':
        if (event.item.type === 'mcp_call') this.#owed = true;
        return;
      case 'response.done': {
        const { response } = event;
        // Out of band: not the conversation's.
        if (response.conversation_id === null) return;
        const answered = this.#owed && response.status === 'completed';
        this.#answeredBy = answered && !this.#userSpokeMeanwhile ? response.id : undefined;
        this.#owed = false;
        this.#running = false;
        return;
      }
      case 'response.created':
        if (event.response.conversation_id === null) return;
        this.#answeredBy = undefined;
        this.#running = true;
        this.#userSpokeMeanwhile = false;
        return;
      // Anything added, taken out or cut after the answer: a request now asks for a new reply.
      case 'conversation.item.added':
        if (this.#running && event.item.type === 'message' && event.item.role === 'user') {
          this.#userSpokeMeanwhile = true;
        }
        this.#answeredBy = undefined;
        return;
      case 'conversation.item.deleted':
      case 'conversation.item.truncated':
        this.#answeredBy = undefined;
        return;
      default:
        return;
    }
  }

  /**
   * The response that already answered, when a `response.create` with no
   * `response` of its own comes right after the calls' answer, nothing in
   * between; it answers that one request only.
   */
  answered(request: { response?: unknown }): string | undefined {
    if (request.response !== undefined) return undefined;
    const by = this.#answeredBy;
    this.#answeredBy = undefined;
    return by;
  }
}
