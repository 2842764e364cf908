import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { character, characterDir, type CharacterDir } from '../helpers/characters.js';
import type { TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  chatBodies,
  doneOf,
  lastChat,
  nextError,
  openSession,
  outline,
  textOf,
  turn,
  userMessage,
} from '../helpers/session.js';

const say = (text: string): SimReply => ({ parts: [{ text }] });
const GLASGOW = { location: 'Glasgow, Scotland', format: 'celsius' };

const SCRIPT: SimScript = {
  rules: [
    {
      when: { user: 'what time', round: 0 },
      reply: {
        parts: [{ text: 'Let me look. ' }, { toolCall: { name: 'get_time', arguments: {} } }],
      },
    },
    { when: { user: 'what time', toolResult: '12:34' }, reply: say('It is 12:34.') },
    { when: { toolResult: 'sent no output' }, reply: say('I could not get the time.') },
    {
      when: { user: 'weather and time', round: 0 },
      reply: {
        parts: [
          { toolCall: { name: 'get_current_weather', arguments: GLASGOW } },
          { toolCall: { name: 'get_time', arguments: {} } },
        ],
      },
    },
    { when: { user: 'weather and time', toolResult: '12:34' }, reply: say('Mild, at 12:34.') },
  ],
  fallback: say('Okay.'),
};

const GET_TIME = {
  type: 'function',
  name: 'get_time',
  description: 'The time where the user is',
  parameters: { type: 'object', properties: { tz: { type: 'string' } } },
};

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ script: SCRIPT });
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());

/** A weather session that offers `get_time` as a client-side tool. */
async function sessionWithClientTool(): Promise<TestClient> {
  const c = await openSession(t, 'character=weather');
  c.send({ type: 'session.update', session: { tools: [GET_TIME] } });
  await c.next('session.updated');
  return c;
}

/** The function_call item a response ended with. */
function pendingCall(events: Awaited<ReturnType<typeof turn>>) {
  const done = events.filter(
    (e) =>
      e.type === 'response.output_item.done' &&
      (e.item as { type: string }).type === 'function_call',
  );
  const item = done.at(-1)!.item as { id: string; call_id: string; name: string };
  expect(item.name).toBe('get_time');
  return item;
}

function functionOutput(callId: string, output: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'conversation.item.create',
    ...extra,
    item: { type: 'function_call_output', call_id: callId, output },
  };
}

