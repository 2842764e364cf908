/**
 * Tools in spoken replies: text before a call is spoken, the tool runs, the
 * answer after it is spoken; a slow tool with a filler line gets that line
 * spoken as an item of its own, which the model never sees.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimScript } from '../../src/testing/index.js';
import { character } from '../helpers/characters.js';
import type { Received } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { chatBodies, userMessage } from '../helpers/session.js';
import { within } from '../helpers/wait.js';
import {
  audioMs,
  fakeVoice,
  openVoiceSession,
  speak,
  spokenText,
  startVoiceServer,
} from '../helpers/voice.js';

const FILLER = 'Let me check that.';

/** Where the slow tool's calls wait until the test lets them finish (the character runs in this process). */
const gates = globalThis as unknown as {
  __troupeVoiceToolGates?: Array<() => void>;
  __troupeVoiceToolGateWaiter?: () => void;
};

/** The gate of the next slow_lookup call, once that call is running: calling it ends the call. */
function nextGate(): Promise<() => void> {
  return within(
    new Promise((resolve) => {
      const take = () => {
        const open = gates.__troupeVoiceToolGates?.shift();
        if (!open) return;
        gates.__troupeVoiceToolGateWaiter = undefined;
        resolve(open);
      };
      gates.__troupeVoiceToolGateWaiter = take;
      take();
    }),
    'a running slow_lookup call',
  );
}

/**
 * `slow_lookup` (a filler after 50 ms; it ends when the test opens its gate),
 * `fast_lookup` (the same filler; it answers at once) and `lookup` (no filler).
 */
const HELPER = character({
  name: 'Helper',
  extra: `tools: [
    defineTool({
      name: 'slow_lookup',
      description: 'Looks something up, slowly.',
      parameters: z.object({}),
      timeoutMs: 5000,
      filler: { text: ${JSON.stringify(FILLER)}, afterMs: 50 },
      handler: (_args, ctx) =>
        new Promise((resolve, reject) => {
          const g = globalThis as unknown as {
            __troupeVoiceToolGates?: Array<() => void>;
            __troupeVoiceToolGateWaiter?: () => void;
          };
          (g.__troupeVoiceToolGates ??= []).push(() => resolve('It is sunny.'));
          g.__troupeVoiceToolGateWaiter?.();
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    }),
    defineTool({
      name: 'fast_lookup',
      description: 'Looks something up, fast.',
      parameters: z.object({}),
      filler: { text: ${JSON.stringify(FILLER)}, afterMs: 50 },
      handler: () => 'It is sunny.',
    }),
    defineTool({
      name: 'lookup',
      description: 'Looks up the weather of a city.',
      parameters: z.object({ city: z.string() }),
      handler: ({ city }) => 'Sunny in ' + city + '.',
    }),
  ],`,
});

const call = (name: string, args: Record<string, unknown>, text?: string) => ({
  parts: [...(text ? [{ text }] : []), { toolCall: { name, arguments: args } }],
});
const say = (text: string) => ({ parts: [{ text }] });

const SCRIPT: SimScript = {
  rules: [
    { when: { user: 'slowly', round: 0 }, reply: call('slow_lookup', {}) },
    { when: { user: 'slowly' }, reply: say('It is sunny today.') },
    { when: { user: 'quickly', round: 0 }, reply: call('fast_lookup', {}) },
    { when: { user: 'quickly' }, reply: say('It is sunny today.') },
    {
      when: { user: 'paris', round: 0 },
      reply: call('lookup', { city: 'Paris' }, 'Let me look that up. '),
    },
    { when: { user: 'paris' }, reply: say('It is sunny in Paris.') },
  ],
  fallback: say('Okay.'),
};

type Output = { id: string; type: string; role?: string; content?: Array<{ transcript: string }> };

let t: TestServer;

beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice({ transcripts: () => "What's the weather in Paris?" }),
    characters: { 'helper.ts': HELPER },
    script: SCRIPT,
  });
});
afterAll(() => t?.close());

/** Each output item's index, from response.done. */
function indexes(output: readonly Output[]): Map<string, number> {
  return new Map(output.map((item, i) => [item.id, i]));
}

/** Every response event naming an item and an output index agrees with response.done's order. */
function expectConsistentIndexes(events: readonly Received[], output: readonly Output[]): void {
  const index = indexes(output);
  for (const e of events) {
    if (typeof e.output_index !== 'number' || typeof e.item_id !== 'string') continue;
    expect(index.get(e.item_id), `${e.type} of ${e.item_id}`).toBe(e.output_index);
  }
  for (const e of events) {
    if (e.type !== 'response.output_item.added' && e.type !== 'response.output_item.done') continue;
    const item = e.item as Output;
    expect(index.get(item.id), e.type).toBe(e.output_index);
  }
}

