import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SimScript } from '../../src/testing/index.js';
import { say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  chatBodies,
  doneOf,
  lastChat,
  nextError,
  NO_USAGE,
  openSession,
  textOf,
  turn,
} from '../helpers/session.js';

const STORY =
  'The lighthouse keeper counted the ships every night, and every night one more came home.';

const SCRIPT: SimScript = {
  rules: [
    { when: { user: 'story' }, reply: { parts: [{ text: STORY }] } },
    {
      when: { user: 'celsius', round: 0 },
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
    },
  ],
  fallback: { parts: [{ text: 'Still here.' }] },
};

describe('when the LLM fails mid-turn', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ script: SCRIPT });
  });
  afterAll(() => t.close());
  beforeEach(() => t.simulator.clearRequests());

  it('sends an llm_error and a failed response.done, then takes the next turn', async () => {
    const c = await openSession(t, 'character=weather');
    t.simulator.injectFault({ type: 'error-event', afterChunks: 3 });
    say(c, 'Tell me a story.');
    const error = await nextError(c, 'llm_stream_error');
    expect(error).toMatchObject({ type: 'llm_error', param: null });
    const response = doneOf(await c.untilDone());
    expect(response).toMatchObject({
      status: 'failed',
      status_details: { type: 'failed', error: { type: 'llm_error', code: 'llm_stream_error' } },
    });
    // What streamed before the failure stays: the client saw it.
    const partial = textOf(c.events);
    expect(partial).not.toBe('');
    expect(STORY.startsWith(partial)).toBe(true);
    expect(response.output).toEqual([
      expect.objectContaining({
        status: 'incomplete',
        content: [{ type: 'output_text', text: partial }],
      }),
    ]);

    const next = await turn(c, 'Are you there?');
    expect(doneOf(next).status).toBe('completed');
    expect(textOf(next)).toBe('Still here.');
    const messages = lastChat(t.simulator).messages;
    expect(messages.at(-1)).toEqual({ role: 'user', content: 'Are you there?' });
    expect(messages.at(-2)).toEqual({ role: 'assistant', content: partial });
    await c.close();
  });

  it('takes a tool call cut off mid-stream out of the conversation, so the next turn is valid', async () => {
    const c = await openSession(t, 'character=weather');
    // The reply is only a tool call: a few chunks in, its arguments are half written.
    t.simulator.injectFault({ type: 'reset', afterChunks: 3 });
    say(c, 'Celsius, please.');
    await nextError(c, 'llm_stream_error');
    const response = doneOf(await c.untilDone());
    const events = c.events;
    expect(response.status).toBe('failed');
    expect(response.output.filter((i) => i.type === 'mcp_call')).toEqual([]);
    const started = events.find(
      (e) =>
        e.type === 'response.output_item.added' && (e.item as { type: string }).type === 'mcp_call',
    );
    expect(started, 'the call had started streaming').toBeDefined();
    const id = (started!.item as { id: string }).id;
    // Done with an error (it never ran), then taken out.
    expect(
      events.find(
        (e) => e.type === 'response.output_item.done' && (e.item as { id: string }).id === id,
      ),
    ).toMatchObject({ item: { output: null, error: { type: 'tool_execution_error' } } });
    expect(events.find((e) => e.type === 'conversation.item.deleted')).toMatchObject({
      item_id: id,
    });
    expect(events.map((e) => e.type)).not.toContain('troupe.tool_call.result');

    const next = await turn(c, 'Are you there?');
    expect(doneOf(next).status).toBe('completed');
    expect(t.simulator.requests.at(-1)!.status).toBe(200);
    await c.close();
  });

  it('fails the turn when the LLM keeps answering with HTTP errors', async () => {
    const c = await openSession(t, 'character=plain');
    // 429 with retry-after 0: the one retry comes at once and fails too.
    t.simulator.injectFault({ type: 'http', status: 429 });
    t.simulator.injectFault({ type: 'http', status: 429 });
    say(c, 'Tell me a story.');
    const error = await nextError(c, 'llm_stream_error');
    expect(error.message).toContain('429');
    expect(doneOf(await c.untilDone())).toMatchObject({ status: 'failed', output: [] });
    expect(chatBodies(t.simulator)).toHaveLength(2);

    expect(doneOf(await turn(c, 'Tell me a story.')).status).toBe('completed');
    // The failed turn left only the user's message behind.
    expect(lastChat(t.simulator).messages.slice(-2)).toEqual([
      { role: 'user', content: 'Tell me a story.' },
      { role: 'user', content: 'Tell me a story.' },
    ]);
    await c.close();
  });
});

describe('when the LLM is down from the start', () => {
  let t: TestServer;
  beforeAll(async () => {
    // A port that was free a moment ago: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    t = await startTestServer({ env: { LLM_BASE_URL: `http://127.0.0.1:${port}/v1` } });
  });
  afterAll(() => t.close());

  it('fails each turn with llm_unavailable and keeps the session open', async () => {
    const c = await openSession(t, 'character=plain');
    for (let attempt = 0; attempt < 2; attempt++) {
      say(c, 'Hello there!');
      const error = await nextError(c, 'llm_unavailable');
      expect(error.type).toBe('llm_error');
      expect(error.message).toContain('LLM_BASE_URL');
      expect(doneOf(await c.untilDone())).toMatchObject({
        status: 'failed',
        status_details: { type: 'failed', error: { code: 'llm_unavailable' } },
        // No request got an answer: nothing counted, in the shape of every response's usage.
        usage: NO_USAGE,
        troupe: { llm_requests: 0 },
      });
    }
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    c.send({ type: 'session.update', session: {} });
    await c.next('session.updated');
    await c.close();
  });
});
