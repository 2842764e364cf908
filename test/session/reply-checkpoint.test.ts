/**
 * A reply under way as data: a snapshot taken while it streams carries what
 * the client has of it, and a session restored from that snapshot (a resume
 * after the process was killed mid-reply) has the reply in history, cut
 * there, for the next request to read.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/llm/chunk.js';
import { TurnState, runningCalls, type CallOutcome } from '../../src/llm/turn-state.js';
import type { Item, ServerEvent } from '../../src/session/events.js';
import { INTERRUPTED_CALL, ResponseWriter } from '../../src/session/response-writer.js';
import {
  createSession,
  restoreSession,
  type Session,
  type SessionOptions,
  type SessionState,
} from '../../src/session/session.js';
import { TOOL_INTERRUPTED_OUTPUT } from '../../src/tools/constants.js';
import type { ToolCall } from '../../src/tools/types.js';
import { characterDir, type CharacterDir } from '../helpers/characters.js';
import { lastChat } from '../helpers/session.js';
import { startSessionParts, type SessionParts } from '../helpers/session-parts.js';
import {
  BOOKED,
  BOOKER,
  BOOK_STORY_LINE,
  STORY,
  STORY_SCRIPT,
  WEATHER_STORY_LINE,
  WINE_BOOK_STORY_LINE,
  WINE_ORDERED,
} from '../helpers/story.js';
import { within } from '../helpers/wait.js';

let parts: SessionParts;
beforeAll(async () => {
  parts = await startSessionParts(STORY_SCRIPT);
});
afterAll(() => parts?.close());

/** What a session sent and when it said it changed, with waits on either. */
class Recorder {
  readonly events: ServerEvent[] = [];
  /** `settled` of each change the session reported, in order. */
  readonly changes: boolean[] = [];
  #checks: Array<() => void> = [];

  send = (event: ServerEvent): void => {
    this.events.push(event);
    this.#poke();
  };

  changed = (settled: boolean): void => {
    this.changes.push(settled);
    this.#poke();
  };

  until(done: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (!done()) return;
        this.#checks = this.#checks.filter((c) => c !== check);
        resolve();
      };
      this.#checks.push(check);
      check();
    });
  }

  /** The text deltas sent so far, joined. */
  text(): string {
    return this.events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => (e as { delta: string }).delta)
      .join('');
  }

  #poke(): void {
    for (const check of [...this.#checks]) check();
  }
}

function options(
  rec: Recorder,
  replySaveMs: number,
  on = parts,
): Omit<SessionOptions, 'id' | 'character'> {
  return {
    ...on.options(rec.send, { replySaveMs }),
    onChange: (_session, settled) => rec.changed(settled === true),
  };
}

async function open(
  rec: Recorder,
  replySaveMs = 20,
  character = 'plain',
  on = parts,
): Promise<Session> {
  const session = await createSession({
    ...options(rec, replySaveMs, on),
    id: 'sess_checkpoint',
    character: on.registry.get(character)!,
  });
  session.start();
  return session;
}

/** A session restored from `state` (its process gone), asked for a reply that has ended. */
async function restoreAndAsk(
  state: SessionState,
  on = parts,
): Promise<{ again: Recorder; restored: Session }> {
  const again = new Recorder();
  const restored = await restoreSession(state, options(again, 20, on));
  restored.start();
  await restored.handle({ type: 'response.create' });
  await restored.idle();
  return { again, restored };
}

/** The client's line as a `conversation.item.create`. */
function line(text: string) {
  return {
    type: 'conversation.item.create' as const,
    item: {
      type: 'message' as const,
      role: 'user' as const,
      content: [{ type: 'input_text' as const, text }],
    },
  };
}

const storyLine = line('Tell me a story');

/** The history's items of a snapshot, in order. */
function itemsOf(state: SessionState): Item[] {
  return state.conversation!.history.groups.flatMap((g) => g.items);
}

