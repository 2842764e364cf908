/**
 * Background tools through a real socket: the model is told at once that the
 * work started and the turn goes on; progress reaches the client; the result
 * joins the conversation as a marked user-role message and a follow-up
 * response tells the user — not while the user speaks. `response.cancel`
 * stops only cancellable calls; closing the session stops them all. Each
 * call has exactly one outcome, in history, metrics and logs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { character } from '../helpers/characters.js';
import { scrape } from '../helpers/http.js';
import { concat, sendAudio, silence, speech } from '../helpers/audio.js';
import { connect, type Received, type TestClient } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { chatBodies, openSession, userMessage } from '../helpers/session.js';
import { within } from '../helpers/wait.js';
import { fakeVoice, openVoiceSession, startVoiceServer, waitForEvent } from '../helpers/voice.js';

type Gate = { name: string; open: (value: string) => void };
const g = globalThis as unknown as {
  __troupeBgGates?: Gate[];
  __troupeBgGateWaiters?: Set<() => void>;
};

/** The gate of the next running gated call named `name`: opening it ends the call with a value. */
function nextGate(name: string): Promise<(value: string) => void> {
  const waiters = (g.__troupeBgGateWaiters ??= new Set());
  return within(
    new Promise((resolve) => {
      const take = () => {
        const i = (g.__troupeBgGates ?? []).findIndex((x) => x.name === name);
        if (i === -1) return;
        const [gate] = g.__troupeBgGates!.splice(i, 1);
        waiters.delete(take);
        resolve(gate!.open);
      };
      waiters.add(take);
      take();
    }),
    `a running ${name} call`,
  );
}

const GATED = (name: string) => `(_args, ctx) =>
        new Promise((resolve, reject) => {
          const g = globalThis;
          (g.__troupeBgGates ??= []).push({ name: ${JSON.stringify(name)}, open: resolve });
          for (const w of [...(g.__troupeBgGateWaiters ?? [])]) w();
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        })`;

/** `search` (background, reports progress), `careful_search` (background, cancellable), `hold` (inline, gated). */
const AGENT = character({
  name: 'Agent',
  extra: `tools: [
    defineTool({
      name: 'search',
      description: 'Searches, slowly, in the background.',
      parameters: z.object({ query: z.string() }),
      background: true,
      handler: (args, ctx) => {
        ctx.progress('Halfway there.');
        return (${GATED('search')})(args, ctx);
      },
    }),
    {
      type: 'function',
      function: { name: 'careful_search', description: 'A search the user may cancel.', parameters: { type: 'object', properties: {} } },
      background: true,
      cancellable: true,
    },
    defineTool({
      name: 'narrated',
      description: 'A background search whose progress is spoken.',
      parameters: z.object({}),
      background: true,
      speakProgress: true,
      handler: async (args, ctx) => {
        await (${GATED('narrated_progress')})(args, ctx);
        ctx.progress('Half the airlines checked.');
        return (${GATED('narrated')})(args, ctx);
      },
    }),
    defineTool({
      name: 'eager',
      description: 'A background search that reports progress at once, and again a microtask later.',
      parameters: z.object({}),
      background: true,
      handler: async (args, ctx) => {
        ctx.progress('Starting.');
        await null;
        ctx.progress('Under way.');
        return (${GATED('eager')})(args, ctx);
      },
    }),
    defineTool({
      name: 'instant',
      description: 'A background search that is done at once.',
      parameters: z.object({}),
      background: true,
      handler: () => 'found at once',
    }),
    defineTool({
      name: 'hold',
      description: 'Holds the turn until the test lets it go.',
      parameters: z.object({}),
      handler: ${GATED('hold')},
    }),
  ],
  handleToolCall: (_name, args, ctx) => (${GATED('careful_search')})(args, ctx),`,
});

