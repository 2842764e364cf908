/**
 * Handoffs and background calls at their edges, through a real socket: a
 * background result after a handoff is told by the new character (history
 * says who started it); `session.update {character}` stops the old
 * conversation's calls (one outcome, no history, no follow-up); a client's
 * `tool_choice` may force a transfer the character offers; an out-of-band
 * response cannot hand off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { character } from '../helpers/characters.js';
import { say as sayTo, type TestClient } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { chatBodies, doneOf, openSession, textOf, userMessage } from '../helpers/session.js';
import { within } from '../helpers/wait.js';
import { startVoiceServer, waitForEvent } from '../helpers/voice.js';

const g = globalThis as unknown as {
  __troupeEdgeGates?: Array<(v: string) => void>;
  __troupeEdgeWaiters?: Set<() => void>;
};

function nextGate(): Promise<(value: string) => void> {
  const waiters = (g.__troupeEdgeWaiters ??= new Set());
  return within(
    new Promise((resolve) => {
      const take = () => {
        const open = (g.__troupeEdgeGates ??= []).shift();
        if (!open) return;
        waiters.delete(take);
        resolve(open);
      };
      waiters.add(take);
      take();
    }),
    'a running lookup call',
  );
}

const DESK = character({
  name: 'Desk',
  extra: `handoffs: ['helper'],
  tools: [
    defineTool({
      name: 'lookup',
      description: 'Looks things up, slowly, in the background.',
      parameters: z.object({}),
      background: true,
      handler: (_args, ctx) =>
        new Promise((resolve, reject) => {
          const g = globalThis;
          (g.__troupeEdgeGates ??= []).push(resolve);
          for (const w of [...(g.__troupeEdgeWaiters ?? [])]) w();
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    }),
  ],`,
});
const HELPER = character({ name: 'Helper', prompt: 'You are the helper.' });

const say = (text: string): SimReply => ({ parts: [{ text }] });
const call = (name: string, args: Record<string, unknown>): SimReply => ({
  parts: [{ toolCall: { name, arguments: args } }],
});
const SCRIPT: SimScript = {
  rules: [
    { when: { background: true }, reply: say('Relaying: {{toolResult}}') },
    { when: { user: 'look', round: 0 }, reply: call('lookup', {}) },
    { when: { user: 'look' }, reply: say('On it.') },
    { when: { user: 'helper', round: 0 }, reply: call('transfer_to_helper', { reason: 'asked' }) },
    { when: { user: 'helper' }, reply: say('Helper here.') },
  ],
  fallback: say('Okay.'),
};

let t: TestServer;
beforeAll(async () => {
  t = await startVoiceServer({
    characters: { 'desk.ts': DESK, 'helper.ts': HELPER },
    script: SCRIPT,
  });
});
afterAll(() => t?.close());

/** Starts a lookup in a desk session; its call id once the turn is done. */
async function lookupStarted(c: TestClient): Promise<string> {
  c.send(userMessage('Please look it up.'));
  c.send({ type: 'response.create' });
  const started = await c.next('troupe.tool_call.result', (e) => e.background === 'started');
  await c.next('response.done');
  return started.call_id as string;
}

