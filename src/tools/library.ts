import { z } from 'zod';
import { ConfigError, ToolBindingError } from '../errors.js';
import { DEFAULT_VARIANT, TOOL_NAME_PATTERN } from './constants.js';
import {
  jsonToolToRunnable,
  pickBehaviour,
  zodToolToRunnable,
  type OpenAiToolJson,
  type ZodTool,
} from './define-tool.js';
import { zodToParameters } from './zod-json.js';
import type {
  RunnableTool,
  ToolBehaviour,
  ToolContext,
  ToolDescription,
  ToolHandler,
} from './types.js';

/** A tool as a character lists it: zod-typed, or OpenAI JSON. */
export type ToolSpec = ZodTool | OpenAiToolJson;

/** The one handler serving a character's OpenAI-JSON tools. */
export type HandleToolCall = (
  name: string,
  args: Record<string, unknown>,
  ctx: ToolContext,
) => unknown;

/** An implementation in a tool library. */
export interface ToolImplementation extends ToolBehaviour {
  handler: ToolHandler;
  /**
   * The arguments this implementation expects. When given, it must describe the
   * same JSON Schema as the character's description, or binding fails.
   */
  parameters?: z.ZodObject | Record<string, unknown>;
}

/** Implementations of tools by name, for one variant. */
export interface ToolLibrary {
  readonly variant: string;
  readonly implementations: ReadonlyMap<string, ToolImplementation>;
}

/**
 * Defines a tool library: implementations bound to characters' tool
 * descriptions when a session starts. Two libraries with different variants
 * serve A/B tests of the same character.
 *
 * @example
 * const greetingsB = defineToolLibrary('b', {
 *   sayHello: ({ personName }) => `Hi there, ${personName}!`,
 * });
 */
export function defineToolLibrary(
  variant: string,
  implementations: Record<string, ToolHandler | ToolImplementation>,
): ToolLibrary {
  const map = new Map<string, ToolImplementation>();
  for (const [name, impl] of Object.entries(implementations)) {
    map.set(name, typeof impl === 'function' ? { handler: impl } : impl);
  }
  return { variant, implementations: map };
}

/** The tools of one session: runnable, by name, with the variant serving them. */
export interface Toolset {
  readonly variant: string;
  readonly tools: ReadonlyMap<string, RunnableTool>;
  /** What the model is offered, in the character's order. */
  readonly descriptions: readonly ToolDescription[];
}

/** Options of {@link createToolset}. */
export interface ToolsetOptions {
  /** Serves a character's OpenAI-JSON tools. */
  handleToolCall?: HandleToolCall;
  /** Late-bound implementations; they take precedence over inline handlers. */
  library?: ToolLibrary;
}

/** An empty toolset (a character without tools). */
export const NO_TOOLS: Toolset = { variant: DEFAULT_VARIANT, tools: new Map(), descriptions: [] };

/**
 * Binds a character's tool descriptions to their implementations: inline
 * handlers, the character's `handleToolCall`, or a tool library (late binding).
 * Throws {@link ToolBindingError} when a tool has no implementation or the
 * library's schema differs, and {@link ConfigError} on bad names or duplicates.
 */
export function createToolset(specs: readonly ToolSpec[], options: ToolsetOptions = {}): Toolset {
  const { library, handleToolCall } = options;
  const variant = library?.variant ?? DEFAULT_VARIANT;
  const tools = new Map<string, RunnableTool>();
  for (const [i, spec] of specs.entries()) {
    const name = specName(spec);
    if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name)) {
      throw new ConfigError(
        `tools[${i}].name: ${JSON.stringify(name)} is not a valid tool name; ` +
          'use 1-64 letters, digits, "_" or "-" (e.g. "get_weather").',
      );
    }
    if (tools.has(name)) {
      throw new ConfigError(
        `tools[${i}].name: duplicate tool name "${name}"; each tool needs its own name.`,
      );
    }
    tools.set(name, bindOne(spec, name, library, handleToolCall));
  }
  return { variant, tools, descriptions: [...tools.values()].map((t) => t.description) };
}

function specName(spec: ToolSpec): unknown {
  return 'kind' in spec ? spec.name : spec.function?.name;
}

function bindOne(
  spec: ToolSpec,
  name: string,
  library: ToolLibrary | undefined,
  handleToolCall: HandleToolCall | undefined,
): RunnableTool {
  const impl = library?.implementations.get(name);
  if (impl) {
    const tool =
      'kind' in spec
        ? zodToolToRunnable(spec, impl.handler)
        : jsonToolToRunnable(spec, (_n, a, c) => impl.handler(a, c), spec);
    checkSameSchema(name, library!.variant, tool.description.parameters, impl.parameters);
    return { ...tool, ...pickBehaviour(impl) };
  }
  if ('kind' in spec) {
    if (spec.handler === undefined && library) throw missing(name, library);
    return zodToolToRunnable(spec);
  }
  if (handleToolCall === undefined) {
    if (library) throw missing(name, library);
    throw new ConfigError(
      `tool ${name}: OpenAI-JSON tools need a handleToolCall(name, args, ctx) function on the character ` +
        'to run them (or a tool library that implements them).',
    );
  }
  if (typeof handleToolCall !== 'function') {
    throw new ConfigError(`handleToolCall: must be a function, got ${typeof handleToolCall}.`);
  }
  return jsonToolToRunnable(spec, handleToolCall, spec);
}

function missing(name: string, library: ToolLibrary): ToolBindingError {
  const have = [...library.implementations.keys()];
  return new ToolBindingError(
    `tool ${name}: the tool library "${library.variant}" has no implementation of it ` +
      `(it has: ${have.length ? have.join(', ') : 'nothing'}). Add "${name}" to the library or give the tool a handler.`,
  );
}

function checkSameSchema(
  name: string,
  variant: string,
  described: Record<string, unknown>,
  declared: ToolImplementation['parameters'],
): void {
  if (declared === undefined) return;
  const theirs = declared instanceof z.ZodType ? zodToParameters(declared) : declared;
  const a = canonicalJson(described);
  const b = canonicalJson(theirs);
  if (a !== b) {
    throw new ToolBindingError(
      `tool ${name}: the implementation in tool library "${variant}" expects different arguments ` +
        `than the character describes.\n  character: ${a}\n  library:   ${b}\n` +
        'Make the two schemas the same, or drop `parameters` from the library entry.',
    );
  }
}

/** JSON with object keys sorted, so equal schemas compare equal. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([x], [y]) =>
            x < y ? -1 : x > y ? 1 : 0,
          ),
        )
      : v,
  );
}