describe('a reply under way in the snapshot', () => {
  it('carries what the client has of it; restored, the reply is in history, cut there', async () => {
    const rec = new Recorder();
    const session = await open(rec);
    await session.handle(storyLine);
    parts.sim.injectFault({ type: 'stall', afterChunks: 6 });
    const asked = session.handle({ type: 'response.create' });
    // Text came, and the session said it changed after it (its timer, not a delta).
    await rec.until(() => rec.text() !== '');
    const at = rec.changes.length;
    await rec.until(() => rec.changes.slice(at).includes(false));

    const state = JSON.parse(session.snapshotText()) as SessionState;
    const said = rec.text();
    expect(STORY.startsWith(said) && said.length < STORY.length).toBe(true);
    const reply = state.conversation!.reply!;
    expect(reply.group).toBe(state.conversation!.history.groups.length - 1);
    expect(reply.messages).toEqual([{ role: 'assistant', content: said }]);
    expect(reply.items).toHaveLength(1);
    expect(reply.items[0]).toMatchObject({
      type: 'message',
      role: 'assistant',
      status: 'incomplete',
      content: [{ type: 'output_text', text: said }],
    });
    // The live item is not changed by the checkpoint.
    const added = rec.events.find((e) => e.type === 'response.output_item.added') as {
      item: Item;
    };
    expect(reply.items[0]!.id).toBe(added.item.id);
    session.close();
    await asked;

    // The process is gone; the conversation comes back from the record.
    const { again, restored } = await restoreAndAsk(state);
    const announced = again.events
      .filter((e) => e.type === 'conversation.item.added')
      .map((e) => (e as { item: Item }).item);
    expect(announced.map((i) => i.id)).toContain(added.item.id);
    expect(announced.find((i) => i.id === added.item.id)).toMatchObject({
      status: 'incomplete',
      content: [{ type: 'output_text', text: said }],
    });
    // The next request reads the line and what had been said of the reply.
    expect(lastChat(parts.sim).messages.slice(-2)).toEqual<ChatMessage[]>([
      { role: 'user', content: 'Tell me a story' },
      { role: 'assistant', content: said },
    ]);
    // Its own reply joined history after the cut one (the greeting first); no checkpoint is left over.
    const after = JSON.parse(restored.snapshotText()) as SessionState;
    expect(after.conversation!.reply).toBeUndefined();
    expect(itemsOf(after).map((i) => (i.type === 'message' ? i.role : i.type))).toEqual([
      'assistant',
      'user',
      'assistant',
      'assistant',
    ]);
    restored.close();
  });

  it("a round of the server's tools is written at once, before any text; restored, the model reads it", async () => {
    const rec = new Recorder();
    // A period longer than the test: only the round of tools asks for a write.
    const session = await open(rec, 60_000, 'weather');
    await session.handle(line(WEATHER_STORY_LINE));
    const before = rec.changes.length;
    // The tool round is answered; the reply after it stalls before its first word.
    parts.sim.injectFault({ type: 'none' });
    parts.sim.injectFault({ type: 'stall', afterChunks: 0 });
    const asks = parts.sim.requests.length;
    const asked = session.handle({ type: 'response.create' });
    await rec.until(() => rec.changes.slice(before).includes(true));
    // The write was asked for before the next round's request: it is under way, silent.
    const stalled = (): boolean =>
      parts.sim.requests.slice(asks).some((r) => r.fault?.type === 'stall');
    await within(
      (async () => {
        while (!stalled()) await sleep(10);
      })(),
      'the round after the tools, asked',
    );
    expect(rec.text()).toBe('');
    const state = JSON.parse(session.snapshotText()) as SessionState;
    const reply = state.conversation!.reply!;
    expect(reply.messages.map((m) => m.role)).toEqual(['assistant', 'tool']);
    expect(reply.messages[0]).toMatchObject({
      tool_calls: [{ function: { name: 'get_current_weather' } }],
    });
    expect(reply.items).toMatchObject([
      { type: 'mcp_call', name: 'get_current_weather', output: expect.stringContaining('Glasgow') },
    ]);
    session.close();
    await asked;

    // Restored, the next request reads the call and its result: the tool is not asked for again.
    const { again, restored } = await restoreAndAsk(state);
    expect(lastChat(parts.sim).messages.slice(-3)).toEqual<ChatMessage[]>([
      { role: 'user', content: WEATHER_STORY_LINE },
      ...reply.messages,
    ]);
    expect(again.text()).toBe(STORY);
    expect(again.events.map((e) => e.type)).not.toContain('response.mcp_call.completed');
    restored.close();
  });

  it("a call's result is written before the client's socket sends that the call completed", async () => {
    const rec = new Recorder();
    // A socket sends what a tick wrote at the end of it (a process.nextTick, the frame writer's).
    const sentAt: Array<{ settled: boolean }> = [];
    const send = rec.send;
    rec.send = (event) => {
      send(event);
      if (event.type !== 'response.mcp_call.completed') return;
      const asked = rec.changes.length;
      process.nextTick(() => sentAt.push({ settled: rec.changes.slice(asked).includes(true) }));
    };
    const session = await open(rec, 60_000, 'weather');
    await session.handle(line(WEATHER_STORY_LINE));
    await session.handle({ type: 'response.create' });
    await session.idle();
    expect(sentAt).toEqual([{ settled: true }]);
    session.close();
  });

  it('is gone once the reply ends: history has it once', async () => {
    const rec = new Recorder();
    const session = await open(rec);
    await session.handle(storyLine);
    await session.handle({ type: 'response.create' });
    await session.idle();
    const state = JSON.parse(session.snapshotText()) as SessionState;
    expect(state.conversation!.reply).toBeUndefined();
    // The greeting, the line, the reply.
    expect(itemsOf(state)).toHaveLength(3);
    expect(itemsOf(state)[2]).toMatchObject({
      status: 'completed',
      content: [{ type: 'output_text', text: STORY }],
    });
    session.close();
  });

  it('is not kept without replySaveMs', async () => {
    const rec = new Recorder();
    const session = await open(rec, 0);
    await session.handle(storyLine);
    parts.sim.injectFault({ type: 'stall', afterChunks: 6 });
    const asked = session.handle({ type: 'response.create' });
    await rec.until(() => rec.text() !== '');
    const state = JSON.parse(session.snapshotText()) as SessionState;
    expect(state.conversation!.reply).toBeUndefined();
    session.close();
    await asked;
  });

  it('a restore refuses a reply that names an exchange the conversation does not have', async () => {
    const rec = new Recorder();
    const session = await open(rec);
    await session.handle(storyLine);
    const state = JSON.parse(session.snapshotText()) as SessionState;
    session.close();
    state.conversation!.reply = { group: 7, messages: [], items: [] };
    await expect(restoreSession(state, options(new Recorder(), 20))).rejects.toThrow(
      /names exchange 7/,
    );
  });
});

