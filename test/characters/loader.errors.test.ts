import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { loadCharacterFile, shownPath } from '../../src/characters/load.js';
import type { CharacterError, CharacterErrorKind } from '../../src/errors.js';
import { character, characterDir, TROUPE, type CharacterDir } from '../helpers/characters.js';

let chars: CharacterDir;
beforeAll(async () => {
  chars = await characterDir();
});
afterAll(async () => chars.cleanup());

/** Writes a file, loads it, and returns its errors (failing the test if it loaded). */
async function errorsOf(name: string, source: string): Promise<CharacterError[]> {
  const file = await chars.write(name, source);
  const result = await loadCharacterFile(file);
  if (result.ok) throw new Error(`${name} loaded, but errors were expected`);
  return result.errors;
}

async function oneError(name: string, source: string, kind: CharacterErrorKind) {
  const errors = await errorsOf(name, source);
  expect(errors.map((e) => e.kind)).toEqual([kind]);
  const [error] = errors;
  expect(error!.file).toBe(shownPath(join(chars.dir, name)));
  return error!;
}

const weatherTool = (parameters: string) =>
  `tools: [{ type: 'function', function: { name: 'get_current_weather', parameters: ${parameters} } }],
  handleToolCall: () => 'ok',`;

describe('a malformed character', () => {
  it('names the file, the field and the fix when a field is missing', async () => {
    const e = await oneError(
      'no-name.ts',
      `export default { instructions: { prompt: 'x' } };`,
      'shape',
    );
    expect(e.path).toBe('name');
    expect(e.message).toBe(
      `${e.file}: name: missing; expected a non-empty string, the name users see, such as "Narrator"`,
    );
  });

  it('says what was given when a field has the wrong type', async () => {
    const e = await oneError(
      'hot.ts',
      character({ extra: `llm: { temperature: 'hot' },` }),
      'shape',
    );
    expect(e.message).toBe(`${e.file}: llm.temperature: expected a number from 0 to 2, got "hot"`);
  });

  it('suggests the field that was meant for an unknown one', async () => {
    const e = await oneError('typo.ts', character({ extra: `tool: [],` }), 'shape');
    expect(e.message).toBe(`${e.file}: tool: unknown field; did you mean "tools"?`);
  });

  it('reports every problem of a file at once', async () => {
    const errors = await errorsOf(
      'many.ts',
      `export default { name: 3, instructions: 'x', maxToolRounds: 0, toolMode: 'auto' };`,
    );
    expect(errors.map((e) => e.path)).toEqual(['name', 'maxToolRounds', 'toolMode']);
    expect(errors[2]!.detail).toBe('expected "native" or "prompt", got "auto"');
  });

  it('rejects a file name that cannot be an id', async () => {
    const e = await oneError('my character.ts', character(), 'file_name');
    expect(e.detail).toMatch(/"my character" cannot be a character id/);
  });

  it('rejects a module that exports no character', async () => {
    const e = await oneError('nothing.ts', `export const x = 1;`, 'shape');
    expect(e.detail).toMatch(/exports no character; write export default defineCharacter/);
  });

  it('rejects a default export that is not an object', async () => {
    const e = await oneError('string.ts', `export default 'Narrator';`, 'shape');
    expect(e.detail).toMatch(/must be a character object, got "Narrator"/);
  });

  it('asks for a prompt generator when the instructions have no prompt', async () => {
    const e = await oneError(
      'no-prompt.ts',
      `export default { name: 'A', instructions: { text: 'x' } };`,
      'shape',
    );
    expect(e.path).toBe('makeSystemPrompt');
  });
});

