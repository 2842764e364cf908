import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  capOutput,
  createToolset,
  defineTool,
  executeToolCall,
  executeToolCalls,
  parseToolArguments,
  type OpenAiToolJson,
  type ToolCall,
} from '../../src/tools/index.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { toolThatWaits } from '../helpers/tools.js';

const session = { id: 's1', character: 'test', state: {} };

function options(signal = new AbortController().signal) {
  return { signal, session, log: createMemoryLogger() };
}

/** Holds the event loop for `ms`, as CPU-bound code does. */
function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

function call(name: string, args: unknown, id = 'call_1'): ToolCall {
  return { id, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

const weatherJson: OpenAiToolJson = {
  type: 'function',
  function: {
    name: 'get_current_weather',
    description: 'Get the current weather',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string' },
        format: { type: 'string', enum: ['celsius', 'fahrenheit'], default: 'celsius' },
        days: { type: 'integer', minimum: 1 },
        stops: {
          type: 'array',
          items: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
      required: ['location'],
    },
  },
};

const logEvent = defineTool({
  name: 'log_story_event',
  description: 'Log an important story event',
  parameters: z.object({
    event: z.string().describe('What happened'),
    importance: z.enum(['low', 'medium', 'high']).default('medium'),
  }),
  handler: ({ event, importance }) => `Logged: ${event} (${importance})`,
});

describe('tool executor', () => {
  it('runs a zod tool with defaults applied and returns its string as is', async () => {
    const tools = createToolset([logEvent]);
    const r = await executeToolCall(call('log_story_event', { event: 'dragon' }), tools, options());
    expect(r).toMatchObject({
      outcome: 'ok',
      output: 'Logged: dragon (medium)',
      variant: 'default',
    });
    expect(r.args).toEqual({ event: 'dragon', importance: 'medium' });
  });

  it('validates OpenAI-JSON tools against their JSON Schema and applies defaults', async () => {
    const seen: unknown[] = [];
    const tools = createToolset([weatherJson], {
      handleToolCall: (name, args) => {
        seen.push([name, args]);
        return { temperature: 22 };
      },
    });
    const r = await executeToolCall(
      call('get_current_weather', { location: 'Paris' }),
      tools,
      options(),
    );
    expect(r.outcome).toBe('ok');
    expect(r.output).toBe('{"temperature":22}');
    expect(seen).toEqual([['get_current_weather', { location: 'Paris', format: 'celsius' }]]);
  });

  it('says which argument is wrong and what is allowed for an enum', async () => {
    const tools = createToolset([weatherJson], { handleToolCall: () => 'x' });
    const r = await executeToolCall(
      call('get_current_weather', { location: 'Paris', format: 'kelvin' }),
      tools,
      options(),
    );
    expect(r.outcome).toBe('invalid_args');
    expect(r.output).toContain('format');
    expect(r.output).toContain('"celsius"');
    expect(r.output).toContain('"fahrenheit"');
    expect(r.output).toContain('got "kelvin"');
  });

  it('reports a missing required argument as required, with its type', async () => {
    const tools = createToolset([weatherJson], { handleToolCall: () => 'x' });
    const r = await executeToolCall(
      call('get_current_weather', { format: 'celsius' }),
      tools,
      options(),
    );
    expect(r.outcome).toBe('invalid_args');
    expect(r.output).toContain('location: required (expected string)');
  });

  it('checks types, integers and nested objects inside arrays', async () => {
    const tools = createToolset([weatherJson], { handleToolCall: () => 'x' });
    const r = await executeToolCall(
      call('get_current_weather', { location: 7, days: 1.5, stops: [{ city: 'Lyon' }, {}] }),
      tools,
      options(),
    );
    expect(r.outcome).toBe('invalid_args');
    expect(r.output).toContain('location: expected string');
    expect(r.output).toContain('days: expected an integer, got 1.5');
    expect(r.output).toContain('stops.1.city: required');
  });

  it('reports a missing enum argument as required, with its choices', async () => {
    const strictFormat = structuredClone(weatherJson);
    (strictFormat.function.parameters as { required: string[] }).required.push('format');
    delete (strictFormat.function.parameters as { properties: { format: { default?: string } } })
      .properties.format.default;
    const tools = createToolset([strictFormat], { handleToolCall: () => 'x' });
    const r = await executeToolCall(
      call('get_current_weather', { location: 'Oslo' }),
      tools,
      options(),
    );
    expect(r.outcome).toBe('invalid_args');
    expect(r.output).toContain('format: required (expected one of "celsius"|"fahrenheit")');
  });

  it('treats empty, whitespace and null arguments as no arguments', async () => {
    const ping = defineTool({
      name: 'ping',
      description: 'p',
      parameters: z.object({}),
      handler: () => 'pong',
    });
    const tools = createToolset([ping]);
    for (const raw of ['', '  ', 'null', '{}']) {
      const r = await executeToolCall(call('ping', raw), tools, options());
      expect(r.outcome, raw).toBe('ok');
    }
  });

  it('turns arguments that are not JSON into invalid_args with the parse error', async () => {
    const tools = createToolset([logEvent]);
    const r = await executeToolCall(call('log_story_event', '{"event": "dra'), tools, options());
    expect(r.outcome).toBe('invalid_args');
    expect(r.output).toMatch(/not valid JSON/);
  });

  it('turns arguments that decode to a non-object into invalid_args', async () => {
    const tools = createToolset([logEvent]);
    for (const raw of ['[1,2]', '"text"', '42']) {
      const r = await executeToolCall(call('log_story_event', raw), tools, options());
      expect(r.outcome).toBe('invalid_args');
      expect(r.output).toMatch(/a JSON object/);
    }
  });

  it('answers an unknown tool with the list of tools that exist', async () => {
    const tools = createToolset([logEvent]);
    const r = await executeToolCall(call('fly_dragon', {}), tools, options());
    expect(r.outcome).toBe('unknown_tool');
    expect(r.output).toContain('"fly_dragon"');
    expect(r.output).toContain('Available tools: log_story_event');
  });

  it('gives the model the message of a throwing handler and keeps the stack for the log', async () => {
    const boom = defineTool({
      name: 'boom',
      description: 'b',
      parameters: z.object({}),
      handler: () => {
        throw new Error('database is down\n    at secret (file.ts:1)');
      },
    });
    const log = createMemoryLogger();
    const r = await executeToolCall(call('boom', {}), createToolset([boom]), { ...options(), log });
    expect(r.outcome).toBe('error');
    expect(r.output).toBe('Error: boom failed: database is down');
    // Logged once the turn has moved on, never before the result is back.
    expect(log.entries).toHaveLength(0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(log.entries[0]).toMatchObject({
      level: 'warn',
      fields: { tool: 'boom', outcome: 'error' },
    });
    expect((log.entries[0]!.fields.err as Error).stack).toBeDefined();
  });

  it('tells the model which file failed but never where the server keeps it', async () => {
    const readsFile = defineTool({
      name: 'read_notes',
      description: 'r',
      parameters: z.object({}),
      handler: () => {
        throw new Error(
          "ENOENT: no such file or directory, open '/srv/troupe/data/notes.json' (https://bob:hunter2@db.local/x)",
        );
      },
    });
    const log = createMemoryLogger();
    const r = await executeToolCall(call('read_notes', {}), createToolset([readsFile]), {
      ...options(),
      log,
    });
    expect(r.output).toBe(
      "Error: read_notes failed: ENOENT: no such file or directory, open '…/notes.json' (https://[redacted]@db.local/x)",
    );
    await new Promise((resolve) => setImmediate(resolve));
    // The log keeps the whole error for whoever runs the server.
    expect((log.entries[0]!.fields.err as Error).message).toContain('/srv/troupe/data/notes.json');
  });

  it('handles a rejected promise like a throw', async () => {
    const tool = defineTool({
      name: 'reject',
      description: 'r',
      parameters: z.object({}),
      handler: async () => Promise.reject(new Error('nope')),
    });
    const r = await executeToolCall(call('reject', {}), createToolset([tool]), options());
    expect(r).toMatchObject({ outcome: 'error', output: 'Error: reject failed: nope' });
  });

  it('times out a handler that ignores its signal, and aborts the signal it was given', async () => {
    let handlerSignal: AbortSignal | undefined;
    const hang = defineTool({
      name: 'hang',
      description: 'h',
      parameters: z.object({}),
      timeoutMs: 20,
      handler: (_a, ctx) => {
        handlerSignal = ctx.signal;
        return new Promise(() => {});
      },
    });
    const r = await executeToolCall(call('hang', {}), createToolset([hang]), options());
    expect(r.outcome).toBe('timeout');
    expect(r.output).toBe('Error: hang did not finish within 20 ms.');
    expect(handlerSignal?.aborted).toBe(true);
  });

  it('times out a handler that holds the event loop past its timeout, and says so in the log', async () => {
    let handlerSignal: AbortSignal | undefined;
    const busy = defineTool({
      name: 'busy',
      description: 'b',
      parameters: z.object({}),
      timeoutMs: 20,
      handler: (_a, ctx) => {
        handlerSignal = ctx.signal;
        spin(60);
        return 'done at last';
      },
    });
    const o = options();
    const r = await executeToolCall(call('busy', {}), createToolset([busy]), o);
    expect(r).toMatchObject({
      outcome: 'timeout',
      output: 'Error: busy did not finish within 20 ms.',
    });
    expect(handlerSignal?.aborted).toBe(true);
    const warned = o.log.entries.find((e) => e.msg?.startsWith('tool handler held the event loop'));
    expect(warned?.fields).toMatchObject({ tool: 'busy', timeoutMs: 20 });
    expect(warned!.fields.blockedMs as number).toBeGreaterThanOrEqual(60);
  });

  it('times out a handler whose result comes past its timeout while the loop was held', async () => {
    const busy = defineTool({
      name: 'late',
      description: 'l',
      parameters: z.object({}),
      timeoutMs: 20,
      handler: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        spin(60);
        return 'done at last';
      },
    });
    const o = options();
    const r = await executeToolCall(call('late', {}), createToolset([busy]), o);
    expect(r).toMatchObject({
      outcome: 'timeout',
      output: 'Error: late did not finish within 20 ms.',
    });
    const warned = o.log.entries.find((e) =>
      e.msg?.startsWith('tool handler finished past its timeout'),
    );
    expect(warned?.fields).toMatchObject({ tool: 'late', timeoutMs: 20 });
  });

  it('uses the default timeout of 100 ms when a tool sets none', async () => {
    const slow = defineTool({
      name: 'slow',
      description: 's',
      parameters: z.object({}),
      handler: (_a, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)),
    });
    const r = await executeToolCall(call('slow', {}), createToolset([slow]), options());
    expect(r.outcome).toBe('timeout');
    expect(r.output).toContain('100 ms');
  });

  it('cancels a running cancellable tool when the turn is aborted', async () => {
    const turn = new AbortController();
    const { tool, started } = toolThatWaits('wait');
    const pending = executeToolCall(call('wait', {}), createToolset([tool]), options(turn.signal));
    await started;
    turn.abort();
    const r = await pending;
    expect(r.outcome).toBe('cancelled');
  });

  it('lets a tool that is not cancellable finish and records its result', async () => {
    const turn = new AbortController();
    let release!: (v: string) => void;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const commit = defineTool({
      name: 'commit',
      description: 'c',
      parameters: z.object({}),
      cancellable: false,
      timeoutMs: 10_000,
      handler: () =>
        new Promise<string>((resolve) => {
          release = resolve;
          started();
        }),
    });
    const pending = executeToolCall(
      call('commit', {}),
      createToolset([commit]),
      options(turn.signal),
    );
    await running;
    turn.abort();
    release('saved');
    expect(await pending).toMatchObject({ outcome: 'ok', output: 'saved' });
  });

  it('does not start cancellable tools when the turn is already aborted', async () => {
    const turn = new AbortController();
    turn.abort();
    let ran = false;
    const t = defineTool({
      name: 't',
      description: 't',
      parameters: z.object({}),
      handler: () => (ran = true),
    });
    const r = await executeToolCall(call('t', {}), createToolset([t]), options(turn.signal));
    expect(r.outcome).toBe('cancelled');
    expect(ran).toBe(false);
  });

  it('runs parallel calls concurrently and keeps results in call order', async () => {
    const order: string[] = [];
    const gates = new Map<string, () => void>();
    const started = new Map<string, Promise<void>>();
    const mark = new Map<string, () => void>();
    for (const id of ['a', 'b', 'c']) started.set(id, new Promise((r) => mark.set(id, r)));
    const step = defineTool({
      name: 'step',
      description: 's',
      parameters: z.object({ id: z.string() }),
      timeoutMs: 10_000,
      handler: ({ id }) =>
        new Promise<string>((resolve) => {
          mark.get(id)!();
          gates.set(id, () => {
            order.push(id);
            resolve(`done ${id}`);
          });
        }),
    });
    const tools = createToolset([step]);
    const calls = ['a', 'b', 'c'].map((id) => call('step', { id }, `call_${id}`));
    const pending = executeToolCalls(calls, tools, options());
    // All three are running at once before any finishes.
    await Promise.all(started.values());
    gates.get('c')!();
    gates.get('a')!();
    gates.get('b')!();
    const results = await Promise.all(pending);
    expect(order).toEqual(['c', 'a', 'b']);
    expect(results.map((r) => r.callId)).toEqual(['call_a', 'call_b', 'call_c']);
    expect(results.map((r) => r.output)).toEqual(['done a', 'done b', 'done c']);
  });

  it('JSON-encodes non-string output and turns circular output into an error outcome', async () => {
    const obj = defineTool({
      name: 'obj',
      description: 'o',
      parameters: z.object({}),
      handler: () => ({ a: [1, 'é'] }),
    });
    const circ = defineTool({
      name: 'circ',
      description: 'c',
      parameters: z.object({}),
      handler: () => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      },
    });
    const nothing = defineTool({
      name: 'nothing',
      description: 'n',
      parameters: z.object({}),
      handler: () => undefined,
    });
    const tools = createToolset([obj, circ, nothing]);
    expect((await executeToolCall(call('obj', {}), tools, options())).output).toBe('{"a":[1,"é"]}');
    const r = await executeToolCall(call('circ', {}), tools, options());
    expect(r.outcome).toBe('error');
    expect(r.output).toMatch(/cannot be sent as JSON/);
    expect((await executeToolCall(call('nothing', {}), tools, options())).output).toBe('null');
  });

  it('caps huge output at 16 KB by default and says it was cut', async () => {
    const big = defineTool({
      name: 'big',
      description: 'b',
      parameters: z.object({}),
      handler: () => 'é'.repeat(20_000),
    });
    const r = await executeToolCall(call('big', {}), createToolset([big]), options());
    expect(r.outcome).toBe('ok');
    expect(r.output).toMatch(/\[output truncated: 16384 of 40000 bytes shown\]$/);
    expect(r.output.startsWith('é'.repeat(8192))).toBe(true);
  });

  it('cuts on a character boundary, never inside a multi-byte character', () => {
    const out = capOutput('aé'.repeat(10), 5);
    expect(out.startsWith('aéa\n')).toBe(true);
    expect(out).not.toContain('\uFFFD');
  });

  it('parses arguments strictly to objects', () => {
    expect(parseToolArguments('{"a":1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseToolArguments('{"a":').ok).toBe(false);
  });

  it('hands the handler its call id, session, variant and a child logger', async () => {
    let seen: unknown;
    const t = defineTool({
      name: 'ctx',
      description: 'c',
      parameters: z.object({}),
      handler: (_a, ctx) => {
        ctx.log.info({ note: 1 }, 'inside');
        seen = { callId: ctx.callId, session: ctx.session.id, variant: ctx.variant };
        return 'ok';
      },
    });
    const log = createMemoryLogger();
    await executeToolCall(call('ctx', {}, 'call_xyz'), createToolset([t]), { ...options(), log });
    expect(seen).toEqual({ callId: 'call_xyz', session: 's1', variant: 'default' });
    expect(log.entries[0]).toMatchObject({
      msg: 'inside',
      fields: { tool: 'ctx', callId: 'call_xyz', note: 1 },
    });
  });
});

describe('tool executor with many parallel calls', () => {
  it('runs 30 parallel calls without piling listeners on the turn signal', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const echo = defineTool({
        name: 'echo',
        description: 'e',
        parameters: z.object({ n: z.number() }),
        handler: async ({ n }) => n,
      });
      const turn = new AbortController();
      const calls = Array.from({ length: 30 }, (_, n) => call('echo', { n }, `call_${n}`));
      const results = await Promise.all(
        executeToolCalls(calls, createToolset([echo]), options(turn.signal)),
      );
      expect(results.map((r) => r.output)).toEqual(calls.map((_, n) => String(n)));
      // Warnings are emitted on the next tick.
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('cancels every call of a batch when the turn is aborted', async () => {
    const { tool: wait } = toolThatWaits('wait');
    const turn = new AbortController();
    const pending = executeToolCalls(
      [call('wait', {}, 'a'), call('wait', {}, 'b'), call('wait', {}, 'c')],
      createToolset([wait]),
      options(turn.signal),
    );
    turn.abort();
    expect((await Promise.all(pending)).map((r) => r.outcome)).toEqual([
      'cancelled',
      'cancelled',
      'cancelled',
    ]);
  });
});

describe('tool executor limits', () => {
  it('runs at most maxParallelCalls of one reply and ends the rest as error without running them', async () => {
    let ran = 0;
    const t = defineTool({
      name: 't',
      description: 't',
      parameters: z.object({}),
      handler: () => ++ran,
    });
    const calls = Array.from({ length: 5 }, (_, n) => call('t', {}, `call_${n}`));
    const results = await Promise.all(
      executeToolCalls(calls, createToolset([t]), { ...options(), maxParallelCalls: 3 }),
    );
    expect(ran).toBe(3);
    expect(results.map((r) => r.outcome)).toEqual(['ok', 'ok', 'ok', 'error', 'error']);
    expect(results[4]!.output).toMatch(/at most 3 tool calls run per reply/);
    expect(results.map((r) => r.callId)).toEqual(calls.map((c) => c.id));
  });
});
