/**
 * The OpenAI Agents SDK's `RealtimeSession` over WebSocket, with its default
 * session config (spoken replies, `semantic_vad`, its own transcription and
 * audio settings), against a Troupe server: its own tools, a character's
 * server tools, audio out and its history, with no error on either side.
 */
import { RealtimeAgent, tool, type RealtimeItem } from '@openai/agents-realtime';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEMO_SCRIPT, type SimScript } from '../../src/testing/index.js';
import {
  connectSdk,
  hasReply,
  itemText,
  type SdkClient,
  type WireEvent,
} from '../helpers/agents-sdk.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { chatBodies } from '../helpers/session.js';
import { fakeVoice } from '../helpers/voice.js';

/** The demo's lines, and one that makes the model call the client's clock. */
const SCRIPT: SimScript = {
  rules: [
    {
      when: { user: 'time in oslo', round: 0 },
      reply: { parts: [{ toolCall: { name: 'get_local_time', arguments: { city: 'Oslo' } } }] },
    },
    {
      when: { user: 'time in oslo', toolResult: '12:00' },
      reply: { parts: [{ text: 'It is noon in Oslo.' }] },
    },
    // The SDK's instructions replace the concierge's prompt; the handoff brings weather's.
    {
      when: { system: 'Be brief.', user: 'put me through', round: 0 },
      reply: {
        parts: [
          { toolCall: { name: 'transfer_to_weather', arguments: { reason: 'wants the weather' } } },
        ],
      },
    },
    ...DEMO_SCRIPT.rules,
  ],
};

/** A tool the SDK runs itself, counting its calls. */
function clockAgent(calls: string[]): RealtimeAgent {
  const clock = tool({
    name: 'get_local_time',
    description: 'The local time in a city.',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `12:00 in ${city}`;
    },
  });
  return new RealtimeAgent({ name: 'Assistant', instructions: 'Be brief.', tools: [clock] });
}