describe('a malformed tool', () => {
  it('names the JSON Schema path of a bad enum', async () => {
    const e = await oneError(
      'narrator.ts',
      character({
        extra: weatherTool(
          `{ type: 'object', properties: { importance: { type: 'string', enum: 'low' } } }`,
        ),
      }),
      'json_schema',
    );
    expect(e.message).toBe(
      `${e.file}: tools[0].function.parameters.properties.importance.enum: expected an array of strings, got "low"`,
    );
  });

  it('rejects an unknown JSON Schema type and a required property that does not exist', async () => {
    const errors = await errorsOf(
      'types.ts',
      character({
        extra: weatherTool(
          `{ type: 'object', properties: { city: { type: 'strin' } }, required: ['town'] }`,
        ),
      }),
    );
    expect(errors.map((e) => [e.kind, e.path])).toEqual([
      ['json_schema', 'tools[0].function.parameters.properties.city.type'],
      ['json_schema', 'tools[0].function.parameters.required[0]'],
    ]);
    expect(errors[1]!.detail).toMatch(/lists "town", which is not in properties/);
  });

  it('requires parameters to be an object schema', async () => {
    const e = await oneError(
      'array-params.ts',
      character({ extra: weatherTool(`{ type: 'array' }`) }),
      'json_schema',
    );
    expect(e.path).toBe('tools[0].function.parameters.type');
  });

  it('rejects tool names the API would refuse', async () => {
    const e = await oneError(
      'bad-tool-name.ts',
      character({
        extra: `tools: [defineTool({ name: 'get weather', description: 'd', parameters: z.object({}), handler: () => 1 })],`,
      }),
      'tool_name',
    );
    expect(e.message).toBe(
      `${e.file}: tools[0].name: is not a valid tool name, got "get weather"; use 1-64 letters, digits, "_" or "-" such as "get_weather"`,
    );
  });

  it('rejects two tools with one name', async () => {
    const e = await oneError(
      'dup-tool.ts',
      character({
        extra: `tools: [
          defineTool({ name: 'roll', description: 'd', parameters: z.object({}), handler: () => 1 }),
          { type: 'function', function: { name: 'roll' } },
        ],
        handleToolCall: () => 2,`,
      }),
      'duplicate_tool',
    );
    expect(e.path).toBe('tools[1].function.name');
    expect(e.detail).toMatch(/duplicate tool name "roll" \(tools\[0\] has it too\)/);
  });

  it('asks for handleToolCall when OpenAI-JSON tools have nothing to run them', async () => {
    const e = await oneError(
      'no-handler.ts',
      character({ extra: `tools: [{ type: 'function', function: { name: 'roll' } }],` }),
      'missing_handler',
    );
    expect(e.message).toBe(
      `${e.file}: tools[0]: the OpenAI-JSON tool "roll" has nothing to run it; add handleToolCall: async (name, args, ctx) => { … } to the character`,
    );
  });

  it('asks for a handler when a zod tool has none and no library binds it', async () => {
    const e = await oneError(
      'no-zod-handler.ts',
      character({
        extra: `tools: [defineTool({ name: 'roll', description: 'd', parameters: z.object({}) })],`,
      }),
      'missing_handler',
    );
    expect(e.path).toBe('tools[0].handler');
  });

  it('rejects handlers that are not functions', async () => {
    const errors = await errorsOf(
      'handler-type.ts',
      character({
        extra: `tools: [
          defineTool({ name: 'roll', description: 'd', parameters: z.object({}), handler: 'roll()' as never }),
          { type: 'function', function: { name: 'flip' } },
        ],
        handleToolCall: { flip: () => 1 } as never,`,
      }),
    );
    expect(errors.map((e) => [e.kind, e.path])).toEqual([
      ['handler_type', 'handleToolCall'],
      ['handler_type', 'tools[0].handler'],
    ]);
    expect(errors[1]!.detail).toMatch(
      /^expected a function \(the tool handler\).*, got "roll\(\)"$/,
    );
  });

  it('rejects zod tools whose parameters are not a zod object', async () => {
    const e = await oneError(
      'zod-string.ts',
      character({
        extra: `tools: [defineTool({ name: 'roll', description: 'd', parameters: z.string() as never, handler: () => 1 })],`,
      }),
      'shape',
    );
    expect(e.message).toMatch(
      /tools\[0\]\.parameters: expected a zod object schema.*got a zod schema$/,
    );
  });

  it('refuses zod fields JSON cannot carry, naming the tool, the field and what to use', async () => {
    const errors = await errorsOf(
      'unsendable.ts',
      character({
        extra: `tools: [defineTool({ name: 'book', description: 'd', handler: () => 1,
          parameters: z.object({ when: z.date(), trip: z.object({ ids: z.array(z.bigint()), tags: z.set(z.string()) }), by: z.map(z.string(), z.string()).optional() }) })],`,
      }),
    );
    expect(errors.map((e) => [e.kind, e.path])).toEqual([
      ['json_schema', 'tools[0].parameters.when'],
      ['json_schema', 'tools[0].parameters.trip.ids'],
      ['json_schema', 'tools[0].parameters.trip.tags'],
      ['json_schema', 'tools[0].parameters.by'],
    ]);
    expect(errors[0]!.detail).toMatch(
      /^tool "book" takes z\.date\(\) here, which JSON cannot carry: the model would be shown \{\} and every call would fail; use z\.iso\.datetime\(\)/,
    );
    expect(errors[1]!.detail).toMatch(
      /^tool "book" takes z\.bigint\(\) in its items here.*z\.int\(\)/,
    );
    expect(errors[2]!.detail).toMatch(/z\.set\(\).*use z\.array/);
    expect(errors[3]!.detail).toMatch(/z\.map\(\).*use z\.record/);
  });

  it('accepts zod fields that arrive as JSON and are refined, transformed, defaulted or coerced', async () => {
    const file = await chars.write(
      'sendable.ts',
      character({
        extra: `tools: [defineTool({ name: 'book', description: 'd', handler: () => 1,
          parameters: z.object({
            when: z.iso.datetime().transform((s) => new Date(s)),
            day: z.coerce.date(),
            people: z.number().int().refine((n) => n > 0).default(2),
            note: z.preprocess((v) => String(v), z.string()).optional(),
          }) })],`,
      }),
    );
    const result = await loadCharacterFile(file);
    expect(result.ok).toBe(true);
    const params = result.ok ? result.character.toolset().descriptions[0]!.parameters : {};
    expect((params.properties as Record<string, unknown>).day).toEqual({
      type: 'string',
      format: 'date-time',
    });
  });

  it('rejects a tool library that lacks a tool', async () => {
    const e = await oneError(
      'binding.ts',
      `import { z } from 'zod';
import { defineTool, defineToolLibrary } from ${JSON.stringify(TROUPE)};
const roll = defineTool({ name: 'roll', description: 'd', parameters: z.object({}) });
export default { name: 'B', instructions: { prompt: 'x' }, tools: [roll],
  toolLibraries: [defineToolLibrary('a', { roll: () => 4 }), defineToolLibrary('b', { flip: () => 1 })] };`,
      'binding',
    );
    expect(e.path).toBe('toolLibraries[1]');
    expect(e.detail).toMatch(/tool library "b" has no implementation of it \(it has: flip\)/);
  });

  it('rejects a tool library whose arguments differ from the description', async () => {
    const e = await oneError(
      'mismatch.ts',
      `import { z } from 'zod';
import { defineTool, defineToolLibrary } from ${JSON.stringify(TROUPE)};
const roll = defineTool({ name: 'roll', description: 'd', parameters: z.object({ sides: z.number() }) });
export default { name: 'B', instructions: { prompt: 'x' }, tools: [roll],
  toolLibraries: [defineToolLibrary('a', { roll: { parameters: z.object({ faces: z.number() }), handler: () => 4 } })] };`,
      'binding',
    );
    expect(e.detail).toMatch(/expects different arguments than the character describes/);
  });
});