describe('a tool call in a spoken reply', () => {
  it('speaks the text before the call, runs the tool, and speaks the answer', async () => {
    const c = await openVoiceSession(t, 'character=helper');
    const from = c.events.length;
    await speak(c, "what's the weather in paris");
    const doneEvent = await c.next('response.done');
    const events = c.events.slice(from);
    const done = doneEvent.response as { status: string; output: Output[] };
    expect(done.status).toBe('completed');
    expect(done.output.map((o) => o.type)).toEqual(['message', 'mcp_call', 'message']);
    const [before, callItem, answer] = done.output as [Output, Output, Output];
    expect(before.content![0]!.transcript).toBe('Let me look that up.');
    expect(answer.content![0]!.transcript).toBe('It is sunny in Paris.');
    expect(spokenText(events, before.id)).toBe('Let me look that up.');
    expect(spokenText(events, answer.id)).toBe('It is sunny in Paris.');
    expect(audioMs(events, before.id)).toBeGreaterThan(0);
    expect(audioMs(events, answer.id)).toBeGreaterThan(0);

    const toolResult = events.find((e) => e.type === 'troupe.tool_call.result')!;
    expect(toolResult).toMatchObject({
      item_id: callItem.id,
      output_index: 1,
      name: 'lookup',
      outcome: 'ok',
      output: 'Sunny in Paris.',
    });
    expect(callItem).toMatchObject({ output: 'Sunny in Paris.', error: null });
    expectConsistentIndexes(events, done.output);

    // The items play in order: the answer's audio follows all of the first item's.
    const types = events.map((e) => `${e.type}:${String(e.item_id)}`);
    const firstEnds = types.lastIndexOf(`response.output_audio.delta:${before.id}`);
    const answerStarts = types.indexOf(`response.output_audio.delta:${answer.id}`);
    expect(firstEnds).toBeGreaterThan(-1);
    expect(answerStarts).toBeGreaterThan(firstEnds);
    // Each item ends when its own audio has played, not when the whole
    // reply's has: the first is done before the answer's first word is heard.
    const firstDone = types.indexOf(`response.output_audio.done:${before.id}`);
    const answerHeard = types.indexOf(`response.output_audio_transcript.delta:${answer.id}`);
    expect(firstDone).toBeGreaterThan(-1);
    expect(firstDone).toBeLessThan(answerHeard);
    const itemDone = events.findIndex(
      (e) => e.type === 'response.output_item.done' && (e.item as Output).id === before.id,
    );
    expect(itemDone).toBeLessThan(types.indexOf(`response.output_audio.done:${answer.id}`));

    // The model's second round saw its own words, the call and the result.
    const second = chatBodies(t.simulator).at(-1)!;
    const [assistant, tool] = second.messages.slice(-2);
    expect(assistant).toMatchObject({ role: 'assistant' });
    expect(String(assistant!.content).trim()).toBe('Let me look that up.');
    expect(tool).toMatchObject({ role: 'tool', content: 'Sunny in Paris.' });
    await c.close();
  });
});

describe('a tool filler', () => {
  it('is spoken as an item of its own while a slow tool runs, and kept from the model', async () => {
    const c = await openVoiceSession(t, 'character=helper');
    const from = c.events.length;
    const requests = chatBodies(t.simulator).length;
    c.send(userMessage('Look it up slowly.'));
    c.send({ type: 'response.create' });
    const fillerDone = await c.next(
      'response.output_audio_transcript.done',
      (e) => e.transcript === FILLER,
    );
    // The tool is still running: nothing of its result has been sent.
    expect(c.events.some((e) => e.type === 'troupe.tool_call.result')).toBe(false);
    (await nextGate())();

    const done = (await c.next('response.done')).response as { output: Output[] };
    expect(done.output.map((o) => `${o.type}${o.role ? `:${o.role}` : ''}`)).toEqual([
      'mcp_call',
      'message:assistant',
      'message:assistant',
    ]);
    const [callItem, filler, answer] = done.output as [Output, Output, Output];
    expect(filler.id).toBe(fillerDone.item_id);
    expect(filler.content).toEqual([{ type: 'output_audio', transcript: FILLER }]);
    expect(answer.content![0]!.transcript).toBe('It is sunny today.');
    const events = c.events.slice(from);
    expect(spokenText(events, filler.id)).toBe(FILLER);
    expect(audioMs(events, filler.id)).toBeGreaterThan(0);
    // Between the call and the answer, in the order the client saw them.
    const added = (id: string) =>
      events.findIndex(
        (e) => e.type === 'response.output_item.added' && (e.item as Output).id === id,
      );
    expect(added(callItem.id)).toBeLessThan(added(filler.id));
    expect(added(filler.id)).toBeLessThan(
      events.findIndex((e) => e.type === 'troupe.tool_call.result'),
    );
    expectConsistentIndexes(events, done.output);

    // Not in what the model was sent, then or on the next turn.
    c.send(userMessage('Thanks.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    const bodies = chatBodies(t.simulator).slice(requests);
    expect(bodies).toHaveLength(3);
    for (const body of bodies) expect(JSON.stringify(body.messages)).not.toContain(FILLER);
    await c.close();
  });

  it('is not spoken when the tool answers before its afterMs', async () => {
    const c = await openVoiceSession(t, 'character=helper');
    const from = c.events.length;
    c.send(userMessage('Look it up quickly.'));
    c.send({ type: 'response.create' });
    const done = (await c.next('response.done')).response as { output: Output[] };
    expect(done.output.map((o) => o.type)).toEqual(['mcp_call', 'message']);
    expect(JSON.stringify(c.events.slice(from))).not.toContain(FILLER);
    await c.close();
  });
});
