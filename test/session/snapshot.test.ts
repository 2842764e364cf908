/**
 * A session as data: its snapshot round-trips through JSON, and a session
 * restored from it in another process sends the LLM what the original would.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TroupeError } from '../../src/errors.js';
import type { ClientEvent, ServerEvent } from '../../src/session/events.js';
import {
  createSession,
  restoreSession,
  type Session,
  type SessionOptions,
  type SessionState,
} from '../../src/session/session.js';
import { DEMO_SCRIPT, type SimScript } from '../../src/testing/index.js';
import { chatBodies, type ChatBody } from '../helpers/session.js';
import { startSessionParts, type SessionParts } from '../helpers/session-parts.js';

let parts: SessionParts;

beforeAll(async () => {
  // The demo's rules, and a question the client's own tool answers.
  const script: SimScript = {
    ...DEMO_SCRIPT,
    rules: [
      {
        when: { user: 'what time', round: 0 },
        reply: { parts: [{ toolCall: { name: 'get_time', arguments: {} } }] },
      },
      { when: { toolResult: '12:34' }, reply: { parts: [{ text: 'It is 12:34.' }] } },
      ...DEMO_SCRIPT.rules,
    ],
  };
  parts = await startSessionParts(script);
});
afterAll(() => parts?.close());

/** Session options that collect what the session sends. */
function options(sent: ServerEvent[]): Omit<SessionOptions, 'id' | 'character'> {
  return parts.options((event) => sent.push(event));
}

async function open(characterId: string, sent: ServerEvent[] = []): Promise<Session> {
  const session = await createSession({
    ...options(sent),
    id: `sess_${characterId}`,
    character: parts.registry.get(characterId)!,
  });
  session.start();
  return session;
}

function userTurn(text: string): ClientEvent[] {
  return [
    {
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
    },
    { type: 'response.create' },
  ];
}

async function play(session: Session, events: readonly ClientEvent[]): Promise<void> {
  for (const event of events) {
    await session.handle(event);
    await session.idle();
  }
}

