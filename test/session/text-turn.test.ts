import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect, type Received } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  chatBodies,
  doneOf,
  lastChat,
  openSession,
  outline,
  textOf,
  turn,
} from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());

/** Event types with runs of the same delta type folded into one. */
function shape(events: readonly Received[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    const label =
      e.type === 'response.output_item.added' || e.type === 'response.output_item.done'
        ? `${e.type}(${(e.item as { type: string }).type})`
        : e.type;
    if (label.endsWith('.delta') && out.at(-1) === label) continue;
    out.push(label);
  }
  return out;
}

describe('a text turn', () => {
  it('greets with an assistant item right after session.created', async () => {
    for (const [character, greeting] of [
      ['weather', 'Hi! Ask me about the weather anywhere.'],
      ['hello', 'Hi! Who would you like me to greet?'],
    ]) {
      const c = await connect(`${t.wsUrl}?character=${character}`);
      const created = await c.next('session.created');
      const added = await c.next('conversation.item.added');
      expect(c.events.indexOf(created)).toBe(0);
      expect(added).toMatchObject({
        previous_item_id: null,
        item: {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: greeting }],
        },
      });
      expect(created.session).toMatchObject({
        character,
        troupe: { character: { id: character, greeting } },
      });
      await c.close();
    }
  });

  it('streams a reply that uses a server-side tool as Realtime events, in order', async () => {
    const c = await openSession(t, 'character=weather');
    const greeting = (await c.next('conversation.item.done')).item as { id: string };
    const events = await turn(c, 'Celsius, please.');

    expect(shape(events)).toEqual([
      'conversation.item.added',
      'conversation.item.done',
      'response.created',
      'response.output_item.added(message)',
      'conversation.item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done(message)',
      'conversation.item.done',
      // The character's tool, which the server runs: GA's mcp_call item and events.
      'response.output_item.added(mcp_call)',
      'conversation.item.added',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.in_progress',
      'response.mcp_call.completed',
      'troupe.tool_call.result',
      'response.output_item.done(mcp_call)',
      'conversation.item.done',
      'response.output_item.added(message)',
      'conversation.item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done(message)',
      'conversation.item.done',
      'response.done',
    ]);

    // Each item follows the one before it in the conversation, the user's after the greeting.
    const added = events.filter((e) => e.type === 'conversation.item.added');
    const ids = added.map((e) => (e.item as { id: string }).id);
    expect(added.map((e) => e.previous_item_id)).toEqual([greeting.id, ...ids.slice(0, -1)]);

    const texts = events.filter((e) => e.type === 'response.output_text.done').map((e) => e.text);
    expect(texts).toEqual(['Checking Glasgow. ', "It's 5 °C and windy in Glasgow right now."]);
    expect(textOf(events)).toBe(texts.join(''));

    const args = events.find((e) => e.type === 'response.mcp_call_arguments.done')!;
    const argDeltas = events
      .filter((e) => e.type === 'response.mcp_call_arguments.delta')
      .map((e) => e.delta)
      .join('');
    expect(argDeltas).toBe(args.arguments);
    expect(JSON.parse(args.arguments as string)).toEqual({
      location: 'Glasgow, Scotland',
      format: 'celsius',
    });

    const result = events.find((e) => e.type === 'troupe.tool_call.result')!;
    expect(result).toMatchObject({
      item_id: args.item_id,
      call_id: expect.any(String),
      name: 'get_current_weather',
      outcome: 'ok',
      duration_ms: expect.any(Number),
    });
    expect(JSON.parse(result.output as string)).toMatchObject({
      location: 'Glasgow, Scotland',
      format: 'celsius',
      temperature: expect.any(Number),
    });

    const response = doneOf(events);
    expect(response).toMatchObject({
      status: 'completed',
      status_details: null,
      conversation_id: expect.stringMatching(/^conv_/),
      usage: {
        total_tokens: expect.any(Number),
        input_tokens: expect.any(Number),
        output_tokens: expect.any(Number),
        input_token_details: { text_tokens: expect.any(Number), audio_tokens: 0 },
        output_token_details: { text_tokens: expect.any(Number), audio_tokens: 0 },
      },
      troupe: {
        character: 'weather',
        ttft_ms: expect.any(Number),
        tool_rounds: 1,
        llm_requests: 2,
        tools: [
          {
            call_id: result.call_id,
            name: 'get_current_weather',
            outcome: 'ok',
            duration_ms: expect.any(Number),
          },
        ],
      },
    });
    expect((response.usage as { total_tokens: number }).total_tokens).toBeGreaterThan(0);
    // GA never puts a function_call_output in a response's output: the result is the mcp_call's.
    expect(response.output.map((i) => i.type)).toEqual(['message', 'mcp_call', 'message']);
    expect(response.output[1]).toMatchObject({
      id: args.item_id,
      server_label: 'weather',
      name: 'get_current_weather',
      arguments: args.arguments,
      output: result.output,
      error: null,
    });
    expect(response.output.every((i) => i.type === 'mcp_call' || i.status === 'completed')).toBe(
      true,
    );
    await c.close();
  });

  it('sends the first turn, tool call and result included, with the second turn', async () => {
    const c = await openSession(t, 'character=weather');
    await turn(c, 'Celsius, please.');
    const second = await turn(c, 'And the forecast for 3 days?');
    expect(doneOf(second).status).toBe('completed');

    const bodies = chatBodies(t.simulator);
    expect(bodies).toHaveLength(4);
    const firstCall = bodies[0]!.messages.length;
    const callId = (bodies[1]!.messages[firstCall] as { tool_calls: Array<{ id: string }> })
      .tool_calls[0]!.id;
    const weather = (bodies[1]!.messages.at(-1) as { content: string }).content;
    expect(outline(bodies[2]!.messages).slice(1)).toEqual([
      'assistant: Hi! Ask me about the weather anywhere.',
      'user: Celsius, please.',
      `assistant: Checking Glasgow. [get_current_weather(${callId})]`,
      `tool(${callId}): ${weather}`,
      "assistant: It's 5 °C and windy in Glasgow right now.",
      'user: And the forecast for 3 days?',
    ]);
    expect(bodies[2]!.messages[0]).toMatchObject({ role: 'system' });
    expect(t.simulator.requests.every((r) => r.status === 200)).toBe(true);
    await c.close();
  });

  it('offers the character tools to the model and keeps the system prompt first', async () => {
    const c = await openSession(t, 'character=weather');
    await turn(c, "What's the weather in Glasgow?");
    const body = lastChat(t.simulator);
    expect(body.messages[0]).toEqual({
      role: 'system',
      content: expect.stringContaining("Don't make assumptions"),
    });
    expect(body.tools?.map((tool) => tool.function.name)).toEqual([
      'get_current_weather',
      'get_n_day_weather_forecast',
    ]);
    await c.close();
  });
});

