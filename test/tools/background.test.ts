/**
 * Background calls at the executor level: valid arguments start the call and
 * answer "started"; invalid ones end at once; the call's one outcome comes
 * later; only cancellable calls stop on an interruption; closing stops all.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { validateCharacter } from '../../src/characters/validate.js';
import {
  BackgroundCalls,
  createToolset,
  defineTool,
  executeToolCall,
  type BackgroundDone,
  type BackgroundProgress,
  type ToolCall,
} from '../../src/tools/index.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';

const session = { id: 's1', character: 'test', state: {} };
const log = createMemoryLogger();

function call(name: string, args: unknown, id = 'call_1'): ToolCall {
  return { id, name, arguments: JSON.stringify(args) };
}

/** A background tool that waits for its gate (or its signal), reporting progress first. */
function gatedTool(name: string, cancellable?: boolean) {
  const gates: Array<(v: string) => void> = [];
  const tool = defineTool({
    name,
    description: 'Slow.',
    parameters: z.object({ q: z.string() }),
    background: true,
    ...(cancellable !== undefined ? { cancellable } : {}),
    handler: ({ q }, ctx) =>
      new Promise((resolve, reject) => {
        ctx.progress(`looking for ${q}`);
        gates.push(resolve);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }),
  });
  return { tool, gates };
}

function setup() {
  const progress: BackgroundProgress[] = [];
  const done: BackgroundDone[] = [];
  let notify = () => {};
  const calls = new BackgroundCalls({
    session: () => session,
    log: () => log,
    onProgress: (p) => progress.push(p),
    onDone: (d) => {
      done.push(d);
      notify();
    },
  });
  const nextDone = () => new Promise<void>((resolve) => (notify = resolve));
  return { calls, progress, done, nextDone };
}

describe('background tool calls', () => {
  it('answers "started" at once and reports the outcome when the handler ends', async () => {
    const { tool, gates } = gatedTool('search');
    const toolset = createToolset([tool]);
    const { calls, progress, done, nextDone } = setup();
    const signal = new AbortController().signal;
    const started = await executeToolCall(call('search', { q: 'flights' }), toolset, {
      signal,
      session,
      log,
      background: calls,
    });
    expect(started).toMatchObject({ outcome: 'ok', background: 'started' });
    expect(started.output).toMatch(/^Started: search is running in the background/);
    expect(progress).toEqual([
      { callId: 'call_1', name: 'search', text: 'looking for flights', speak: false },
    ]);
    const ended = nextDone();
    gates[0]!('{"found":1}');
    await ended;
    expect(done[0]).toMatchObject({
      result: { callId: 'call_1', outcome: 'ok', output: '{"found":1}', background: 'done' },
      arguments: '{"q":"flights"}',
    });
  });

  it('holds progress until the "started" result is announced when asked to, then sends it at once', async () => {
    const { tool, gates } = gatedTool('search');
    const progress: BackgroundProgress[] = [];
    const calls = new BackgroundCalls({
      session: () => session,
      log: () => log,
      progressAfterStarted: true,
      onProgress: (p) => progress.push(p),
      onDone: () => {},
    });
    const signal = new AbortController().signal;
    await executeToolCall(call('search', { q: 'flights' }), createToolset([tool]), {
      signal,
      session,
      log,
      background: calls,
    });
    expect(progress).toEqual([]);
    calls.announced('call_1');
    expect(progress.map((p) => p.text)).toEqual(['looking for flights']);
    gates[0]!('done');
    await calls.settled();
  });

  it('ends a call with bad arguments at once, without starting it', async () => {
    const { tool } = gatedTool('search');
    const { calls } = setup();
    const result = await executeToolCall(call('search', { q: 3 }), createToolset([tool]), {
      signal: new AbortController().signal,
      session,
      log,
      background: calls,
    });
    expect(result.outcome).toBe('invalid_args');
    expect(result.background).toBeUndefined();
    expect(calls.running).toBe(0);
  });

  it('stops only cancellable calls on an interruption, and every call on close', async () => {
    const plain = gatedTool('plain');
    const careful = gatedTool('careful', true);
    const toolset = createToolset([plain.tool, careful.tool]);
    const { calls, done, nextDone } = setup();
    const opts = { signal: new AbortController().signal, session, log, background: calls };
    await executeToolCall(call('plain', { q: 'a' }, 'c1'), toolset, opts);
    await executeToolCall(call('careful', { q: 'b' }, 'c2'), toolset, opts);
    let ended = nextDone();
    expect(calls.interrupt()).toBe(1);
    await ended;
    expect(done.map((d) => [d.result.name, d.result.outcome])).toEqual([['careful', 'cancelled']]);
    ended = nextDone();
    calls.close();
    await ended;
    expect(done.map((d) => [d.result.name, d.result.outcome])).toEqual([
      ['careful', 'cancelled'],
      ['plain', 'cancelled'],
    ]);
    // A closed set starts nothing more: the call ends as an error the model is told about.
    const late = await executeToolCall(call('plain', { q: 'c' }, 'c3'), toolset, opts);
    expect(late).toMatchObject({ outcome: 'error' });
    expect(late.output).toMatch(/session is closing/);
  });
});