const call = (text: string, ...calls: Array<[string, Record<string, unknown>]>): SimReply => ({
  parts: [
    ...(text ? [{ text }] : []),
    ...calls.map(([name, args]) => ({ toolCall: { name, arguments: args } })),
  ],
});
const say = (text: string): SimReply => ({ parts: [{ text }] });

const SCRIPT: SimScript = {
  rules: [
    { when: { background: true }, reply: say('Your search is back: {{toolResult.flight}}.') },
    {
      when: { user: 'find', round: 0 },
      reply: call('Let me look. ', ['search', { query: 'flights' }]),
    },
    { when: { user: 'find' }, reply: say("I'm searching; meanwhile, window or aisle?") },
    {
      when: { user: 'both', round: 0 },
      reply: call('', ['search', { query: 'hotels' }], ['careful_search', {}], ['hold', {}]),
    },
    { when: { user: 'both' }, reply: say('Both are running.') },
    { when: { user: 'news' }, reply: say('Here is the news: {{toolResult}}.') },
    { when: { user: 'narrate', round: 0 }, reply: call('', ['narrated', {}]) },
    { when: { user: 'narrate' }, reply: say('Searching.') },
    { when: { user: 'instant', round: 0 }, reply: call('', ['instant', {}]) },
    { when: { user: 'instant' }, reply: say('On it.') },
    { when: { user: 'hold on', round: 0 }, reply: call('', ['hold', {}]) },
    { when: { user: 'hold on' }, reply: say('Held.') },
    { when: { user: 'eager', round: 0 }, reply: call('', ['eager', {}]) },
    { when: { user: 'eager' }, reply: say('On it.') },
  ],
  fallback: say('Okay.'),
};

let t: TestServer;
beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice({ transcripts: () => 'Any news on my search?' }),
    characters: { 'agent.ts': AGENT },
    script: SCRIPT,
  });
});
afterAll(() => t?.close());

function since(c: TestClient, from: number): Received[] {
  return c.events.slice(from);
}

/** The first event of `type` from index `from` on matching `where`, already here or still to come. */
function seen(
  c: TestClient,
  type: string,
  from: number,
  where: (e: Received) => boolean = () => true,
): Promise<Received> {
  return waitForEvent(c, type, where, undefined, undefined, from);
}

