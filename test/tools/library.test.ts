import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, ToolBindingError } from '../../src/errors.js';
import {
  createToolset,
  defineTool,
  defineToolLibrary,
  executeToolCall,
  type OpenAiToolJson,
} from '../../src/tools/index.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';

const opts = () => ({
  signal: new AbortController().signal,
  session: { id: 's', character: 'hello', state: {} },
  log: createMemoryLogger(),
});

// A description only: the implementation is bound late, per variant.
const sayHello = defineTool({
  name: 'sayHello',
  description: 'Greet someone by name',
  parameters: z.object({ personName: z.string().default('world') }),
});

const variantA = defineToolLibrary('a', {
  sayHello: ({ personName }) => `Hello, ${String(personName)}! Nice to meet you.`,
});
const variantB = defineToolLibrary('b', {
  sayHello: {
    handler: ({ personName }) => `Hey ${String(personName)}, great to see you!`,
    parameters: z.object({ personName: z.string().default('world') }),
    timeoutMs: 50,
  },
});

describe('tool libraries (late binding and A/B variants)', () => {
  it('binds one character description to two variants that run side by side', async () => {
    const a = createToolset([sayHello], { library: variantA });
    const b = createToolset([sayHello], { library: variantB });
    const call = { id: 'c1', name: 'sayHello', arguments: '{"personName":"Ada"}' };
    const [ra, rb] = await Promise.all([
      executeToolCall(call, a, opts()),
      executeToolCall(call, b, opts()),
    ]);
    expect(ra).toMatchObject({
      outcome: 'ok',
      output: 'Hello, Ada! Nice to meet you.',
      variant: 'a',
    });
    expect(rb).toMatchObject({ outcome: 'ok', output: 'Hey Ada, great to see you!', variant: 'b' });
    expect(b.tools.get('sayHello')?.timeoutMs).toBe(50);
  });

  it('keeps the timeout, cancellable and filler written beside an OpenAI-JSON tool', () => {
    const slow: OpenAiToolJson = {
      type: 'function',
      function: { name: 'slow_lookup' },
      timeoutMs: 1000,
      cancellable: false,
      filler: { text: 'One moment.', afterMs: 300 },
    };
    const inline = createToolset([slow], { handleToolCall: () => 'x' });
    const bound = createToolset([slow], {
      library: defineToolLibrary('a', { slow_lookup: () => 'y' }),
    });
    for (const set of [inline, bound]) {
      expect(set.tools.get('slow_lookup')).toMatchObject({
        timeoutMs: 1000,
        cancellable: false,
        filler: { text: 'One moment.', afterMs: 300 },
      });
    }
  });

  it('keeps the character description the model sees, whatever the variant', () => {
    const a = createToolset([sayHello], { library: variantA });
    expect(a.descriptions).toEqual([
      {
        name: 'sayHello',
        description: 'Greet someone by name',
        parameters: {
          type: 'object',
          properties: { personName: { type: 'string', default: 'world' } },
        },
      },
    ]);
  });

  it('binds OpenAI-JSON descriptions from a library too', async () => {
    const json: OpenAiToolJson = {
      type: 'function',
      function: {
        name: 'get_time',
        description: 'Time',
        parameters: { type: 'object', properties: {} },
      },
    };
    const lib = defineToolLibrary('x', { get_time: () => '12:00' });
    const r = await executeToolCall(
      { id: 'c', name: 'get_time', arguments: '' },
      createToolset([json], { library: lib }),
      opts(),
    );
    expect(r).toMatchObject({ outcome: 'ok', output: '12:00', variant: 'x' });
  });

  it('fails binding with a clear error when the library lacks a described tool', () => {
    const empty = defineToolLibrary('c', { other: () => 1 });
    expect(() => createToolset([sayHello], { library: empty })).toThrow(ToolBindingError);
    expect(() => createToolset([sayHello], { library: empty })).toThrow(
      /tool sayHello: the tool library "c" has no implementation of it \(it has: other\)/,
    );
  });

  it('fails binding when the library expects different arguments than described', () => {
    const wrong = defineToolLibrary('d', {
      sayHello: { handler: () => 'x', parameters: z.object({ name: z.string() }) },
    });
    expect(() => createToolset([sayHello], { library: wrong })).toThrow(
      /expects different arguments/,
    );
  });

  it('fails when a description has no handler and no library', () => {
    expect(() => createToolset([sayHello])).toThrow(ConfigError);
    expect(() => createToolset([sayHello])).toThrow(/handler must be a function/);
  });

  it('rejects duplicate tool names and names the API would refuse', () => {
    const t = defineTool({
      name: 'x',
      description: 'x',
      parameters: z.object({}),
      handler: () => 1,
    });
    expect(() => createToolset([t, t])).toThrow(/duplicate tool name "x"/);
    const bad = defineTool({
      name: 'has space',
      description: 'x',
      parameters: z.object({}),
      handler: () => 1,
    });
    expect(() => createToolset([bad])).toThrow(
      /tools\[0\]\.name: "has space" is not a valid tool name/,
    );
  });

  it('requires handleToolCall for OpenAI-JSON tools', () => {
    const json: OpenAiToolJson = {
      type: 'function',
      function: { name: 'a', parameters: { type: 'object' } },
    };
    expect(() => createToolset([json])).toThrow(/need a handleToolCall/);
  });

  it('reports a JSON Schema that cannot be compiled', () => {
    const json: OpenAiToolJson = {
      type: 'function',
      function: {
        name: 'a',
        parameters: { type: 'object', properties: { x: { type: 'no-such-type' } } },
      },
    };
    expect(() => createToolset([json], { handleToolCall: () => 1 })).toThrow(
      /tool a: its parameters are not a JSON Schema/,
    );
  });
});