describe('a background call and a change of character', () => {
  it('after a handoff, its result joins history and the new character tells it', async () => {
    const c = await openSession(t, 'character=desk');
    const callId = await lookupStarted(c);
    sayTo(c, 'Put the helper on.');
    await c.untilDone();
    await c.untilDone();
    expect(c.events.filter((e) => e.type === 'session.updated').at(-1)?.session).toMatchObject({
      character: 'helper',
    });
    (await nextGate())('found it');
    const done = await c.next('troupe.background_tool.done', (e) => e.call_id === callId);
    expect(done).toMatchObject({ outcome: 'ok', output: 'found it' });
    const item = c.events.find(
      (e) => e.type === 'conversation.item.done' && (e.item as { id: string }).id === done.item_id,
    )!.item;
    // Labelled with the character that called it.
    expect(item).toMatchObject({ type: 'mcp_call', server_label: 'desk', output: 'found it' });
    const follow = await c.untilDone();
    expect(doneOf(follow).troupe).toMatchObject({ character: 'helper' });
    expect(textOf(follow)).toMatch(/found it$/);
    // The helper read who started the work.
    const last = chatBodies(t.simulator).at(-1)!.messages.at(-1) as { content: string };
    expect(last.content).toContain('work that character "desk" started before the conversation');
    await c.close();
  });

  it('session.update {character} stops it: one outcome, no history, no follow-up', async () => {
    const c = await openSession(t, 'character=desk');
    const callId = await lookupStarted(c);
    await nextGate();
    const bodies = chatBodies(t.simulator).length;
    c.send({ type: 'session.update', session: { type: 'realtime', character: 'helper' } });
    await c.next('session.updated');
    // Stopped as the conversation was replaced (it may come before session.updated).
    const done = await waitForEvent(
      c,
      'troupe.background_tool.done',
      (e) => e.call_id === callId,
      undefined,
      undefined,
      0,
    );
    expect(done).toMatchObject({ outcome: 'cancelled', item_id: null });
    await t.waitForLog('background tool call cancelled', (l) => l.callId === callId);
    // Nothing joined the new conversation, and nothing was said for it.
    sayTo(c, 'Hello?');
    const next = await c.untilDone();
    expect(textOf(next)).toBe('Okay.');
    expect(chatBodies(t.simulator).length).toBe(bodies + 1);
    expect(JSON.stringify(chatBodies(t.simulator).at(-1)!.messages)).not.toContain('lookup');
    expect(c.events.filter((e) => e.type === 'troupe.background_tool.done')).toHaveLength(1);
    await c.close();
  });
});

describe('tool_choice and transfers', () => {
  it('a tool_choice naming a transfer the character offers is accepted and sent to the model', async () => {
    const c = await openSession(t, 'character=desk');
    c.send({
      type: 'response.create',
      response: { tool_choice: { type: 'function', name: 'transfer_to_helper' } },
    });
    const done = await c.next('response.done');
    expect((done.response as { status: string }).status).toBe('completed');
    expect(chatBodies(t.simulator).at(-1)!.tool_choice).toEqual({
      type: 'function',
      function: { name: 'transfer_to_helper' },
    });
    c.send({
      type: 'session.update',
      session: { type: 'realtime', tool_choice: { type: 'function', name: 'transfer_to_helper' } },
    });
    await c.next('session.updated');
    expect(c.events.filter((e) => e.type === 'error')).toEqual([]);
    await c.close();
  });

  it('one it does not offer is refused, naming the field and the tools there are', async () => {
    const c = await openSession(t, 'character=desk');
    c.send({
      type: 'response.create',
      response: { tool_choice: { type: 'function', name: 'transfer_to_nobody' } },
    });
    const err = (await c.next('error')).error as { param: string; message: string };
    expect(err.param).toBe('response.tool_choice.name');
    expect(err.message).toContain(
      'no tool "transfer_to_nobody"; tools: lookup, transfer_to_helper',
    );
    c.send({
      type: 'session.update',
      session: { type: 'realtime', tool_choice: { type: 'function', name: 'transfer_to_nobody' } },
    });
    const err2 = (await c.next('error')).error as { param: string; message: string };
    expect(err2.param).toBe('session.tool_choice.name');
    expect(err2.message).toContain('transfer_to_helper');
    await c.close();
  });
});

describe('out-of-band responses and transfers', () => {
  it('cannot hand off: the transfer answers with an error and the character stays', async () => {
    const c = await openSession(t, 'character=desk');
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        input: [
          {
            type: 'message',
            role: 'user',
            content: [{ type: 'input_text', text: 'Get the helper.' }],
          },
        ],
      },
    });
    const done = await c.next('response.done');
    const output = (done.response as { output: Array<Record<string, unknown>> }).output;
    const transfer = output.find((i) => i.name === 'transfer_to_helper');
    expect(transfer?.error).toMatchObject({
      message: expect.stringContaining('out of band') as unknown,
    });
    // No session.updated, no second response; the desk still serves the conversation.
    sayTo(c, 'Hello?');
    const next = await c.untilDone();
    expect(doneOf(next).troupe).toMatchObject({ character: 'desk' });
    expect(c.events.some((e) => e.type === 'session.updated')).toBe(false);
    await c.close();
  });

  it('refuses a tool_choice forcing a transfer, naming the field', async () => {
    const c = await openSession(t, 'character=desk');
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        tool_choice: { type: 'function', name: 'transfer_to_helper' },
      },
    });
    const err = (await c.next('error')).error as { param: string; message: string };
    expect(err.param).toBe('response.tool_choice.name');
    expect(err.message).toContain('out-of-band');
    await c.close();
  });
});