describe('client-side tools', () => {
  it('offers the client tool to the model beside the character tools', async () => {
    const c = await sessionWithClientTool();
    await turn(c, 'Hello?');
    expect(lastChat(t.simulator).tools).toEqual([
      expect.objectContaining({
        function: expect.objectContaining({ name: 'get_current_weather' }),
      }),
      expect.objectContaining({
        function: expect.objectContaining({ name: 'get_n_day_weather_forecast' }),
      }),
      {
        type: 'function',
        function: {
          name: 'get_time',
          description: 'The time where the user is',
          parameters: GET_TIME.parameters,
        },
      },
    ]);
    await c.close();
  });

  it('hands a call to the client, then resumes with the output the client sends', async () => {
    const c = await sessionWithClientTool();
    const first = await turn(c, 'What time is it?');
    const call = pendingCall(first);
    const response = doneOf(first);
    expect(response).toMatchObject({
      status: 'completed',
      troupe: {
        tool_rounds: 1,
        tools: [{ call_id: call.call_id, name: 'get_time', outcome: 'pending_client' }],
      },
    });
    expect(response.output.map((i) => i.type)).toEqual(['message', 'function_call']);
    expect(first.map((e) => e.type)).not.toContain('troupe.tool_call.result');
    expect(chatBodies(t.simulator)).toHaveLength(1);

    c.send(functionOutput(call.call_id, '{"time":"12:34"}'));
    const added = await c.next('conversation.item.added');
    expect(added).toMatchObject({
      previous_item_id: call.id,
      item: { type: 'function_call_output', call_id: call.call_id, output: '{"time":"12:34"}' },
    });
    await c.next('conversation.item.done');

    c.send({ type: 'response.create' });
    const second = await c.untilDone();
    expect(textOf(second)).toBe('It is 12:34.');
    expect(doneOf(second).status).toBe('completed');
    expect(outline(lastChat(t.simulator).messages).slice(-3)).toEqual([
      'user: What time is it?',
      `assistant: Let me look. [get_time(${call.call_id})]`,
      `tool(${call.call_id}): {"time":"12:34"}`,
    ]);
    await c.close();
  });

  it('refuses output for a call id that is not waiting, and output sent twice', async () => {
    const c = await sessionWithClientTool();
    c.send(functionOutput('call_nope', 'x', { event_id: 'evt_out' }));
    expect(await nextError(c, 'invalid_value')).toMatchObject({
      param: 'item.call_id',
      event_id: 'evt_out',
    });

    const call = pendingCall(await turn(c, 'What time is it?'));
    c.send(functionOutput('call_nope', 'x'));
    expect((await nextError(c, 'invalid_value')).message).toContain(call.call_id);
    c.send(functionOutput(call.call_id, '12:34'));
    await c.next('conversation.item.done');
    c.send(functionOutput(call.call_id, '12:34'));
    await nextError(c, 'invalid_value');

    c.send({ type: 'response.create' });
    expect(textOf(await c.untilDone())).toBe('It is 12:34.');
    await c.close();
  });

  it('records a stand-in output when the client answers with response.create alone', async () => {
    const c = await sessionWithClientTool();
    const call = pendingCall(await turn(c, 'What time is it?'));

    c.send({ type: 'response.create' });
    const events = await c.untilDone();
    const standIn = events.find((e) => e.type === 'conversation.item.added')!;
    expect(standIn).toMatchObject({
      previous_item_id: call.id,
      item: { type: 'function_call_output', call_id: call.call_id },
    });
    expect(doneOf(events).status).toBe('completed');
    expect(textOf(events)).toBe('I could not get the time.');
    const last = lastChat(t.simulator).messages.at(-1);
    expect(last).toMatchObject({ role: 'tool', tool_call_id: call.call_id });
    expect(t.simulator.requests.every((r) => r.status === 200)).toBe(true);
    await c.close();
  });

  it('keeps the stand-in next to its call when the client moved on to a new message', async () => {
    const c = await sessionWithClientTool();
    const call = pendingCall(await turn(c, 'What time is it?'));

    const events = await turn(c, 'Never mind.');
    expect(doneOf(events).status).toBe('completed');
    expect(textOf(events)).toBe('Okay.');
    expect(outline(lastChat(t.simulator).messages).slice(-4)).toEqual([
      'user: What time is it?',
      `assistant: Let me look. [get_time(${call.call_id})]`,
      `tool(${call.call_id}): Error: the client sent no output for this call.`,
      'user: Never mind.',
    ]);
    await c.close();
  });

  it('places output sent after a newer message right after its call', async () => {
    const c = await sessionWithClientTool();
    const call = pendingCall(await turn(c, 'What time is it?'));
    c.send(userMessage('Also, hurry.'));
    const user = (await c.next('conversation.item.done')).item as { id: string };

    c.send(functionOutput(call.call_id, '{"time":"12:34"}'));
    const added = await c.next('conversation.item.added');
    // It follows the call in the conversation, not the newer message.
    expect(added.previous_item_id).toBe(call.id);
    expect(added.previous_item_id).not.toBe(user.id);

    c.send({ type: 'response.create' });
    expect(doneOf(await c.untilDone()).status).toBe('completed');
    expect(outline(lastChat(t.simulator).messages).slice(-4)).toEqual([
      'user: What time is it?',
      `assistant: Let me look. [get_time(${call.call_id})]`,
      `tool(${call.call_id}): {"time":"12:34"}`,
      'user: Also, hurry.',
    ]);
    await c.close();
  });

  it('runs the server-side call of a mixed round and hands the client-side one over', async () => {
    const c = await sessionWithClientTool();
    const first = await turn(c, "What's the weather and time?");
    const call = pendingCall(first);
    const result = first.find((e) => e.type === 'troupe.tool_call.result')!;
    expect(result).toMatchObject({ name: 'get_current_weather', outcome: 'ok' });
    const response = doneOf(first);
    expect(response).toMatchObject({
      status: 'completed',
      troupe: {
        tool_rounds: 1,
        llm_requests: 1,
        tools: [
          { name: 'get_current_weather', outcome: 'ok' },
          { name: 'get_time', outcome: 'pending_client', call_id: call.call_id },
        ],
      },
    });

    c.send(functionOutput(call.call_id, '12:34'));
    await c.next('conversation.item.done');
    c.send({ type: 'response.create' });
    const second = await c.untilDone();
    expect(textOf(second)).toBe('Mild, at 12:34.');
    const tail = outline(lastChat(t.simulator).messages).slice(-4);
    expect(tail[0]).toBe("user: What's the weather and time?");
    expect(tail[1]).toMatch(/^assistant: \[get_current_weather\(.+\), get_time\(.+\)\]$/);
    expect(tail[2]).toMatch(/^tool\(.+\): \{"location":"Glasgow, Scotland"/);
    expect(tail[3]).toBe(`tool(${call.call_id}): 12:34`);
    await c.close();
  });
});

describe('client-side tools of characters without call ids on the wire', () => {
  let chars: CharacterDir;
  let s: TestServer;
  beforeAll(async () => {
    chars = await characterDir({
      'legacy.ts': character({ name: 'Legacy', extra: "toolFormat: 'functions'," }),
      'prompted.ts': character({ name: 'Prompted', extra: "toolMode: 'prompt'," }),
    });
    s = await startTestServer({
      script: {
        rules: [
          {
            when: { user: 'what time', round: 0, system: 'TOOL_CALL' },
            reply: {
              parts: [{ text: 'TOOL_CALL: {"tool_name": "get_time", "parameters": {}}\n' }],
            },
          },
          {
            when: { user: 'what time', round: 0 },
            reply: { parts: [{ toolCall: { name: 'get_time', arguments: {} } }] },
          },
        ],
        fallback: say('Okay.'),
      },
      env: { CHARACTERS_DIR: chars.dir },
      simulator: { profile: 'legacy-functions' },
    });
  });
  afterAll(async () => {
    await s.close();
    await chars.cleanup();
  });

  it.each(['legacy', 'prompted'])(
    'keeps the %s result next to its call when the client moved on to a new message',
    async (id) => {
      s.simulator.clearRequests();
      const c = await openSession(s, `character=${id}`);
      c.send({ type: 'session.update', session: { tools: [GET_TIME] } });
      await c.next('session.updated');
      const call = pendingCall(await turn(c, 'What time is it?'));
      c.send(userMessage('Also, hurry.'));
      await c.next('conversation.item.done', (e) => JSON.stringify(e.item).includes('hurry'));
      c.send(functionOutput(call.call_id, '12:34'));
      expect((await c.next('conversation.item.added')).previous_item_id).toBe(call.id);

      c.send({ type: 'response.create' });
      expect(doneOf(await c.untilDone()).status).toBe('completed');
      const chats = s.simulator.requests.filter((r) => r.path === '/v1/chat/completions');
      expect(chats.map((r) => r.status)).toEqual([200, 200]);
      const roles = lastChat(s.simulator).messages.map((m) => m.role);
      // The result (a function message, or a TOOL_RESULT user message) right after the call.
      expect(roles.slice(-4)).toEqual(
        id === 'legacy'
          ? ['user', 'assistant', 'function', 'user']
          : ['user', 'assistant', 'user', 'user'],
      );
      const result = lastChat(s.simulator).messages.at(-2)!;
      expect(JSON.stringify(result.content)).toContain('12:34');
      await c.close();
    },
  );
});
