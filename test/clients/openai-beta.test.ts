/**
 * A beta-protocol client: the `openai` package's `OpenAIRealtimeWS` sending
 * `OpenAI-Beta: realtime=v1` (as beta clients do; the server then speaks
 * `?dialect=openai-beta`), and behaving as beta clients do: it answers every
 * `function_call` item it sees, and waits for each announced item's
 * `response.output_item.done`.
 */
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTlsTestServer, type TlsTestServer } from '../helpers/tls-server.js';
import { DEFAULT_WAIT_MS } from '../helpers/wait.js';

type AnyEvent = { type: string } & Record<string, unknown>;

/** A beta client: its events, what it answered, and a bounded wait for an event. */
function betaClient(t: TlsTestServer, model: string) {
  const client = new OpenAI({ apiKey: 'beta-test', baseURL: `${t.url}/v1` });
  const rt = new OpenAIRealtimeWS(
    { model, options: { ca: t.ca, headers: { 'OpenAI-Beta': 'realtime=v1' } } },
    client,
  );
  const events: AnyEvent[] = [];
  const answered: string[] = [];
  const listeners = new Set<() => void>();
  rt.on('event', (e) => {
    const event = e as unknown as AnyEvent;
    events.push(event);
    const item = event.item as { type?: string; name?: string; call_id?: string } | undefined;
    // What beta clients do with a function call: run it or say they cannot.
    if (event.type === 'response.output_item.done' && item?.type === 'function_call') {
      answered.push(item.name ?? '');
      rt.send({
        type: 'conversation.item.create',
        item: {
          type: 'function_call_output',
          call_id: item.call_id!,
          output: `Tool ${item.name} not found`,
        },
      });
    }
    for (const l of listeners) l();
  });
  const next = (type: string, where: (e: AnyEvent) => boolean = () => true) =>
    new Promise<AnyEvent>((resolve, reject) => {
      const find = () => events.find((e) => e.type === type && where(e));
      const check = () => {
        const found = find();
        if (!found) return;
        listeners.delete(check);
        clearTimeout(timer);
        resolve(found);
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(
          new Error(
            `${type}: not within ${DEFAULT_WAIT_MS} ms (got ${events.map((e) => e.type).join(', ')})`,
          ),
        );
      }, DEFAULT_WAIT_MS);
      listeners.add(check);
      check();
    });
  const say = (text: string) => {
    rt.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
    });
    rt.send({ type: 'response.create', response: { modalities: ['text'] } } as never);
  };
  return { rt, events, answered, next, say, close: () => rt.close({ code: 1000, reason: 'done' }) };
}

describe('a beta-protocol client', () => {
  let t: TlsTestServer;

  beforeAll(async () => {
    t = await startTlsTestServer();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('gets the beta names and shapes when it sends OpenAI-Beta: realtime=v1', async () => {
    const c = betaClient(t, 'plain');
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ modalities: ['text'], input_audio_format: 'pcm16' });
    c.say('Hello there!');
    const done = await c.next('response.done');
    expect(done.response).toMatchObject({ status: 'completed', modalities: ['text'] });
    const types = c.events.map((e) => e.type);
    expect(types).toContain('conversation.item.created');
    expect(types).toContain('response.text.delta');
    for (const ga of ['conversation.item.added', 'response.output_text.delta']) {
      expect(types).not.toContain(ga);
    }
    c.close();
  });

  it("sees the character's server tool as an mcp_call item it does not answer, and every item done", async () => {
    const c = betaClient(t, 'weather');
    await c.next('session.created');
    c.say('Celsius, please.');
    const done = await c.next('response.done');
    expect(done.response).toMatchObject({ status: 'completed' });
    await c.next('troupe.tool_call.result');
    const output = (done.response as { output: Array<{ type: string; name?: string }> }).output;
    expect(output).toContainEqual(
      expect.objectContaining({ type: 'mcp_call', name: 'get_current_weather' }),
    );
    expect(output.map((i) => i.type)).not.toContain('function_call_output');
    expect(c.answered).toEqual([]);
    // Every item announced in the response is done in it.
    const added = c.events.filter((e) => e.type === 'response.output_item.added');
    const finished = c.events.filter((e) => e.type === 'response.output_item.done');
    expect(finished.map((e) => (e.item as { id: string }).id)).toEqual(
      added.map((e) => (e.item as { id: string }).id),
    );
    expect(c.events.filter((e) => e.type === 'error')).toEqual([]);
    c.close();
  });
});