describe('a prompt generator', () => {
  it('that throws is an error naming the sample context', async () => {
    const e = await oneError(
      'throws.ts',
      character({
        extra: `makeSystemPrompt: (_i, ctx) => { throw new Error('no user name in ' + JSON.stringify(ctx.metadata)); },`,
      }),
      'system_prompt',
    );
    expect(e.message).toMatch(
      /throws\.ts: makeSystemPrompt: threw Error: no user name in \{\} \(called once at load with a sample context: \{"now":.*"metadata":\{\}\}\)$/,
    );
  });

  it('that throws something other than an Error shows what it threw', async () => {
    const e = await oneError(
      'object.ts',
      character({ extra: `makeSystemPrompt: () => { throw { code: 'NO_DB', retry: false }; },` }),
      'system_prompt',
    );
    expect(e.message).toContain('makeSystemPrompt: threw {"code":"NO_DB","retry":false}');
  });

  it('that returns something else than a string is an error', async () => {
    const e = await oneError(
      'number.ts',
      character({ extra: `makeSystemPrompt: () => 42 as never,` }),
      'system_prompt',
    );
    expect(e.detail).toMatch(/^returned 42; it must return the system prompt as a string/);
  });

  it('may be async', async () => {
    const file = await chars.write(
      'async.ts',
      character({ extra: `makeSystemPrompt: async (i) => 'async: ' + i.prompt,` }),
    );
    const result = await loadCharacterFile(file);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const prompt = await result.character.systemPrompt({
      now: new Date(),
      sessionId: 's',
      variant: 'default',
      metadata: {},
    });
    expect(prompt).toBe('async: You are a test character.');
  });
});

describe('a module that cannot be imported', () => {
  it('reports a TypeScript syntax error with file:line:column, columns counted from 1 as editors do', async () => {
    const e = await oneError(
      'syntax.ts',
      `export default {\n  name: 'x',\n  oops: = 3,\n};\n`,
      'import',
    );
    // The "=" is the ninth character of `  oops: = 3,`.
    expect(e.message).toBe(`${e.file}: syntax error at ${e.file}:3:9: Unexpected "="`);
  });

  it('reports a JavaScript syntax error with file:line:column and the line', async () => {
    const e = await oneError(
      'syntax.mjs',
      `export default {\n  name: 'x',\n  oops: = 3,\n};\n`,
      'import',
    );
    expect(e.message).toBe(
      `${e.file}: syntax error at ${e.file}:3:9: Unexpected "="\n    oops: = 3,`,
    );
  });

  it('reports an error thrown at import time with its line', async () => {
    const e = await oneError(
      'throws-at-import.ts',
      `const ready = false;\nif (!ready) throw new Error('no API key');\nexport default {};\n`,
      'import',
    );
    expect(e.message).toBe(`${e.file}: threw while importing (at ${e.file}:2): Error: no API key`);
  });

  it('reports a missing module and how to name imports', async () => {
    const e = await oneError(
      'missing-import.ts',
      `import { x } from './lib/nowhere.js';\nexport default { name: x };\n`,
      'import',
    );
    expect(e.detail).toMatch(
      /^cannot be imported: Cannot find module .*nowhere\.js.*; check the import path/,
    );
  });
});