describe('a round of tools cut while it runs', () => {
  const gates = globalThis as unknown as {
    __troupeBookGate?: () => void;
    __troupeWineGate?: () => void;
  };
  let chars: CharacterDir;
  let booking: SessionParts;
  beforeAll(async () => {
    chars = await characterDir({ 'booker.ts': BOOKER });
    booking = await startSessionParts(STORY_SCRIPT, chars.dir);
  });
  afterAll(async () => {
    await booking?.close();
    await chars?.cleanup();
  });

  it('is written once the calls start, each failed as interrupted; restored, the model reads that', async () => {
    const rec = new Recorder();
    // A period longer than the test: only the round of tools asks for writes.
    const session = await open(rec, 60_000, 'booker', booking);
    await session.handle(line(BOOK_STORY_LINE));
    const before = rec.changes.length;
    delete gates.__troupeBookGate;
    // The round after the tools stalls before its first word.
    booking.sim.injectFault({ type: 'none' });
    booking.sim.injectFault({ type: 'stall', afterChunks: 0 });
    const asked = session.handle({ type: 'response.create' });
    await rec.until(() => rec.changes.slice(before).includes(true));
    // The handler is running: the write holds the call, failed as interrupted.
    expect(gates.__troupeBookGate).toBeTypeOf('function');
    const state = JSON.parse(session.snapshotText()) as SessionState;
    const cut = state.conversation!.reply!;
    expect(cut.messages).toMatchObject([
      { role: 'assistant', tool_calls: [{ function: { name: 'book_table' } }] },
      { role: 'tool', content: TOOL_INTERRUPTED_OUTPUT },
    ]);
    const callId = (cut.messages[0] as { tool_calls: Array<{ id: string }> }).tool_calls[0]!.id;
    expect(cut.messages[1]).toMatchObject({ tool_call_id: callId });
    expect(cut.items).toMatchObject([
      {
        type: 'mcp_call',
        name: 'book_table',
        output: null,
        error: { type: 'tool_execution_error', message: TOOL_INTERRUPTED_OUTPUT },
      },
    ]);
    // The client was not told so: to it the call runs on.
    expect(rec.events.map((e) => e.type)).not.toContain('response.mcp_call.failed');

    // The call ends: the next write has its result in place of the interruption.
    const ran = rec.changes.length;
    const asks = booking.sim.requests.length;
    gates.__troupeBookGate!();
    await rec.until(() => rec.changes.slice(ran).includes(true));
    await within(
      (async () => {
        while (!booking.sim.requests.slice(asks).some((r) => r.fault?.type === 'stall')) {
          await sleep(10);
        }
      })(),
      'the round after the tools, asked',
    );
    const done = (JSON.parse(session.snapshotText()) as SessionState).conversation!.reply!;
    expect(done.messages[1]).toMatchObject({ role: 'tool', content: BOOKED });
    expect(done.items).toMatchObject([{ type: 'mcp_call', output: BOOKED, error: null }]);
    session.close();
    await asked;

    // Restored from the write made while it ran, the next request says the call was cut.
    const { again, restored } = await restoreAndAsk(state, booking);
    expect(lastChat(booking.sim).messages.slice(-3)).toEqual<ChatMessage[]>([
      { role: 'user', content: BOOK_STORY_LINE },
      ...cut.messages,
    ]);
    expect(again.text()).toBe(STORY);
    restored.close();
  });

  it('is written again as each call ends while the others run, with its own result', async () => {
    const rec = new Recorder();
    const session = await open(rec, 60_000, 'booker', booking);
    await session.handle(line(WINE_BOOK_STORY_LINE));
    delete gates.__troupeBookGate;
    delete gates.__troupeWineGate;
    booking.sim.injectFault({ type: 'none' });
    booking.sim.injectFault({ type: 'stall', afterChunks: 0 });
    const before = rec.changes.length;
    const asked = session.handle({ type: 'response.create' });
    await rec.until(() => rec.changes.slice(before).includes(true));
    expect(gates.__troupeWineGate).toBeTypeOf('function');
    expect(gates.__troupeBookGate).toBeTypeOf('function');
    const outputs = (): unknown[] =>
      (JSON.parse(session.snapshotText()) as SessionState)
        .conversation!.reply!.messages.filter((m) => m.role === 'tool')
        .map((m) => m.content);
    expect(outputs()).toEqual([TOOL_INTERRUPTED_OUTPUT, TOOL_INTERRUPTED_OUTPUT]);

    // The wine is ordered while the table is still being booked: written at once, with its result.
    const ordered = rec.changes.length;
    gates.__troupeWineGate!();
    await rec.until(() => rec.changes.slice(ordered).includes(true));
    expect(outputs()).toEqual([WINE_ORDERED, TOOL_INTERRUPTED_OUTPUT]);
    const reply = (JSON.parse(session.snapshotText()) as SessionState).conversation!.reply!;
    expect(reply.items).toMatchObject([
      { type: 'mcp_call', name: 'order_wine', output: WINE_ORDERED, error: null },
      { type: 'mcp_call', name: 'book_table', output: null, error: INTERRUPTED_CALL },
    ]);
    gates.__troupeBookGate!();
    session.close();
    await asked;
  });
});

