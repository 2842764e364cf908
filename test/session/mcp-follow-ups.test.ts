/**
 * The `response.create` a client sends after an `mcp_call` (OpenAI's API
 * ends a response there; the Agents SDK asks for the next one by default):
 * Troupe answered within the response, so such a request, with nothing new
 * since and no `response` of its own, gets an empty response naming the one
 * that answered, and the model is not asked again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Item, McpCallItem, ResponseObject, ServerEvent } from '../../src/session/events.js';
import { McpFollowUps, owesReply } from '../../src/session/mcp-follow-ups.js';
import { connect, type Received, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { fakeVoice } from '../helpers/voice.js';
import {
  chatBodies,
  doneOf,
  idOf,
  NO_USAGE,
  openSession,
  turn,
  userMessage,
} from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

type Done = { id: string; status: string; output: unknown[]; metadata: unknown };

/** A weather session past a reply that ran the weather tool; that reply's response. */
async function afterToolReply(): Promise<{ c: TestClient; answered: Done }> {
  const c = await openSession(t, 'character=weather');
  const events = await turn(c, 'Celsius, please.');
  const answered = doneOf(events) as unknown as Done;
  expect(answered.output).toContainEqual(expect.objectContaining({ type: 'mcp_call' }));
  return { c, answered };
}

describe('a response.create after tool calls the reply answered', () => {
  it('gets an empty response naming the one that answered; the model is not asked', async () => {
    const { c, answered } = await afterToolReply();
    const asked = chatBodies(t.simulator).length;
    c.send({ type: 'response.create' });
    const created = await c.next('response.created');
    const done = (await c.next('response.done')).response as Done;
    expect(done).toMatchObject({
      id: (created.response as { id: string }).id,
      status: 'completed',
      output: [],
      metadata: { troupe: 'answered', answered_by: answered.id },
      usage: NO_USAGE,
    });
    expect(chatBodies(t.simulator).length).toBe(asked);
    // Only that one: asked again, the model answers.
    c.send({ type: 'response.create' });
    expect(doneOf(await c.untilDone()).metadata).toBeNull();
    expect(chatBodies(t.simulator).length).toBe(asked + 1);
    await c.close();
  });

  it('is a real response with a `response` of its own, or after anything new', async () => {
    const first = await afterToolReply();
    first.c.send({ type: 'response.create', response: {} });
    expect(doneOf(await first.c.untilDone()).metadata).toBeNull();
    await first.c.close();

    const second = await afterToolReply();
    second.c.send(userMessage('And tomorrow?'));
    await second.c.next('conversation.item.done');
    second.c.send({ type: 'response.create' });
    expect(doneOf(await second.c.untilDone()).metadata).toBeNull();
    await second.c.close();
  });
});

describe("a response.create after tool calls in OpenAI's compatibility mode", () => {
  it('is a real response: the client never saw the calls, so it is not their follow-up', async () => {
    const c = await openSession(t, 'character=weather&compat=openai');
    const events = await turn(c, 'Celsius, please.');
    // The reply ran the tool, unseen: its output is messages alone.
    const output = doneOf(events).output as Array<{ type: string }>;
    expect(output.map((item) => item.type)).toEqual(['message', 'message']);
    const asked = chatBodies(t.simulator).length;
    c.send({ type: 'response.create' });
    expect(doneOf(await c.untilDone()).metadata).toBeNull();
    expect(chatBodies(t.simulator).length).toBe(asked + 1);
    await c.close();
  });
});

