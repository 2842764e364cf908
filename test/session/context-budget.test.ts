import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/llm/chunk.js';
import { estimateTokens } from '../../src/llm/token-estimate.js';
import type { SimRule } from '../../src/testing/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { chatBodies, doneOf, openSession, turn } from '../helpers/session.js';

/** The history budget of this suite, in estimated tokens. */
const BUDGET = 300;
const TURNS = 7;
/** Turns whose reply calls a tool (so trimming meets tool messages). */
const TOOL_TURNS = new Set([2, 3, 5]);
const PADDING = ' and so on'.repeat(30);

const tag = (n: number) => `turn-${String(n).padStart(2, '0')}`;
const reply = (n: number) => `reply-${String(n).padStart(2, '0')}`;

function rules(): SimRule[] {
  const out: SimRule[] = [];
  for (let n = 1; n <= TURNS + 1; n++) {
    if (TOOL_TURNS.has(n)) {
      out.push({
        when: { user: tag(n), round: 0 },
        reply: {
          parts: [
            {
              toolCall: {
                name: 'get_current_weather',
                arguments: { location: 'Glasgow, Scotland', format: 'celsius' },
              },
            },
          ],
        },
      });
    }
    out.push({ when: { user: tag(n) }, reply: { parts: [{ text: `${reply(n)}${PADDING}` }] } });
  }
  return out;
}

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({
    script: { rules: rules() },
    env: { CONTEXT_TOKENS: String(BUDGET) },
  });
});
afterAll(() => t.close());

const textOf = (m: ChatMessage) => (typeof m.content === 'string' ? m.content : '');

/** The turn numbers whose user message (or reply) a request carries. */
function turnsIn(messages: readonly ChatMessage[], role: 'user' | 'assistant'): number[] {
  const label = role === 'user' ? 'turn-' : 'reply-';
  return messages
    .filter((m) => m.role === role && textOf(m).startsWith(label))
    .map((m) => Number(textOf(m).slice(label.length, label.length + 2)));
}

describe('the context budget', () => {
  it('drops the oldest turns whole and keeps the system prompt and the newest message', async () => {
    const c = await openSession(t, 'character=weather');
    for (let n = 1; n <= TURNS; n++) {
      const events = await turn(c, `${tag(n)}: tell me about it${PADDING}.`);
      expect(doneOf(events).status).toBe('completed');
    }

    const bodies = chatBodies(t.simulator);
    expect(bodies).toHaveLength(TURNS + TOOL_TURNS.size);
    // The history the simulator checked was valid every time (it answers 400 otherwise).
    expect(t.simulator.requests.every((r) => r.status === 200)).toBe(true);

    let dropped = false;
    for (const { messages } of bodies) {
      expect(messages[0]).toMatchObject({
        role: 'system',
        content: expect.stringContaining("Don't"),
      });
      const users = turnsIn(messages, 'user');
      const newest = users.at(-1)!;
      // The newest user message is there, and the turns kept are the newest ones, in order.
      expect(users).toEqual(
        Array.from({ length: users.length }, (_, i) => newest - users.length + 1 + i),
      );
      // A kept turn keeps its reply: turns go whole.
      expect(turnsIn(messages, 'assistant')).toEqual(users.slice(0, -1));
      if (users[0]! > 1) dropped = true;

      // No tool message without the assistant message that made its call right before it.
      messages.forEach((m, i) => {
        if (m.role !== 'tool') return;
        let j = i - 1;
        while (j >= 0 && messages[j]!.role === 'tool') j--;
        const owner = messages[j]!;
        expect(owner.role).toBe('assistant');
        expect(
          (owner as { tool_calls?: Array<{ id: string }> }).tool_calls?.map((call) => call.id),
        ).toContain(m.tool_call_id);
      });

      // Every request fits the budget (tool rounds included: older turns make room),
      // unless the newest turn alone does not.
      const tokens = messages.reduce((sum, m) => sum + estimateTokens(m), 0);
      if (users.length > 1) {
        expect(tokens).toBeLessThanOrEqual(BUDGET);
      }
    }
    expect(dropped).toBe(true);
    // The greeting went with the first turns.
    const last = bodies.at(-1)!.messages;
    expect(last.some((m) => m.role === 'assistant' && textOf(m).startsWith('Hi!'))).toBe(false);

    // The client was told of every item let go, and those are gone from the conversation.
    const trims = c.events.filter((e) => e.type === 'troupe.conversation.trimmed');
    expect(trims.length).toBeGreaterThan(0);
    const gone = trims.flatMap((e) => e.item_ids as string[]);
    expect(trims.every((e) => e.context_tokens === BUDGET)).toBe(true);
    const greeting = c.events.find((e) => e.type === 'conversation.item.added')!.item as {
      id: string;
    };
    expect(gone[0]).toBe(greeting.id);
    expect(new Set(gone).size).toBe(gone.length);
    c.send({ type: 'conversation.item.retrieve', item_id: gone.at(-1), event_id: 'evt_gone' });
    const refused = await c.next(
      'error',
      (e) => (e.error as { event_id?: string }).event_id === 'evt_gone',
    );
    expect(refused.error).toMatchObject({ code: 'item_retrieve_invalid_item_id' });
    await c.close();
  });

  it('still sends a newest message that alone is over the budget, with the system prompt', async () => {
    const c = await openSession(t, 'character=weather');
    await turn(c, `${tag(1)}: a short one.`);
    t.simulator.clearRequests();
    const huge = `${tag(8)}: ${'very long '.repeat(200)}`;
    const events = await turn(c, huge);
    expect(doneOf(events).status).toBe('completed');
    const { messages } = chatBodies(t.simulator)[0]!;
    expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(messages[1]).toEqual({ role: 'user', content: huge });
    await c.close();
  });
});