describe('the writer and the turn cut into history at a checkpoint', () => {
  const turnOf = (messages: ChatMessage[] | undefined) => ({ soFar: () => messages });

  it('keeps the open text, a running call as interrupted, and nothing while a call streams or awaits the client', () => {
    const sent: ServerEvent[] = [];
    const out = new ResponseWriter('resp_1', (e) => sent.push(e), null, undefined, {
      serverLabel: 'plain',
      runs: (name) => name !== 'show_card',
    });
    expect(out.checkpoint(turnOf([]))).toBeUndefined();
    out.apply({ type: 'text.delta', round: 0, delta: 'Let me look.' });
    const said: ChatMessage[] = [{ role: 'assistant', content: 'Let me look.' }];
    expect(out.checkpoint(turnOf(said))?.items).toMatchObject([
      { status: 'incomplete', content: [{ type: 'output_text', text: 'Let me look.' }] },
    ]);
    out.apply({ type: 'tool_call.start', round: 0, callId: 'c1', name: 'get_time' });
    expect(out.checkpoint(turnOf(said))).toBeUndefined();
    out.apply({
      type: 'tool_call.done',
      round: 0,
      call: { id: 'c1', name: 'get_time', arguments: '{}' },
    });
    // Running: the turn's account decides whether it can be cut (see below).
    expect(out.checkpoint(turnOf(undefined))).toBeUndefined();
    expect(out.checkpoint(turnOf(said))?.items).toMatchObject([
      { type: 'message', status: 'completed' },
      { type: 'mcp_call', output: null, error: INTERRUPTED_CALL },
    ]);
    out.apply({
      type: 'tool.result',
      round: 0,
      result: {
        callId: 'c1',
        name: 'get_time',
        outcome: 'ok',
        output: '12:34',
        durationMs: 1,
        handlerMs: 1,
        variant: 'default',
      },
    });
    const round: ChatMessage[] = [{ role: 'assistant', content: 'Let me look.' }];
    const kept = out.checkpoint(turnOf(round));
    expect(kept?.items.map((i) => i.type)).toEqual(['message', 'mcp_call']);
    expect(kept?.items[0]).toMatchObject({ status: 'completed' });
    // The turn's own account decides: a round whose calls are out is not cut.
    expect(out.checkpoint(turnOf(undefined))).toBeUndefined();
    // A call the client runs ends the turn; until then, no checkpoint.
    out.apply({ type: 'tool_call.start', round: 1, callId: 'c2', name: 'show_card' });
    expect(out.checkpoint(turnOf(round))).toBeUndefined();
  });

  it('the turn: its round text once, nothing while calls run', () => {
    const turn = new TurnState(() => {});
    turn.startRound();
    turn.say(0, 'Checking.');
    expect(turn.soFar()).toEqual([{ role: 'assistant', content: 'Checking.' }]);
    const calls: ChatMessage = {
      role: 'assistant',
      content: 'Checking.',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
    };
    turn.keepCalls(calls);
    expect(turn.soFar()).toBeUndefined();
    const result: ChatMessage = { role: 'tool', tool_call_id: 'c1', content: 'ok' };
    turn.keepResults([result]);
    expect(turn.soFar()).toEqual([calls, result]);
    turn.startRound();
    turn.say(1, 'Done.');
    expect(turn.soFar()).toEqual([calls, result, { role: 'assistant', content: 'Done.' }]);
    turn.keepRoundText();
    expect(turn.soFar()).toEqual([calls, result, { role: 'assistant', content: 'Done.' }]);
  });

  it("the turn: the server's calls read as interrupted while they run, each until its result", () => {
    const turn = new TurnState(() => {});
    turn.startRound();
    const call = (id: string): ToolCall => ({ id, name: 'f', arguments: '{}' });
    const asked: ChatMessage = {
      role: 'assistant',
      content: '',
      tool_calls: ['c1', 'c2'].map((id) => ({
        id,
        type: 'function' as const,
        function: { name: 'f', arguments: '{}' },
      })),
    };
    const messages = (results: readonly CallOutcome[]): ChatMessage[] =>
      results.map((r) => ({ role: 'tool', tool_call_id: r.callId, content: r.output }));
    turn.keepCalls(asked, runningCalls([call('c1'), call('c2')], messages));
    const cut = (id: string): ChatMessage => ({
      role: 'tool',
      tool_call_id: id,
      content: TOOL_INTERRUPTED_OUTPUT,
    });
    expect(turn.soFar()).toEqual([asked, cut('c1'), cut('c2')]);
    turn.resultIn({ callId: 'c2', name: 'f', outcome: 'ok', output: 'two' });
    expect(turn.soFar()).toEqual([
      asked,
      cut('c1'),
      { role: 'tool', tool_call_id: 'c2', content: 'two' },
    ]);
    const results: ChatMessage[] = [
      { role: 'tool', tool_call_id: 'c1', content: 'one' },
      { role: 'tool', tool_call_id: 'c2', content: 'two' },
    ];
    turn.keepResults(results);
    expect(turn.soFar()).toEqual([asked, ...results]);
  });
});