describe('a background tool in a text session', () => {
  it('answers "started" at once, reports progress, and tells the result in a follow-up', async () => {
    const c = await openSession(t, 'character=agent');
    const from = c.events.length;
    c.send(userMessage('Find me flights.'));
    c.send({ type: 'response.create' });
    const first = (await c.next('response.done')).response as {
      status: string;
      output: Array<{ type: string; output?: string; name?: string }>;
      troupe: { tools: Array<{ outcome: string }> };
    };
    // The turn went on while the search runs: the call, then the character's words.
    expect(first.status).toBe('completed');
    expect(first.output.map((o) => o.type)).toEqual(['message', 'mcp_call', 'message']);
    expect(first.output[1]).toMatchObject({
      name: 'search',
      output: expect.stringMatching(/^Started: search is running in the background/),
    });
    expect(first.troupe.tools).toEqual([
      expect.objectContaining({ outcome: 'background_started' }),
    ]);
    const started = since(c, from).find((e) => e.type === 'troupe.tool_call.result')!;
    expect(started).toMatchObject({ name: 'search', background: 'started', outcome: 'ok' });
    // The history the model saw stays valid: its call, then a tool message for it.
    const second = chatBodies(t.simulator).at(-1)!;
    const [assistant, tool] = second.messages.slice(-2) as [
      { role: string; tool_calls: Array<{ id: string }> },
      { role: string; tool_call_id: string; content: string },
    ];
    expect(assistant.role).toBe('assistant');
    expect(tool).toMatchObject({ role: 'tool', tool_call_id: assistant.tool_calls[0]!.id });
    expect(tool.content).toMatch(/^Started: search/);

    const progress = await seen(c, 'troupe.background_tool.progress', from);
    expect(progress).toMatchObject({
      name: 'search',
      text: 'Halfway there.',
      call_id: started.call_id,
    });

    (await nextGate('search'))('{"flight":"TP 1351"}');
    const done = await seen(c, 'troupe.background_tool.done', from);
    expect(done).toMatchObject({
      name: 'search',
      outcome: 'ok',
      output: '{"flight":"TP 1351"}',
      call_id: started.call_id,
    });
    const item = await seen(
      c,
      'conversation.item.done',
      from,
      (e) => (e.item as { id: string }).id === done.item_id,
    );
    expect(item.item).toMatchObject({
      type: 'mcp_call',
      name: 'search',
      output: '{"flight":"TP 1351"}',
      error: null,
    });

    // The follow-up: the character tells the user, and the model saw the result as a user-role message.
    const follow = (await seen(c, 'response.done', c.events.indexOf(done))).response as {
      status: string;
    };
    expect(follow.status).toBe('completed');
    const text = since(c, from)
      .filter((e) => e.type === 'response.output_text.done')
      .map((e) => e.text);
    expect(text.at(-1)).toBe('Your search is back: TP 1351.');
    const body = chatBodies(t.simulator).at(-1)!;
    const last = body.messages.at(-1) as { role: string; content: string };
    expect(last.role).toBe('user');
    expect(last.content).toMatch(
      /^\[Background tool result\] search \(call \S+\) finished:\n\{"flight":"TP 1351"\}/,
    );
    // Only the first message is a system message: every chat template takes this history.
    expect(body.messages.slice(1).some((m) => (m as { role: string }).role === 'system')).toBe(
      false,
    );

    const metrics = await scrape(t.url);
    expect(metrics).toMatch(
      /troupe_tool_calls_total\{character="agent",tool="search",variant="default",outcome="ok",mode="background"\} [1-9]/,
    );
    await c.close();
  });

  it('keeps a message sent while a tool runs for the next response, after the reply', async () => {
    const c = await openSession(t, 'character=agent');
    const from = c.events.length;
    c.send(userMessage('Hold on, please.'));
    c.send({ type: 'response.create' });
    const open = await nextGate('hold');
    c.send(userMessage('Meanwhile, this.'));
    await seen(c, 'conversation.item.done', from, (e) =>
      JSON.stringify(e.item).includes('Meanwhile, this.'),
    );
    open('held');
    const requests = chatBodies(t.simulator).length;
    await seen(c, 'response.done', from);
    // The tool round's answer reads the conversation as the response began it.
    const answer = chatBodies(t.simulator).slice(requests - 1);
    expect(JSON.stringify(answer)).not.toContain('Meanwhile');
    const deltas = since(c, from).filter((e) => e.type === 'response.output_text.delta');
    expect(deltas.map((e) => e.delta).join('')).toBe('Held.');
    // The next response reads it, after the reply (a `response` object: not the SDK's follow-up).
    const next = c.events.length;
    c.send({ type: 'response.create', response: {} });
    await seen(c, 'response.done', next);
    const last = chatBodies(t.simulator).at(-1)!.messages.slice(-3);
    expect(last.map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : ''}`)).toEqual(
      ['tool: held', 'assistant: Held.', 'user: Meanwhile, this.'],
    );
    await c.close();
  });

  it('sends the "started" result before progress the tool reports at once', async () => {
    const c = await openSession(t, 'character=agent');
    const from = c.events.length;
    c.send(userMessage('Be eager.'));
    c.send({ type: 'response.create' });
    await seen(c, 'troupe.background_tool.progress', from, (e) => e.text === 'Under way.');
    const order = since(c, from)
      .filter(
        (e) => e.type === 'troupe.tool_call.result' || e.type === 'troupe.background_tool.progress',
      )
      .map((e) => (e.type === 'troupe.tool_call.result' ? `${e.name} ${e.background}` : e.text));
    expect(order).toEqual(['eager started', 'Starting.', 'Under way.']);
    (await nextGate('eager'))('found');
    await seen(c, 'troupe.background_tool.done', from);
    await c.close();
  });

  it('sends the "started" result before the end of a call that is done at once', async () => {
    const c = await openSession(t, 'character=agent');
    const from = c.events.length;
    c.send(userMessage('Be instant.'));
    c.send({ type: 'response.create' });
    await seen(c, 'troupe.background_tool.done', from);
    const order = since(c, from)
      .filter(
        (e) => e.type === 'troupe.tool_call.result' || e.type === 'troupe.background_tool.done',
      )
      .map((e) => (e.type === 'troupe.tool_call.result' ? `started` : `done`));
    expect(order).toEqual(['started', 'done']);
    await c.close();
  });

  it('response.cancel stops a cancellable background call only; each ends with one outcome', async () => {
    const c = await openSession(t, 'character=agent');
    const from = c.events.length;
    c.send(userMessage('Run both searches.'));
    c.send({ type: 'response.create' });
    // Both background calls run, and the inline `hold` keeps the response going.
    await Promise.all([nextGate('search'), nextGate('careful_search'), nextGate('hold')]).then(
      async ([openSearch]) => {
        c.send({ type: 'response.cancel' });
        const cancelled = await c.next('response.done');
        expect((cancelled.response as { status: string }).status).toBe('cancelled');
        const stopped = await seen(c, 'troupe.background_tool.done', from);
        expect(stopped).toMatchObject({ name: 'careful_search', outcome: 'cancelled' });
        openSearch('{"hotel":"Ritz"}');
      },
    );
    const done = await seen(c, 'troupe.background_tool.done', from, (e) => e.name === 'search');
    expect(done).toMatchObject({ name: 'search', outcome: 'ok' });
    await seen(c, 'response.done', c.events.indexOf(done));
    const outcomes = c.events.filter((e) => e.type === 'troupe.background_tool.done');
    expect(outcomes.map((e) => e.name).sort()).toEqual(['careful_search', 'search']);
    await c.close();
  });

  it('closing the session stops background work, which still logs its one outcome', async () => {
    const c = await openSession(t, 'character=agent');
    c.send(userMessage('Find me flights.'));
    c.send({ type: 'response.create' });
    const started = await c.next('troupe.tool_call.result', (e) => e.background === 'started');
    await nextGate('search');
    await c.close();
    const line = await t.waitForLog(
      'background tool call cancelled',
      (l) => l.callId === started.call_id,
    );
    expect(line).toMatchObject({ tool: 'search', outcome: 'cancelled', level: 30 });
    // A client's close is not a fault: nothing at warn about it.
    const warned = t.logs().filter((l) => l.callId === started.call_id && Number(l.level) >= 40);
    expect(warned).toEqual([]);
  });
});

describe('a background tool in a voice session', () => {
  it('holds the result while the user speaks; their turn then sees it', async () => {
    const c = await openVoiceSession(t, 'character=agent');
    c.send(userMessage('Find me flights.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    const open = await nextGate('search');

    // The user starts speaking (no silence after the words yet: the turn is not over).
    sendAudio(c, concat(silence(300), await speech('any news on my search')));
    await c.next('input_audio_buffer.speech_started');
    open('{"flight":"TP 1351"}');
    const done = await c.next('troupe.background_tool.done');
    const doneAt = c.events.indexOf(done);

    // The user stops: their turn is answered, and it knows the result.
    sendAudio(c, silence(1200));
    const stopped = await c.next('input_audio_buffer.speech_stopped');
    const reply = await c.next('response.done');
    expect((reply.response as { status: string }).status).toBe('completed');
    const createdAfter = c.events
      .slice(doneAt)
      .filter((e) => e.type === 'response.created')
      .map((e) => c.events.indexOf(e));
    // Nothing was said over the user's speech: the first response after the result began after it ended.
    expect(createdAfter.length).toBeGreaterThan(0);
    expect(createdAfter[0]).toBeGreaterThan(c.events.indexOf(stopped));
    const body = chatBodies(t.simulator).at(-1)!;
    const roles = body.messages.slice(-2).map((m) => (m as { role: string }).role);
    expect(roles).toEqual(['user', 'user']);
    expect(String((body.messages.at(-2) as { content: string }).content)).toMatch(
      /^\[Background tool result\]/,
    );
    await c.close();
  });

  it('speaks progress when the tool asks and nothing else is said; the model never sees it', async () => {
    const c = await openVoiceSession(t, 'character=agent');
    c.send(userMessage('Narrate a search.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    const from = c.events.length;
    (await nextGate('narrated_progress'))('');
    const spoken = await seen(
      c,
      'response.done',
      from,
      (e) =>
        (e.response as { metadata?: { troupe?: string } }).metadata?.troupe ===
        'background_progress',
    );
    const output = (
      spoken.response as { output: Array<{ content: Array<{ transcript: string }> }> }
    ).output;
    expect(output[0]!.content[0]!.transcript).toBe('Half the airlines checked.');
    (await nextGate('narrated'))('{"flight":"TP 1351"}');
    const done = await seen(c, 'troupe.background_tool.done', from);
    await seen(c, 'response.done', c.events.indexOf(done));
    const body = chatBodies(t.simulator).at(-1)!;
    expect(JSON.stringify(body.messages)).not.toContain('Half the airlines checked.');
    await c.close();
  });

  it('a spoken progress line is written for a resume as soon as it ends', async () => {
    const c = await openVoiceSession(t, 'character=agent');
    const created = c.events.find((e) => e.type === 'session.created')!;
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    c.send(userMessage('Narrate a search.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    const from = c.events.length;
    (await nextGate('narrated_progress'))('');
    await seen(
      c,
      'response.done',
      from,
      (e) =>
        (e.response as { metadata?: { troupe?: string } }).metadata?.troupe ===
        'background_progress',
    );
    // Nothing else has changed since (the search still runs): the line's own write has it.
    const back = await connect(`${t.wsUrl}?resume=${token}`);
    await back.next('session.created');
    await seen(back, 'conversation.item.added', 0, (e) =>
      JSON.stringify(e.item).includes('Half the airlines checked.'),
    );
    // The conversation has one connection: the old one is told and closed,
    // and the search still running reports to the resumed session.
    expect((await c.next('error')).error).toMatchObject({ code: 'session_resumed_elsewhere' });
    expect((await c.closed).code).toBe(4002);
    (await nextGate('narrated'))('{"flight":"TP 1351"}');
    await seen(back, 'troupe.background_tool.done', 0);
    await back.close();
  });
});

describe('the idle clock (SESSION_IDLE_TIMEOUT_S=1) and a background call', () => {
  let idle: TestServer;
  beforeAll(async () => {
    idle = await startVoiceServer({
      voice: await fakeVoice(),
      characters: { 'agent.ts': AGENT },
      script: SCRIPT,
      env: { SESSION_IDLE_TIMEOUT_S: '1' },
    });
  });
  afterAll(() => idle?.close());

  it('does not close a session whose background call still runs; it closes a whole period after the result is told', async () => {
    const c = await openSession(idle, 'character=agent');
    c.send(userMessage('Find me flights.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    // The client says nothing more: the idle clock runs out while the search works.
    await idle.waitForLog('idle clock deferred: the session works');
    expect(c.events.some((e) => e.type === 'error')).toBe(false);
    (await nextGate('search'))('{"flight":"TP 1351"}');
    const done = await c.next('troupe.background_tool.done');
    expect(done).toMatchObject({ name: 'search', outcome: 'ok' });
    const followUp = (await c.next('response.done')).response as { status: string };
    expect(followUp.status).toBe('completed');
    // Then a whole idle period from the end of the work, to answer what it was told.
    await idle.waitForLog('idle clock restarted: the session has just worked');
    const { code, reason } = await within(c.closed, 'the idle close');
    expect([code, reason]).toEqual([4000, 'session_idle_timeout']);
  });
});