describe('background tools in a character file', () => {
  const base = { name: 'T', instructions: { prompt: 'p' } };
  const json = (extra: object) => ({
    type: 'function',
    function: { name: 'slow', parameters: { type: 'object', properties: {} } },
    ...extra,
  });

  it('takes background, speakProgress and a long timeout on an OpenAI-JSON tool', () => {
    const checked = validateCharacter({
      ...base,
      tools: [json({ background: true, speakProgress: true, timeoutMs: 120_000 })],
      handleToolCall: () => 'ok',
    });
    expect(checked.problems).toEqual([]);
  });

  it('refuses a timeout over 60 s on a tool that is not a background tool, saying what to do', () => {
    const checked = validateCharacter({
      ...base,
      tools: [json({ timeoutMs: 120_000 })],
      handleToolCall: () => 'ok',
    });
    expect(checked.problems).toEqual([
      expect.objectContaining({
        path: ['tools', 0, 'timeoutMs'],
        detail: expect.stringMatching(/at most 60000 ms, got 120000; .*background: true/),
      }),
    ]);
  });
});

describe('background calls across sessions', () => {
  it('list what runs, park their outcomes, and report to the set that adopts them', async () => {
    const { tool, gates } = gatedTool('search');
    const toolset = createToolset([tool]);
    const first = setup();
    const opts = { signal: new AbortController().signal, session, log, background: first.calls };
    await executeToolCall(call('search', { q: 'a' }, 'c1'), toolset, opts);
    await executeToolCall(call('search', { q: 'b' }, 'c2'), toolset, opts);
    expect(first.calls.pending()).toEqual([
      expect.objectContaining({
        callId: 'c1',
        name: 'search',
        arguments: '{"q":"a"}',
        character: 'test',
      }),
      expect.objectContaining({
        callId: 'c2',
        name: 'search',
        arguments: '{"q":"b"}',
        character: 'test',
      }),
    ]);
    const parked: BackgroundDone[] = [];
    let parkedOne = () => {};
    const oneParked = new Promise<void>((resolve) => (parkedOne = resolve));
    first.calls.park((d) => {
      parked.push(d);
      parkedOne();
    });
    // Parked: one ends and waits for whoever resumes.
    gates[0]!('one');
    await oneParked;
    expect(parked.map((d) => d.result.output)).toEqual(['one']);
    const second = setup();
    expect(second.calls.adopt(first.calls).map((p) => p.callId)).toEqual(['c2']);
    expect(first.calls.running).toBe(0);
    const ended = second.nextDone();
    gates[1]!('two');
    await ended;
    expect(second.done.map((d) => d.result.output)).toEqual(['two']);
    expect(first.done).toEqual([]);
  });

  it('drop: every call stops and its one outcome says it joins no history', async () => {
    const { tool } = gatedTool('search');
    const { calls, done, nextDone } = setup();
    await executeToolCall(call('search', { q: 'a' }), createToolset([tool]), {
      signal: new AbortController().signal,
      session,
      log,
      background: calls,
    });
    const ended = nextDone();
    expect(calls.drop()).toBe(1);
    await ended;
    expect(done[0]).toMatchObject({ dropped: true, result: { outcome: 'cancelled' } });
    // The set still takes new calls (the session goes on with a new conversation).
    expect(calls.running).toBe(0);
  });
});
