/**
 * OpenAI's compatibility mode (`/openai/v1/realtime`, `?compat=openai`), for
 * clients that stop at an event or item OpenAI's API does not send (Pipecat's
 * realtime service, LiveKit Agents): the character's own tool calls are not
 * shown, no `troupe.*` event is sent, replies are spoken by default and the
 * greeting waits to be asked for.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, say, type Received, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { idOf, lastChat, listByPrevious, turn } from '../helpers/session.js';
import { fakeVoice } from '../helpers/voice.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ voice: await fakeVoice() });
});
afterAll(() => t?.close());

const compatUrl = (query: string) =>
  `${t.wsUrl.replace('/v1/realtime', '/openai/v1/realtime')}?${query}`;

async function open(url: string): Promise<TestClient> {
  const c = await connect(url);
  await c.next('session.created');
  return c;
}

/** Every item an event carries: the conversation's, a response's output, the done response's. */
function itemsIn(events: readonly Received[]): Array<{ id: string; type: string }> {
  return events.flatMap((e) => {
    const response = e.response as { output?: Array<{ id: string; type: string }> } | undefined;
    if (response?.output) return response.output;
    return e.item ? [e.item as { id: string; type: string }] : [];
  });
}

describe("OpenAI's compatibility mode", () => {
  it("shows a reply after the character's own tool as OpenAI's API would, and the model reads the call", async () => {
    const c = await open(compatUrl('character=weather'));
    // A text client, as an OpenAI client asks for text.
    c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    await c.next('session.updated');
    const first = await turn(c, 'Celsius, please.');
    expect(
      first.filter((e) => e.type.startsWith('troupe.') || e.type.includes('mcp_call')),
    ).toEqual([]);
    expect(itemsIn(c.events).filter((i) => i.type === 'mcp_call')).toEqual([]);
    // Its words before the call and after it: two messages, the response's outputs 0 and 1,
    // the first placed right after the user's message and the second after the first.
    const done = first.find((e) => e.type === 'response.done')!;
    const output = (done.response as { output: Array<{ id: string; type: string }> }).output;
    expect(output.map((i) => i.type)).toEqual(['message', 'message']);
    const indexes = first.filter((e) => 'output_index' in e).map((e) => e.output_index);
    expect(new Set(indexes)).toEqual(new Set([0, 1]));
    const userId = idOf(c.events.find((e) => e.type === 'conversation.item.added')!);
    const previousOf = (id: string) =>
      first.find((e) => e.type === 'conversation.item.added' && idOf(e) === id)!.previous_item_id;
    expect(previousOf(output[0]!.id)).toBe(userId);
    expect(previousOf(output[1]!.id)).toBe(output[0]!.id);
    // The model read the call and its result.
    expect(lastChat(t.simulator).messages.some((m) => m.role === 'tool')).toBe(true);

    // The next message follows the reply, and the list a client builds holds what it was shown.
    say(c, 'And the forecast for 3 days?');
    const next = await c.next('conversation.item.added');
    expect(next.previous_item_id).toBe(output[1]!.id);
    await c.next('response.done');
    expect(listByPrevious(c.events).slice(0, 4)).toEqual([
      userId,
      output[0]!.id,
      output[1]!.id,
      idOf(next),
    ]);
    await c.close();
  });

  it('is asked for with ?compat=openai too, and ?compat=troupe on its path shows everything', async () => {
    const asked = await open(`${t.wsUrl}?character=weather&compat=openai`);
    asked.send({ type: 'session.update', session: { output_modalities: ['text'] } });
    await asked.next('session.updated');
    await turn(asked, 'Celsius, please.');
    expect(itemsIn(asked.events).filter((i) => i.type === 'mcp_call')).toEqual([]);
    await asked.close();

    const troupe = await open(compatUrl('character=weather&compat=troupe'));
    troupe.send({ type: 'session.update', session: { output_modalities: ['text'] } });
    await troupe.next('session.updated');
    const events = await turn(troupe, 'Celsius, please.');
    expect(itemsIn(events).some((i) => i.type === 'mcp_call')).toBe(true);
    expect(events.some((e) => e.type === 'troupe.tool_call.result')).toBe(true);
    await troupe.close();
  });

  it('speaks replies by default and leaves the greeting until asked for', async () => {
    const c = await open(compatUrl('character=weather'));
    const created = c.events.find((e) => e.type === 'session.created')!;
    expect((created.session as { output_modalities: string[] }).output_modalities).toEqual([
      'audio',
    ]);
    const greeted = await open(compatUrl('character=weather&greeting=1'));
    const greeting = await greeted.next('conversation.item.added');
    expect(JSON.stringify(greeting.item)).toContain('Ask me about the weather');
    await greeted.next('response.done');
    await greeted.close();
    // The session that asked for nothing heard nothing: its first item is the user's.
    say(c, 'Hello there!');
    const first = await c.next('conversation.item.added');
    expect((first.item as { role: string }).role).toBe('user');
    await c.next('response.done');
    const firstResponse = c.events.findIndex((e) => e.type === 'response.created');
    expect(firstResponse).toBeGreaterThan(c.events.indexOf(first));
    await c.close();
  });

  it('refuses a mode it does not know, naming the ones there are', async () => {
    const c = await connect(`${t.wsUrl}?compat=anthropic`);
    const error = await c.next('error');
    expect(error.error).toMatchObject({ code: 'invalid_compat', param: 'compat' });
    expect((error.error as { message: string }).message).toMatch(/troupe, openai/);
    expect((await c.closed).code).toBe(1008);
  });
});