describe('a response.create after tool calls, the reply cut off or the conversation resumed', () => {
  let slow: TestServer;
  let spoken: TestServer;
  beforeAll(async () => {
    // 5 tokens a second: the reply after the tool is still under way when it is cut.
    slow = await startTestServer({ simulator: { latency: { tokensPerSec: 5 } } });
    // Spoken replies play in real time: the reply after the tool is still playing when cut.
    spoken = await startTestServer({ voice: await fakeVoice() });
  });
  afterAll(async () => {
    await slow.close();
    await spoken.close();
  });

  /** A bare `response.create` gets the empty answer naming `by`, and the model is not asked. */
  async function expectAnsweredBy(c: TestClient, on: TestServer, by: string): Promise<void> {
    const asked = chatBodies(on.simulator).length;
    expect(await followUp(c)).toMatchObject({
      output: [],
      metadata: { troupe: 'answered', answered_by: by },
    });
    expect(chatBodies(on.simulator).length).toBe(asked);
  }

  /** Sends a bare `response.create`; the empty answer's `response.done`. */
  async function followUp(c: TestClient): Promise<Done> {
    c.send({ type: 'response.create' });
    return (await c.next('response.done')).response as Done;
  }

  it('is answered empty after a reply cut off once its calls were done', async () => {
    const c = await openSession(slow, 'character=weather');
    c.send(userMessage('Celsius, please.'));
    c.send({ type: 'response.create' });
    const created = await c.next('response.created');
    await c.next('conversation.item.done', isCall);
    c.send({ type: 'response.cancel' });
    const cut = (await c.next('response.done')).response as Done;
    expect(cut).toMatchObject({ id: (created.response as { id: string }).id, status: 'cancelled' });
    await expectAnsweredBy(c, slow, cut.id);
    await c.close();
  });

  it('is answered empty after a spoken reply cut off, its audio truncated, as the SDK does at barge-in', async () => {
    const c = await openSession(spoken, 'character=weather');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    c.send(userMessage('Celsius, please.'));
    c.send({ type: 'response.create' });
    await c.next('conversation.item.done', isCall);
    const playing = await c.next('response.output_audio.delta');
    c.send({ type: 'response.cancel' });
    const cut = (await c.next('response.done')).response as Done;
    expect(cut.status).toBe('cancelled');
    // The SDK truncates what the user heard; the truncate lands after the response ended.
    c.send({
      type: 'conversation.item.truncate',
      item_id: playing.item_id,
      content_index: 0,
      audio_end_ms: 0,
    });
    await c.next('conversation.item.truncated');
    await expectAnsweredBy(c, spoken, cut.id);
    await c.close();
  });

  it('goes on from a reply the dropped connection cut after its call, once resumed, at the first request', async () => {
    const first = await connect(`${slow.wsUrl}?character=weather`);
    const created = await first.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    // A finished reply with a call of its own comes first: a client that asks
    // once (not the SDK, which asks once per call) gets the reply owed, not
    // an empty answer for that call.
    await turn(first, 'Celsius, please.');
    first.send(userMessage('Celsius, please.'));
    first.send({ type: 'response.create' });
    await first.next('conversation.item.done', isCall);
    await first.next('response.output_text.delta');
    await first.close();

    const again = await connect(`${slow.wsUrl}?resume=${token}`);
    await again.next('session.created');
    await again.next('conversation.item.done', isCall);
    await again.next('conversation.item.done', (e) => isCall(e) && e !== again.events.find(isCall));
    const reply = await again.next(
      'conversation.item.done',
      (e) => (e.item as { role?: string }).role === 'assistant',
    );
    expect(reply.item).toMatchObject({ status: 'incomplete' });
    const asked = chatBodies(slow.simulator).length;
    again.send({ type: 'response.create' });
    expect(doneOf(await again.untilDone()).metadata).toBeNull();
    expect(chatBodies(slow.simulator).length).toBe(asked + 1);
    await again.close();
  });

  it('is answered empty once for each call a resumed conversation announces', async () => {
    const first = await connect(`${t.wsUrl}?character=weather`);
    const created = await first.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    await turn(first, 'Celsius, please.');
    await first.close();

    const again = await connect(`${t.wsUrl}?resume=${token}`);
    await again.next('session.created');
    const call = await again.next('conversation.item.done', isCall);
    const asked = chatBodies(t.simulator).length;
    expect(await followUp(again)).toMatchObject({
      status: 'completed',
      output: [],
      metadata: { troupe: 'answered', answered_by: idOf(call) },
    });
    expect(chatBodies(t.simulator).length).toBe(asked);
    // Asked again, the model answers.
    again.send({ type: 'response.create' });
    expect(doneOf(await again.untilDone()).metadata).toBeNull();
    await again.close();
  });
});

describe('a response.create after a resume, the last line said waiting for its reply', () => {
  it('makes the reply; the follow-ups of the calls before are answered by it', async () => {
    const first = await connect(`${t.wsUrl}?character=weather`);
    const created = await first.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    // Two replies, each with a call: an SDK asks two follow-ups after the resume.
    await turn(first, 'Celsius, please.');
    await turn(first, 'Celsius, please.');
    // The line is stored; the connection drops before the reply is asked for.
    first.send(userMessage('And tomorrow?'));
    await first.next('conversation.item.done', (e) => JSON.stringify(e.item).includes('tomorrow'));
    await first.close();

    const again = await connect(`${t.wsUrl}?resume=${token}`);
    await again.next('session.created');
    await again.next('conversation.item.done', (e) => JSON.stringify(e.item).includes('tomorrow'));
    const asked = chatBodies(t.simulator).length;
    again.send({ type: 'response.create' });
    const reply = doneOf(await again.untilDone());
    expect(reply.metadata).toBeNull();
    expect(chatBodies(t.simulator).length).toBe(asked + 1);
    // The second follow-up: answered by that reply.
    again.send({ type: 'response.create' });
    expect((await again.next('response.done')).response).toMatchObject({
      output: [],
      metadata: { troupe: 'answered', answered_by: reply.id },
    });
    await again.close();
  });
});

/** Whether an event carries an `mcp_call` item. */
function isCall(event: Received): boolean {
  return (event.item as { type?: unknown } | undefined)?.type === 'mcp_call';
}