describe('an Unmute-style character', () => {
  const unmute = (extra = '') => `export const CHARACTER_NAME = 'Dev (news)';
export const VOICE_SOURCE = { source_type: 'file', path_on_server: 'unmute-prod-website/developer-1.mp3' };
export const INSTRUCTIONS = { type: 'constant', text: 'You read the news.', language: 'en' };
export class PromptGenerator {
  constructor(private instructions: { text: string }) {}
  makeSystemPrompt(ctx: { sessionId: string }) { return this.instructions.text + ' (' + ctx.sessionId + ')'; }
}
${extra}`;

  it('is normalised into the same character', async () => {
    const file = await chars.write(
      'dev-news.ts',
      unmute(`export const TOOLS = [{ type: 'function', function: { name: 'headline', parameters: { type: 'object', properties: {} } } }];
export async function handleToolCall(name: string) { return name + ': all quiet'; }`),
    );
    const result = await loadCharacterFile(file);
    if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('\n'));
    const c = result.character;
    expect(c).toMatchObject({
      id: 'dev-news',
      layout: 'unmute',
      name: 'Dev (news)',
      voice: { kyutai: 'unmute-prod-website/developer-1.mp3' },
      toolNames: ['headline'],
    });
    const prompt = await c.systemPrompt({
      now: new Date(),
      sessionId: 's-1',
      variant: 'default',
      metadata: {},
    });
    expect(prompt).toBe('You read the news. (s-1)');
  });

  it('has its errors named by the exports the author wrote', async () => {
    const errors = await errorsOf(
      'dev-bad.ts',
      unmute(`export const TOOLS = [{ type: 'function', function: { name: 'head line' } }];`),
    );
    expect(errors.map((e) => [e.kind, e.path])).toEqual([
      ['tool_name', 'TOOLS[0].function.name'],
      ['missing_handler', 'TOOLS[0]'],
    ]);
  });

  it('needs a PromptGenerator class', async () => {
    const e = await oneError(
      'dev-no-gen.ts',
      `export const CHARACTER_NAME = 'X';\nexport const INSTRUCTIONS = {};\nexport const PromptGenerator = 'nope';\n`,
      'handler_type',
    );
    expect(e.path).toBe('PromptGenerator');
  });
});

describe('a valid character', () => {
  it('accepts a module with no import at all', async () => {
    const file = await chars.write(
      'bare.mjs',
      `export default { name: 'Bare', instructions: 'You are bare.' };\n`,
    );
    const result = await loadCharacterFile(file);
    expect(
      result.ok &&
        (await result.character.systemPrompt({
          now: new Date(),
          sessionId: 's',
          variant: 'default',
          metadata: {},
        })),
    ).toBe('You are bare.');
  });

  it('accepts a zod tool written without defineTool', async () => {
    const file = await chars.write(
      'plain-zod.ts',
      character({
        extra: `tools: [{ name: 'roll', description: 'Roll a die', parameters: z.object({ sides: z.number().default(6) }), handler: ({ sides }: { sides: number }) => sides }],`,
      }),
    );
    const result = await loadCharacterFile(file);
    expect(result.ok && result.character.toolNames).toEqual(['roll']);
  });
});

describe('a character outside an ES-module package', () => {
  it('is refused with the package.json to write', async () => {
    const outside = await characterDir({ 'package.json': '{"name":"not-esm"}' });
    try {
      const file = await outside.write('a.ts', character());
      const result = await loadCharacterFile(file);
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(result.errors.map((e) => e.kind)).toEqual(['import']);
      expect(result.errors[0]!.detail).toMatch(
        /^is not inside an ES-module package, so it would load as CommonJS; put \{"type":"module"\} in a package.json in /,
      );
      const mjs = await outside.write('b.mjs', `export default { name: 'B', instructions: 'x' };`);
      expect((await loadCharacterFile(mjs)).ok).toBe(true);
    } finally {
      await outside.cleanup();
    }
  });
});
