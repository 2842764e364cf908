/**
 * A character's greeting is spoken when a session turns to audio: once, as
 * a response of its own, before anything else is said.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { character } from '../helpers/characters.js';
import type { TestServer } from '../helpers/server.js';
import { lastChat, NO_USAGE, openSession } from '../helpers/session.js';
import {
  audioMs,
  barrier,
  fakeVoice,
  speak,
  spokenText,
  startVoiceServer,
  typesOf,
} from '../helpers/voice.js';

const GREETING = 'Hello there. I am the greeter, and I like to talk.';

let t: TestServer;

beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice({ transcripts: () => 'Who are you?' }),
    characters: {
      'greeter.ts': character({ name: 'Greeter', extra: `greeting: ${JSON.stringify(GREETING)},` }),
    },
    script: { fallback: { parts: [{ text: 'I am the greeter.' }] }, rules: [] },
  });
});
afterAll(() => t?.close());

describe('the greeting', () => {
  it('is spoken once when the session switches to audio', async () => {
    const c = await openSession(t, 'character=greeter');
    const announced = c.events.find((e) => e.type === 'conversation.item.done')!;
    const greetingId = (announced.item as { id: string }).id;
    // A text session only lists it.
    await barrier(c);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);

    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    const created = await c.next('response.created');
    expect(created.response).toMatchObject({
      status: 'in_progress',
      output_modalities: ['audio'],
      metadata: { troupe: 'greeting' },
    });
    const events = await c.untilDone();
    const done = events.at(-1)!.response as {
      id: string;
      status: string;
      output: Array<Record<string, unknown>>;
      usage: unknown;
    };
    expect(done.id).toBe((created.response as { id: string }).id);
    expect(done.status).toBe('completed');
    // No tokens went into it, and its usage says so in the shape of every response's.
    expect(done.usage).toEqual(NO_USAGE);
    expect(done.output).toHaveLength(1);
    expect(done.output[0]).toMatchObject({ id: greetingId, role: 'assistant' });
    expect(spokenText(events, greetingId)).toBe(GREETING);
    expect(audioMs(events, greetingId)).toBeGreaterThan(GREETING.replaceAll(' ', '').length * 15);
    const audioDone = events.find((e) => e.type === 'response.output_audio_transcript.done')!;
    expect(audioDone).toMatchObject({ item_id: greetingId, transcript: GREETING });
    // Its item is announced and done in the response, like any response's.
    const mine = (type: string) =>
      typesOf(events).indexOf(type) >= 0 &&
      events.some(
        (e) =>
          e.type === type &&
          ((e.item as { id?: string } | undefined)?.id ?? e.item_id) === greetingId,
      );
    for (const type of [
      'response.output_item.added',
      'response.content_part.added',
      'response.content_part.done',
      'response.output_item.done',
    ]) {
      expect(mine(type), type).toBe(true);
    }
    // In progress while it is spoken; then spoken audio, in the response and in the conversation.
    const added = events.find((e) => e.type === 'response.output_item.added')!;
    expect(added.item).toMatchObject({ id: greetingId, status: 'in_progress', content: [] });
    const spokenItem = {
      id: greetingId,
      status: 'completed',
      content: [{ type: 'output_audio', transcript: GREETING }],
    };
    expect(events.find((e) => e.type === 'response.output_item.done')!.item).toMatchObject(
      spokenItem,
    );
    const again = events.find((e) => e.type === 'conversation.item.done')!;
    expect(again).toMatchObject({ previous_item_id: null, item: spokenItem });
    const order = typesOf(events);
    expect(order.indexOf('response.output_item.done')).toBeLessThan(
      order.indexOf('conversation.item.done'),
    );
    expect(order.indexOf('response.output_item.added')).toBeLessThan(
      order.indexOf('response.output_audio.delta'),
    );
    expect(order.indexOf('response.output_item.done')).toBeLessThan(order.indexOf('response.done'));

    // Later updates, and turns, do not bring it back.
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    await barrier(c);
    expect(typesOf(c.events).filter((type) => type === 'response.created')).toHaveLength(1);
    await speak(c, 'who are you');
    const answer = await c.untilDone();
    expect(answer.find((e) => e.type === 'response.created')!.response).toMatchObject({
      metadata: null,
    });
    expect(spokenText(answer)).toBe('I am the greeter.');
    // The model knows it greeted the user.
    expect(lastChat(t.simulator).messages.slice(1)).toEqual([
      { role: 'assistant', content: GREETING },
      { role: 'user', content: 'Who are you?' },
    ]);
    await c.close();
  });

  it('keeps only what was heard when the user talks over it', async () => {
    const c = await openSession(t, 'character=greeter');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('response.created');
    await c.next('response.output_audio_transcript.delta');
    await speak(c, 'who are you', { leadMs: 0 });
    const done = (await c.next('response.done')).response as {
      status: string;
      status_details: unknown;
      output: Array<{ content: Array<{ transcript: string }>; status: string }>;
    };
    expect(done.status).toBe('cancelled');
    expect(done.status_details).toEqual({ type: 'cancelled', reason: 'turn_detected' });
    const heard = done.output[0]!.content[0]!.transcript;
    expect(heard.length).toBeGreaterThan(0);
    expect(heard.length).toBeLessThan(GREETING.length);
    expect(GREETING.startsWith(heard)).toBe(true);
    expect(done.output[0]!.status).toBe('incomplete');
    // A client that keeps the conversation from its events has the cut greeting too.
    const greetingId = (done.output[0] as unknown as { id: string }).id;
    const again = c.events.findLast(
      (e) => e.type === 'conversation.item.done' && (e.item as { id: string }).id === greetingId,
    )!;
    expect(again.item).toMatchObject({
      status: 'incomplete',
      content: [{ type: 'output_audio', transcript: heard }],
    });
    await c.next('response.done');
    expect(lastChat(t.simulator).messages.slice(1)).toEqual([
      { role: 'assistant', content: heard },
      { role: 'user', content: 'Who are you?' },
    ]);
    await c.close();
  });

  it("runs a client's response.create sent during the greeting right after it, without an error", async () => {
    const c = await openSession(t, 'character=greeter');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    const greeting = (await c.next('response.created')).response as { id: string };
    c.send({ type: 'response.create', event_id: 'early' });
    const greetingDone = (await c.next('response.done')).response as { id: string; status: string };
    expect(greetingDone).toMatchObject({ id: greeting.id, status: 'completed' });
    const created = (await c.next('response.created')).response as { id: string };
    expect(created.id).not.toBe(greeting.id);
    const events = await c.untilDone();
    const done = events.at(-1)!.response as { id: string; status: string };
    expect(done).toMatchObject({ id: created.id, status: 'completed' });
    expect(spokenText(events)).toBe('I am the greeter.');
    expect(c.events.some((e) => e.type === 'error')).toBe(false);
    await c.close();
  });

  it('still refuses a second response.create while the queued one waits', async () => {
    const c = await openSession(t, 'character=greeter');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('response.created');
    c.send({ type: 'response.create' });
    c.send({ type: 'response.create', event_id: 'second' });
    const error = (await c.next('error')).error as { code: string; event_id: string };
    expect(error).toMatchObject({
      code: 'conversation_already_has_active_response',
      event_id: 'second',
    });
    await c.next('response.done');
    await c.untilDone();
    await c.close();
  });

  it('is off with ?greeting=0: no greeting item, nothing spoken, the model never greeted', async () => {
    const c = await openSession(t, 'character=greeter&greeting=0');
    const created = c.events.find((e) => e.type === 'session.created')!;
    expect((created.session as { troupe: { greeting: boolean } }).troupe.greeting).toBe(false);
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    await barrier(c);
    expect(c.events.some((e) => e.type === 'conversation.item.added')).toBe(false);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    await speak(c, 'who are you');
    const answer = await c.untilDone();
    expect(spokenText(answer)).toBe('I am the greeter.');
    expect(lastChat(t.simulator).messages.slice(1)).toEqual([
      { role: 'user', content: 'Who are you?' },
    ]);
    await c.close();
  });

  it('is off with session.troupe.greeting false: the unspoken greeting leaves the conversation', async () => {
    const c = await openSession(t, 'character=greeter');
    const greetingId = (
      c.events.find((e) => e.type === 'conversation.item.done')!.item as {
        id: string;
      }
    ).id;
    c.send({
      type: 'session.update',
      session: { output_modalities: ['audio'], troupe: { greeting: false } },
    });
    const updated = await c.next('session.updated');
    expect((updated.session as { troupe: { greeting: boolean } }).troupe.greeting).toBe(false);
    await barrier(c);
    const deleted = c.events.find((e) => e.type === 'conversation.item.deleted');
    expect(deleted?.item_id).toBe(greetingId);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    await c.close();
  });

  it('stops where it is when turned off while it plays', async () => {
    const c = await openSession(t, 'character=greeter');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    const greeting = (await c.next('response.created')).response as { id: string };
    await c.next('response.output_audio_transcript.delta');
    c.send({ type: 'session.update', session: { troupe: { greeting: false } } });
    const done = (await c.next('response.done')).response as {
      id: string;
      status: string;
      status_details: unknown;
    };
    expect(done).toMatchObject({
      id: greeting.id,
      status: 'cancelled',
      status_details: { type: 'cancelled', reason: 'client_cancelled' },
    });
    await c.close();
  });

  it('answers a ?greeting= it does not know with an error naming the values, and keeps it on', async () => {
    const c = await openSession(t, 'character=greeter&greeting=maybe');
    const error = (await c.next('error')).error as { code: string; param: string; message: string };
    expect(error).toMatchObject({ code: 'invalid_value', param: 'greeting' });
    expect(error.message).toMatch(/0 or false/);
    expect(c.events.some((e) => e.type === 'conversation.item.added')).toBe(true);
    await c.close();
  });
});
