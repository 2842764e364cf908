import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  doneOf,
  lastChat,
  nextError,
  openSession,
  outline,
  turn,
  userMessage,
} from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());
beforeEach(() => t.simulator.clearRequests());

const GET_TIME = {
  type: 'function',
  name: 'get_time',
  description: 'The time where the user is',
  parameters: { type: 'object', properties: {} },
};

describe('session.update', () => {
  it('answers with session.updated showing the effective session and its character', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({
      type: 'session.update',
      session: { instructions: 'Answer in French.', tools: [GET_TIME] },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({
      character: 'weather',
      instructions: 'Answer in French.',
      tools: [GET_TIME],
      troupe: {
        character: { id: 'weather', tools: ['get_current_weather', 'get_n_day_weather_forecast'] },
      },
    });
    await c.close();
  });

  it('sends its instructions to the model instead of the character prompt', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'session.update', session: { instructions: 'You only speak in haiku.' } });
    await c.next('session.updated');
    await turn(c, 'Hello there!');
    expect(lastChat(t.simulator).messages[0]).toEqual({
      role: 'system',
      content: 'You only speak in haiku.',
    });

    // An empty string gives the character's own prompt back.
    c.send({ type: 'session.update', session: { instructions: '' } });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({ instructions: expect.stringContaining('concise') });
    await turn(c, 'Hello there!');
    expect(lastChat(t.simulator).messages[0]).toEqual({
      role: 'system',
      content: expect.stringContaining('concise'),
    });
    await c.close();
  });

  it('takes instructions for one response only, and refuses a tool_choice naming no tool', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({
      type: 'response.create',
      response: { tool_choice: { type: 'function', name: 'nope' } },
    });
    expect((await nextError(c, 'invalid_value')).param).toBe('response.tool_choice.name');

    c.send(userMessage('Celsius, please.'));
    c.send({ type: 'response.create', response: { instructions: 'Talk like a pirate.' } });
    expect(doneOf(await c.untilDone()).status).toBe('completed');
    expect(lastChat(t.simulator).messages[0]).toEqual({
      role: 'system',
      content: 'Talk like a pirate.',
    });
    await turn(c, 'Celsius, please.');
    expect(lastChat(t.simulator).messages[0]).toEqual({
      role: 'system',
      content: expect.stringContaining("Don't make assumptions"),
    });
    await c.close();
  });

  it("takes a null option as not set: LiveKit's response.create {instructions: null} replies with the session's", async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'session.update',
      session: { instructions: 'You only speak in haiku.', temperature: 0.4 },
    });
    await c.next('session.updated');
    // As LiveKit's plugin sends it (pydantic, an explicit None kept by exclude_unset).
    c.send({ type: 'session.update', session: { instructions: null, temperature: null } });
    expect((await c.next('session.updated')).session).toMatchObject({
      instructions: 'You only speak in haiku.',
      temperature: 0.4,
    });
    c.send(userMessage('Hello there!'));
    c.send({
      type: 'response.create',
      event_id: 'response_create_1',
      response: { instructions: null, metadata: { client_event_id: 'response_create_1' } },
    });
    const done = doneOf(await c.untilDone());
    expect(done).toMatchObject({
      status: 'completed',
      metadata: { client_event_id: 'response_create_1' },
    });
    expect(c.events.some((e) => e.type === 'error')).toBe(false);
    expect(lastChat(t.simulator)).toMatchObject({ temperature: 0.4 });
    expect(lastChat(t.simulator).messages[0]).toEqual({
      role: 'system',
      content: 'You only speak in haiku.',
    });
    await c.close();
  });

  it('passes temperature and max_output_tokens to the model, and response.create overrides them', async () => {
    const c = await openSession(t, 'character=plain');
    // Neither the session nor the character sets one: the LLM server's default, which Troupe cannot name.
    const created = c.events.find((e) => e.type === 'session.created')!;
    expect(created.session).not.toHaveProperty('temperature');
    c.send({ type: 'session.update', session: { temperature: 0.3, max_output_tokens: 123 } });
    expect((await c.next('session.updated')).session).toMatchObject({
      temperature: 0.3,
      max_output_tokens: 123,
    });
    await turn(c, 'Hello there!');
    expect(lastChat(t.simulator)).toMatchObject({ temperature: 0.3, max_tokens: 123 });

    c.send({ type: 'response.create', response: { temperature: 1.5, max_output_tokens: 7 } });
    await c.untilDone();
    expect(lastChat(t.simulator)).toMatchObject({ temperature: 1.5, max_tokens: 7 });

    // The beta name of the limit is the same setting.
    c.send({ type: 'session.update', session: { max_response_output_tokens: 55 } });
    await c.next('session.updated');
    await turn(c, 'Hello there!');
    expect(lastChat(t.simulator)).toMatchObject({ temperature: 0.3, max_tokens: 55 });
    await c.close();
  });

  it('switches to another character with a fresh conversation: old items deleted, new greeting', async () => {
    const c = await openSession(t, 'character=weather');
    await turn(c, 'Celsius, please.');
    const before = c.events
      .filter((e) => e.type === 'conversation.item.done')
      .map((e) => (e.item as { id: string }).id);
    expect(before.length).toBeGreaterThanOrEqual(5);

    const from = c.events.length;
    c.send({ type: 'session.update', session: { character: 'hello' } });
    const updated = await c.next('session.updated');
    const switched = c.events.slice(from, c.events.indexOf(updated) + 1);
    expect(switched.map((e) => e.type)).toEqual([
      ...before.map(() => 'conversation.item.deleted'),
      'conversation.item.added',
      'conversation.item.done',
      'session.updated',
    ]);
    expect(new Set(switched.slice(0, before.length).map((e) => e.item_id))).toEqual(
      new Set(before),
    );
    expect(switched[before.length]).toMatchObject({
      previous_item_id: null,
      item: { role: 'assistant', content: [{ text: 'Hi! Who would you like me to greet?' }] },
    });
    expect(updated.session).toMatchObject({
      character: 'hello',
      troupe: { character: { id: 'hello', tools: ['sayHello'] } },
    });

    const events = await turn(c, 'Say hello to Ada.');
    expect(doneOf(events)).toMatchObject({ status: 'completed', troupe: { character: 'hello' } });
    const body = lastChat(t.simulator);
    expect(body.tools?.map((tool) => tool.function.name)).toEqual(['sayHello']);
    expect(outline(body.messages).slice(0, 3)).toEqual([
      expect.stringContaining('system: You are a friendly, upbeat assistant.'),
      'assistant: Hi! Who would you like me to greet?',
      'user: Say hello to Ada.',
    ]);
    expect(body.messages.some((m) => JSON.stringify(m).includes('Glasgow'))).toBe(false);
    await c.close();
  });

  it('refuses an unknown character, names the ones there are, and keeps the current one', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({ type: 'session.update', event_id: 'evt_who', session: { character: 'nobody' } });
    const error = await nextError(c, 'unknown_character');
    expect(error).toMatchObject({
      type: 'invalid_request_error',
      param: 'session.character',
      event_id: 'evt_who',
    });
    expect(error.message).toContain('weather');
    expect(error.message).toContain('quizmaster');
    const events = await turn(c, 'Celsius, please.');
    expect(doneOf(events)).toMatchObject({ status: 'completed', troupe: { character: 'weather' } });
    await c.close();
  });

  it('refuses a client tool with the name of a character tool', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({
      type: 'session.update',
      session: { tools: [GET_TIME, { ...GET_TIME, name: 'get_current_weather' }] },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('session.tools[1].name');
    expect(error.message).toContain('get_current_weather');
    // Nothing of a refused update is applied.
    c.send({ type: 'session.update', session: {} });
    expect((await c.next('session.updated')).session).toMatchObject({ tools: [] });
    await c.close();
  });

  it('refuses the same client tool twice', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'session.update', session: { tools: [GET_TIME, GET_TIME] } });
    expect((await nextError(c, 'invalid_value')).param).toBe('session.tools[1].name');
    await c.close();
  });

  it('refuses a character switch that would make a client tool clash with the new character', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({ type: 'session.update', session: { tools: [{ ...GET_TIME, name: 'score' }] } });
    await c.next('session.updated');
    c.send({ type: 'session.update', session: { character: 'quizmaster' } });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe('session.character');
    expect(error.message).toContain('"score"');
    // With the tools replaced in the same update, the switch goes through.
    c.send({ type: 'session.update', session: { character: 'quizmaster', tools: [GET_TIME] } });
    expect((await c.next('session.updated')).session).toMatchObject({ character: 'quizmaster' });
    const events = await turn(c, "What's my score?");
    expect(doneOf(events).status).toBe('completed');
    expect(lastChat(t.simulator).tools?.map((tool) => tool.function.name)).toEqual([
      'start_quiz',
      'answer',
      'score',
      'get_time',
    ]);
    await c.close();
  });

  it('refuses a tool_choice that names no tool of the session', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({
      type: 'session.update',
      event_id: 'evt_tc',
      session: { tool_choice: { type: 'function', name: 'get_time' } },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'session.tool_choice.name', event_id: 'evt_tc' });
    expect(error.message).toContain('get_current_weather');
    await c.close();
  });

  it('refuses an update that takes away the tool its tool_choice names', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'session.update',
      session: { tools: [GET_TIME], tool_choice: { type: 'function', name: 'get_time' } },
    });
    await c.next('session.updated');
    c.send({ type: 'session.update', session: { tools: [] } });
    expect((await nextError(c, 'invalid_value')).param).toBe('session.tool_choice');
    c.send({ type: 'session.update', session: { tools: [], tool_choice: 'auto' } });
    expect((await c.next('session.updated')).session).toMatchObject({
      tools: [],
      tool_choice: 'auto',
    });
    await c.close();
  });

  it('sends a named tool_choice to the model as a function choice', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({
      type: 'session.update',
      session: { tool_choice: { type: 'function', name: 'get_current_weather' } },
    });
    await c.next('session.updated');
    await turn(c, 'Celsius, please.');
    expect(lastChat(t.simulator).tool_choice).toEqual({
      type: 'function',
      function: { name: 'get_current_weather' },
    });
    await c.close();
  });

  it('refuses audio output and turn detection, which need a voice session', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    expect((await nextError(c, 'audio_not_supported')).param).toBe('session.output_modalities');
    c.send({ type: 'session.update', session: { modalities: ['text', 'audio'] } });
    await nextError(c, 'audio_not_supported');
    c.send({ type: 'session.update', session: { turn_detection: { type: 'server_vad' } } });
    await nextError(c, 'audio_not_supported');
    c.send({ type: 'response.create', response: { output_modalities: ['audio'] } });
    expect((await nextError(c, 'audio_not_supported')).param).toBe('response.output_modalities');
    // Text output and manual turn taking are fine.
    c.send({
      type: 'session.update',
      session: { output_modalities: ['text'], turn_detection: null },
    });
    await c.next('session.updated');
    expect(doneOf(await turn(c, 'Hello there!')).status).toBe('completed');
    await c.close();
  });
});