describe('the openai-beta dialect', () => {
  it('streams response.text.delta and announces items with conversation.item.created', async () => {
    const c = await connect(`${t.wsUrl}?character=weather&dialect=openai-beta`);
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ modalities: ['text'], input_audio_format: 'pcm16' });
    await c.next('conversation.item.created');
    const events = await turn(c, 'Celsius, please.');
    const types = new Set(events.map((e) => e.type));

    expect(textOf(events, 'response.text.delta')).toBe(
      "Checking Glasgow. It's 5 °C and windy in Glasgow right now.",
    );
    expect(types).toContain('response.text.done');
    expect(types).toContain('conversation.item.created');
    for (const ga of [
      'response.output_text.delta',
      'response.output_text.done',
      'conversation.item.added',
      'conversation.item.done',
    ]) {
      expect(types).not.toContain(ga);
    }
    const part = events.find((e) => e.type === 'response.content_part.added')!;
    expect(part.part).toEqual({ type: 'text', text: '' });
    const response = doneOf(events);
    expect(response).toMatchObject({ status: 'completed', modalities: ['text'] });
    expect(response.output[0]).toMatchObject({ content: [{ type: 'text' }] });
    await c.close();
  });

  it('shows a temperature only when one is set: beta has no null for it', async () => {
    const c = await connect(`${t.wsUrl}?character=weather&dialect=openai-beta`);
    const created = await c.next('session.created');
    expect(created.session).not.toHaveProperty('temperature');
    c.send({ type: 'session.update', session: { temperature: 0.7 } });
    expect((await c.next('session.updated')).session).toMatchObject({ temperature: 0.7 });
    await c.close();
  });
});