describe('the Agents SDK RealtimeSession with its default config', () => {
  let t: TestServer;
  let client: SdkClient | undefined;

  beforeAll(async () => {
    t = await startTestServer({ script: SCRIPT, voice: await fakeVoice() });
  });
  afterEach(() => {
    client?.close();
    client = undefined;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Server errors the SDK received, as text. */
  const serverErrors = (c: SdkClient) =>
    c.received.filter((e) => e.type === 'error').map((e) => JSON.stringify(e.error));

  it('has its session.update taken whole: instructions, tools and spoken replies', async () => {
    client = await connectSdk(t, clockAgent([]), 'character=weather');
    const answers = await client.settled();
    expect(answers.map((e) => e.type)).toEqual(['session.updated', 'session.updated']);
    const session = answers.at(-1)!.session as Record<string, unknown>;
    expect(session.output_modalities).toEqual(['audio']);
    expect(session.tools).toEqual([expect.objectContaining({ name: 'get_local_time' })]);
    expect(session.instructions).toBe('Be brief.');
    // The GA settings it sent come back as given (the engines are the server's own).
    expect(session).toMatchObject({
      audio: {
        input: { transcription: { model: 'gpt-4o-mini-transcribe' }, noise_reduction: null },
        output: { speed: 1 },
      },
      tracing: 'auto',
      truncation: 'auto',
      include: [],
      prompt: null,
    });
    // When the session reaches SESSION_MAX_DURATION_S (an hour by default), in Unix seconds.
    expect(session.expires_at).toBeGreaterThan(Date.now() / 1000 + 3000);
    expect(serverErrors(client)).toEqual([]);
  });

  it('runs its own tool and hears the spoken reply that follows', async () => {
    const calls: string[] = [];
    client = await connectSdk(t, clockAgent(calls), 'character=weather');
    client.session.sendMessage("What's the time in Oslo?");
    const history = await client.historyWhere('the reply after the clock', (h) =>
      hasReply(h, 'It is noon in Oslo.'),
    );
    expect(calls).toEqual(['Oslo']);
    const call = history.find((i) => i.type === 'function_call');
    expect(call && itemText(call)).toContain('get_local_time');
    expect(client.audioBytes()).toBeGreaterThan(0);
    expect(serverErrors(client)).toEqual([]);
    expect(client.errors).toEqual([]);
  });

  it("sees the character's server tool as an mcp_call it never answers", async () => {
    client = await connectSdk(t, clockAgent([]), 'character=weather');
    await client.settled();
    const asked = chatBodies(t.simulator).length;
    client.session.sendMessage('Celsius, please.');
    const history = await client.historyWhere('the reply after the weather tool', (h) =>
      hasReply(h, 'in Glasgow right now.'),
    );
    // The SDK asks for a response after each mcp_call (as OpenAI's API ends one
    // there); Troupe answered in the same response, so that one is empty.
    const followUp = await client.nextReceived(
      'response.done',
      (e) => (e.response as { metadata?: { troupe?: string } }).metadata?.troupe === 'answered',
    );
    expect(followUp.response).toMatchObject({ status: 'completed', output: [] });
    expect(chatBodies(t.simulator).length - asked).toBe(2);
    const said = client.session.history.filter(
      (i) => i.type === 'message' && i.role === 'assistant' && itemText(i).includes('in Glasgow'),
    );
    expect(said).toHaveLength(1);
    const call = history.find((i) => i.type === 'mcp_call');
    expect(call).toMatchObject({ name: 'get_current_weather', status: 'completed' });
    expect(call && itemText(call)).toMatch(/temperature/);
    // The SDK answered no tool call: Troupe ran it.
    const answers = client.sent.filter(
      (e) =>
        e.type === 'conversation.item.create' &&
        (e.item as { type?: string }).type === 'function_call_output',
    );
    expect(answers).toEqual([]);
    expect(client.audioBytes()).toBeGreaterThan(0);
    expect(serverErrors(client)).toEqual([]);
    expect(client.errors).toEqual([]);
  });

  it('sees a handoff as an mcp_call it never answers, then hears the new character', async () => {
    client = await connectSdk(t, clockAgent([]), 'character=concierge');
    client.session.sendMessage('Put me through for the weather in Glasgow.');
    const history = await client.historyWhere("weather's answer after the handoff", (h) =>
      hasReply(h, 'in celsius or fahrenheit?'),
    );
    const call = history.find((i) => i.type === 'mcp_call');
    expect(call).toMatchObject({ name: 'transfer_to_weather', status: 'completed' });
    const updated = client.received.filter((e) => e.type === 'session.updated').at(-1);
    expect((updated?.session as { character?: string }).character).toBe('weather');
    const answers = client.sent.filter(
      (e) =>
        e.type === 'conversation.item.create' &&
        (e.item as { type?: string }).type === 'function_call_output',
    );
    expect(answers).toEqual([]);
    expect(client.audioBytes()).toBeGreaterThan(0);
    expect(serverErrors(client)).toEqual([]);
    expect(client.errors).toEqual([]);
  });

  it('gets a resumed conversation back in its history, and goes on from it', async () => {
    client = await connectSdk(t, clockAgent([]), 'character=weather');
    client.session.sendMessage("What's the weather in Glasgow?");
    await client.historyWhere('the first reply', (h) => hasReply(h, 'celsius or fahrenheit'));
    const created = await client.nextReceived('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    client.close();
    // The SDK empties its history as its connect() returns: the conversation
    // is announced after that, not with the handshake's answer.
    client = await connectSdk(t, clockAgent([]), `character=weather&resume=${token}`);
    const asked = (h: RealtimeItem[]) =>
      h.some((i) => i.type === 'message' && i.role === 'user' && itemText(i).includes('Glasgow'));
    await client.historyWhere('the resumed items', (h) => asked(h) && hasReply(h, 'celsius or'));
    client.session.sendMessage('Celsius, please.');
    const history = await client.historyWhere('the reply after the resume', (h) =>
      hasReply(h, '°C and'),
    );
    expect(asked(history)).toBe(true);
    expect(serverErrors(client)).toEqual([]);
    expect(client.errors).toEqual([]);
  });

  it('resumed after a reply with a character tool, makes no reply nobody asked for', async () => {
    client = await connectSdk(t, clockAgent([]), 'character=weather');
    client.session.sendMessage("What's the weather in Glasgow?");
    await client.historyWhere('the first reply', (h) => hasReply(h, 'celsius or fahrenheit'));
    client.session.sendMessage('Celsius, please.');
    await client.historyWhere('the reply after the tool', (h) => hasReply(h, '°C and'));
    const created = await client.nextReceived('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    client.close();
    const asked = chatBodies(t.simulator).length;

    // The SDK asks for a response for each mcp_call it sees done, the resumed one too.
    client = await connectSdk(t, clockAgent([]), `character=weather&resume=${token}`);
    const call = await client.nextReceived(
      'conversation.item.done',
      (e) => (e.item as { type: string }).type === 'mcp_call',
    );
    const done = await client.nextReceived('response.done');
    expect(done.response).toMatchObject({
      output: [],
      metadata: { troupe: 'answered', answered_by: (call.item as { id: string }).id },
    });
    expect(chatBodies(t.simulator).length).toBe(asked);
    expect(serverErrors(client)).toEqual([]);
    expect(client.errors).toEqual([]);
  });

  it('cuts off the spoken reply after a character tool and gets no second reply for its follow-up', async () => {
    client = await connectSdk(t, clockAgent([]), 'character=weather');
    client.session.sendMessage("What's the weather in Glasgow?");
    await client.historyWhere('the first reply', (h) => hasReply(h, 'celsius or fahrenheit'));
    const asked = chatBodies(t.simulator).length;
    const from = client.received.length;
    const since = (e: WireEvent): boolean => client!.received.indexOf(e) >= from;
    client.session.sendMessage('Celsius, please.');
    const call = await client.nextReceived(
      'conversation.item.done',
      (e) => since(e) && (e.item as { type: string }).type === 'mcp_call',
    );
    // Its words after the tool are playing; the user talks over them: the
    // SDK cancels, truncates the reply's audio and asks for the follow-up.
    await client.nextReceived(
      'response.output_audio.delta',
      (e) => client!.received.indexOf(e) > client!.received.indexOf(call),
    );
    client.session.interrupt();
    const cut = await client.nextReceived('response.done', since);
    expect(cut.response).toMatchObject({ status: 'cancelled' });
    const followUp = await client.nextReceived(
      'response.done',
      (e) => client!.received.indexOf(e) > client!.received.indexOf(cut),
    );
    expect(followUp.response).toMatchObject({
      output: [],
      metadata: { troupe: 'answered', answered_by: (cut.response as { id: string }).id },
    });
    expect(client.sent.map((e) => e.type)).toContain('conversation.item.truncate');
    // The round that called the tool and the one after it; not a third.
    expect(chatBodies(t.simulator).length).toBe(asked + 2);
    expect(serverErrors(client)).toEqual([]);
  });

  it('hears a background tool start and its result told later, answering neither', async () => {
    client = await connectSdk(t, clockAgent([]), 'character=travel-agent');
    client.session.sendMessage('Find flights from London to Lisbon next Friday.');
    const history = await client.historyWhere('the follow-up after the flight search', (h) =>
      hasReply(h, 'Your search is back!'),
    );
    // Two completed mcp_call items: the call (output "Started: …") and its result.
    const calls = history.filter((i) => i.type === 'mcp_call');
    expect(calls.map((c) => (c as { name: string }).name)).toEqual([
      'search_flights',
      'search_flights',
    ]);
    expect(itemText(calls[0]!)).toMatch(/Started: search_flights/);
    expect(itemText(calls[1]!)).toMatch(/flights/);
    const answers = client.sent.filter(
      (e) =>
        e.type === 'conversation.item.create' &&
        (e.item as { type?: string }).type === 'function_call_output',
    );
    expect(answers).toEqual([]);
    expect(serverErrors(client)).toEqual([]);
    expect(client.errors).toEqual([]);
  });
});