describe('what the follow-ups watch', () => {
  const call = { type: 'mcp_call', id: 'item_1' } as McpCallItem;
  const response = (
    id: string,
    status: ResponseObject['status'],
    conversation: string | null = 'conv',
  ) => ({ id, status, conversation_id: conversation }) as ResponseObject;

  /** A tracker that has seen `events`, as the session sends them. */
  function seen(events: ServerEvent[]): McpFollowUps {
    const followUps = new McpFollowUps();
    const send = followUps.watch(() => {});
    for (const event of events) send(event);
    return followUps;
  }

  const ran: ServerEvent[] = [
    { type: 'conversation.item.done', previous_item_id: null, item: call },
    { type: 'response.done', response: response('resp_1', 'completed') },
  ];

  it('names the completed response after the calls, once', () => {
    const followUps = seen(ran);
    expect(followUps.answered({ response: {} })).toBeUndefined();
    expect(followUps.answered({})).toBe('resp_1');
    expect(followUps.answered({})).toBeUndefined();
  });

  it('names a response cut off after the calls: the follow-up would talk over the user', () => {
    const cut = seen([ran[0]!, { type: 'response.done', response: response('r', 'cancelled') }]);
    expect(cut.answered({})).toBe('r');
    expect(cut.answered({})).toBeUndefined();
  });

  it('answers one follow-up per call, its own empty answers in between', () => {
    const two = seen([
      ran[0]!,
      { ...ran[0]!, item: { ...call, id: 'item_2' } } as ServerEvent,
      ran[1]!,
    ]);
    expect(two.answered({})).toBe('resp_1');
    const empty = { ...response('resp_e', 'completed'), metadata: { troupe: 'answered' } };
    const send = two.watch(() => {});
    send({ type: 'response.created', response: { ...empty, status: 'in_progress' } });
    send({ type: 'response.done', response: empty });
    expect(two.answered({})).toBe('resp_1');
    expect(two.answered({})).toBeUndefined();
  });

  it("finds a reply owed: the conversation ends with a cut reply or the user's line", () => {
    const user = { type: 'message', role: 'user', id: 'u', content: [] } as unknown as Item;
    const answer = (status: string) =>
      ({ type: 'message', role: 'assistant', id: 'a', status, content: [] }) as unknown as Item;
    expect(owesReply([user, call, answer('incomplete')])).toBe(true);
    expect(owesReply([user, call])).toBe(true);
    expect(owesReply([call, user, answer('incomplete')])).toBe(true);
    expect(owesReply([user, call, answer('completed'), user])).toBe(true);
    expect(owesReply([user, call, answer('completed')])).toBe(false);
    expect(owesReply([])).toBe(false);
  });

  it("names a resumed conversation's calls once it is announced", () => {
    const followUps = seen([ran[0]!]);
    followUps.restored(false);
    expect(followUps.answered({})).toBe('item_1');
    expect(followUps.answered({})).toBeUndefined();
  });

  it('lets the first follow-up after a resumed reply that was cut make a response, which answers the rest', () => {
    const done = (id: string): ServerEvent => ({
      type: 'conversation.item.done',
      previous_item_id: null,
      item: { ...call, id },
    });
    const followUps = seen([done('item_old'), done('item_cut1'), done('item_cut2')]);
    followUps.restored(true);
    // The first request, whichever call it follows, makes the reply owed.
    expect(followUps.answered({})).toBeUndefined();
    const send = followUps.watch(() => {});
    send({ type: 'response.created', response: response('resp_on', 'in_progress') });
    const reply = { type: 'message', role: 'assistant', id: 'item_on', content: [] };
    send({
      type: 'conversation.item.added',
      previous_item_id: null,
      item: reply as unknown as Item,
    });
    send({ type: 'response.done', response: response('resp_on', 'completed') });
    expect(followUps.answered({})).toBe('resp_on');
    expect(followUps.answered({})).toBe('resp_on');
    expect(followUps.answered({})).toBeUndefined();
  });

  it('names none after a response that failed, or with no calls, or after anything new', () => {
    const failed = seen([ran[0]!, { type: 'response.done', response: response('r', 'failed') }]);
    expect(failed.answered({})).toBeUndefined();
    expect(seen([ran[1]!]).answered({})).toBeUndefined();
    const added = seen([
      ...ran,
      { type: 'conversation.item.added', previous_item_id: null, item: call },
    ]);
    expect(added.answered({})).toBeUndefined();
    // An out-of-band response is not the conversation's: the answer still stands.
    const beside = seen([
      ...ran,
      { type: 'response.done', response: response('resp_2', 'completed', null) },
    ]);
    expect(beside.answered({})).toBe('resp_1');
  });

  it('names none when the user said something while the response ran', () => {
    const user = { type: 'message', role: 'user', id: 'item_u', content: [] } as unknown as Item;
    const during = seen([
      { type: 'response.created', response: response('resp_1', 'in_progress') },
      { type: 'conversation.item.added', previous_item_id: 'item_1', item: user },
      ...ran,
    ]);
    expect(during.answered({})).toBeUndefined();
    // Its own items (the call, its answer) do not count.
    const own = seen([
      { type: 'response.created', response: response('resp_1', 'in_progress') },
      { type: 'conversation.item.added', previous_item_id: null, item: call },
      ...ran,
    ]);
    expect(own.answered({})).toBe('resp_1');
  });
});