/** Restores `snapshot` in a new Node process, which then handles `events`. */
function restoreElsewhere(
  snapshot: string,
  events: readonly ClientEvent[],
): Promise<{ events: ServerEvent[]; snapshot: SessionState }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', 'test/helpers/session-process.ts'],
      { env: { ...process.env, SIM_URL: parts.sim.url, CHARACTERS_DIR: 'characters' } },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${err.message}\n${stderr}`));
        resolve(JSON.parse(stdout) as { events: ServerEvent[]; snapshot: SessionState });
      },
    );
    child.stdin!.end(JSON.stringify({ snapshot: JSON.parse(snapshot), events }));
  });
}

const clientTool = {
  type: 'function' as const,
  name: 'show_card',
  description: 'Shows a card on the screen',
  parameters: { type: 'object', properties: { text: { type: 'string' } } },
};

function toolOutputs(events: readonly ServerEvent[]): string[] {
  return events.flatMap((e) => (e.type === 'troupe.tool_call.result' ? [e.output] : []));
}

describe('session snapshots', () => {
  it('restores a session in a fresh process whose next LLM request is the one the original sends', async () => {
    const sent: ServerEvent[] = [];
    const original = await open('quizmaster', sent);
    await play(original, [
      { type: 'session.update', session: { temperature: 0.3, tools: [clientTool] } },
      ...userTurn("Let's do a quiz!"),
      ...userTurn('Paris'),
    ]);
    const stored = JSON.stringify(original.snapshot());
    const next = userTurn("What's my score?");

    const before = chatBodies(parts.sim).length;
    const mark = sent.length;
    await play(original, next);
    const expected: ChatBody = chatBodies(parts.sim)[before]!;
    expect(toolOutputs(sent.slice(mark))).toEqual([
      'Score: 1 correct of 1 answered (3 questions in all).',
    ]);

    const elsewhere = chatBodies(parts.sim).length;
    const restored = await restoreElsewhere(stored, next);
    expect(chatBodies(parts.sim)[elsewhere]).toEqual(expected);
    expect(expected.temperature).toBe(0.3);
    expect(expected.tools?.map((t) => t.function.name)).toContain('show_card');
    // The quiz (the character's per-session state) came along.
    expect(toolOutputs(restored.events)).toEqual([
      'Score: 1 correct of 1 answered (3 questions in all).',
    ]);
    expect(restored.snapshot.characterState).toEqual(original.snapshot().characterState);
    // The restored session announced the conversation it took over.
    const announced = restored.events.flatMap((e) =>
      e.type === 'conversation.item.done' ? [e.item] : [],
    );
    const storedItems = (JSON.parse(stored) as SessionState).conversation.history.groups.flatMap(
      (g) => g.items,
    );
    expect(announced.slice(0, storedItems.length)).toEqual(storedItems);
    original.close();
    // A second Node process starting tsx on a busy machine: the suite's generous test timeout.
  });

  it('round-trips through JSON: a restored session has the same snapshot', async () => {
    const original = await open('weather');
    await play(original, [
      { type: 'session.update', session: { instructions: 'Be brief.', max_output_tokens: 200 } },
      ...userTurn("What's the weather in Glasgow?"),
    ]);
    const snapshot = JSON.parse(JSON.stringify(original.snapshot())) as SessionState;
    expect(snapshot).toEqual(original.snapshot());
    // The stores' text, written without the copy first, is the same JSON.
    expect(original.snapshotText()).toBe(JSON.stringify(original.snapshot()));
    const sent: ServerEvent[] = [];
    const restored = await restoreSession(snapshot, options(sent));
    expect(restored.snapshot()).toEqual(snapshot);
    restored.start();
    const created = sent.find((e) => e.type === 'session.created');
    expect(created).toMatchObject({
      session: { instructions: 'Be brief.', max_output_tokens: 200, character: 'weather' },
    });
    // A snapshot is a copy: the session goes on without changing it.
    await play(restored, userTurn('And in Paris?'));
    expect(restored.snapshot().conversation.history.groups.length).toBeGreaterThan(
      snapshot.conversation.history.groups.length,
    );
    expect(snapshot).toEqual(JSON.parse(JSON.stringify(original.snapshot())));
    original.close();
    restored.close();
  });

  it('takes a snapshot given up to it (copy: false) as its own state, without a copy', async () => {
    const original = await open('weather');
    await play(original, userTurn("What's the weather in Glasgow?"));
    const given = JSON.parse(JSON.stringify(original.snapshot())) as SessionState;
    const expected = structuredClone(given);
    const restored = await restoreSession(given, options([]), { copy: false });
    expect(restored.snapshot()).toEqual(expected);
    // The state given up is the session's own now: it moved the conversation out of it.
    expect(given.conversation).toBeNull();
    // By default it is a copy: the caller's snapshot is left as it was.
    const copied = await restoreSession(expected, options([]));
    expect(expected).toEqual(restored.snapshot());
    original.close();
    restored.close();
    copied.close();
  });

  it('keeps a client call awaiting output, which the restored session then takes', async () => {
    const getTime = { ...clientTool, name: 'get_time', description: 'The time where the user is' };
    const sent: ServerEvent[] = [];
    const original = await open('weather', sent);
    await play(original, [
      { type: 'session.update', session: { tools: [getTime] } },
      ...userTurn('what time is it?'),
    ]);
    const call = sent.findLast(
      (e) => e.type === 'response.output_item.done' && e.item.type === 'function_call',
    );
    const callId = (call as { item: { call_id: string } }).item.call_id;
    const snapshot = JSON.parse(JSON.stringify(original.snapshot())) as SessionState;
    expect(snapshot.conversation.pendingCalls).toMatchObject([{ callId, name: 'get_time' }]);
    const answer: ClientEvent[] = [
      {
        type: 'conversation.item.create',
        item: { type: 'function_call_output', call_id: callId, output: '12:34' },
      },
      { type: 'response.create' },
    ];
    const before = chatBodies(parts.sim).length;
    await play(original, answer);
    const expected = chatBodies(parts.sim)[before]!;
    const restoredSent: ServerEvent[] = [];
    const restored = await restoreSession(snapshot, options(restoredSent));
    const mark = chatBodies(parts.sim).length;
    await play(restored, answer);
    expect(restoredSent.filter((e) => e.type === 'error')).toEqual([]);
    expect(chatBodies(parts.sim)[mark]).toEqual(expected);
    expect(expected.messages.at(-1)).toMatchObject({ role: 'tool', content: '12:34' });
    original.close();
    restored.close();
  });

  it("keeps a deleted reply's message deleted, and a restored session deletes its replies' messages too", async () => {
    const original = await open('weather');
    await play(original, userTurn('Celsius, please.'));
    const items = original.snapshot().conversation.history.groups.flatMap((g) => g.items);
    // The greeting, the user's message, then the reply's words, its call and its last words.
    const [checking, call, last] = items.slice(2).map((i) => i.id);
    expect(items.slice(2).map((i) => i.type)).toEqual(['message', 'mcp_call', 'message']);
    await play(original, [{ type: 'conversation.item.delete', item_id: last! }]);
    const snapshot = JSON.parse(JSON.stringify(original.snapshot())) as SessionState;

    const sent: ServerEvent[] = [];
    const restored = await restoreSession(snapshot, options(sent));
    restored.start();
    const ids = (state: SessionState) =>
      state.conversation.history.groups.flatMap((g) => g.items.map((i) => i.id));
    expect(ids(restored.snapshot())).not.toContain(last);
    await play(restored, [
      { type: 'conversation.item.delete', item_id: checking! },
      { type: 'conversation.item.delete', item_id: call! },
    ]);
    expect(sent.filter((e) => e.type === 'conversation.item.deleted')).toEqual([
      { type: 'conversation.item.deleted', item_id: checking },
    ]);
    expect(sent.find((e) => e.type === 'error')).toMatchObject({
      error: { code: 'item_not_deletable' },
    });
    const before = chatBodies(parts.sim).length;
    await play(restored, userTurn('Thanks!'));
    const messages = chatBodies(parts.sim)[before]!.messages;
    expect(JSON.stringify(messages)).not.toMatch(/Checking Glasgow|in Glasgow right now/);
    // The call keeps its result.
    expect(messages.slice(2, 5)).toMatchObject([
      { role: 'user', content: 'Celsius, please.' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ function: { name: 'get_current_weather' } }],
      },
      { role: 'tool' },
    ]);
    original.close();
    restored.close();
  });

  it('tells its listener after each change that matters, once per response and never per delta', async () => {
    let calls = 0;
    const sent: ServerEvent[] = [];
    const session = await createSession({
      ...options(sent),
      id: 'sess_changes',
      character: parts.registry.get('plain')!,
      onChange: () => calls++,
    });
    session.start();
    expect(calls).toBe(0);
    await play(session, [{ type: 'session.update', session: { temperature: 0.5 } }]);
    expect(calls).toBe(1);
    await play(session, userTurn('Tell me a long story, please.'));
    const deltas = sent.filter((e) => e.type === 'response.output_text.delta').length;
    expect(deltas).toBeGreaterThan(1);
    // The item, then the response's end.
    expect(calls).toBe(3);
    expect(session.version).toBe(calls);
    // A refused event changes nothing.
    await play(session, [{ type: 'conversation.item.delete', item_id: 'nope' }]);
    expect(calls).toBe(3);
    session.close();
  });

  it('refuses a snapshot of another format or of a character this server lacks', async () => {
    const session = await open('plain');
    const snapshot = session.snapshot();
    session.close();
    const other = { ...snapshot, version: 2 } as unknown as SessionState;
    await expect(restoreSession(other, options([]))).rejects.toMatchObject({
      code: 'E_SNAPSHOT',
      message: expect.stringMatching(/version 2 cannot be restored/),
    });
    const gone = { ...snapshot, character: 'nobody' };
    const err: unknown = await restoreSession(gone, options([])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TroupeError);
    expect((err as Error).message).toMatch(/character "nobody".*available: .*plain/);
  });
});
