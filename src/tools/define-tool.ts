import { z } from 'zod';
import { ConfigError } from '../errors.js';
import type {
  RunnableTool,
  ToolBehaviour,
  ToolContext,
  ToolDescription,
  ToolHandler,
} from './types.js';
import { zodToParameters } from './zod-json.js';

/** A tool written with zod: the schema types the handler's arguments. */
export interface ZodToolSpec<S extends z.ZodObject = z.ZodObject> extends ToolBehaviour {
  name: string;
  description: string;
  parameters: S;
  /** Optional: a tool without a handler is bound late from a tool library. */
  handler?: (args: z.output<S>, ctx: ToolContext) => unknown;
}

/** A tool defined with {@link defineTool}. */
export interface ZodTool<S extends z.ZodObject = z.ZodObject> extends ZodToolSpec<S> {
  readonly kind: 'zod';
}

/**
 * Defines a tool whose arguments are validated by a zod object schema.
 *
 * @example
 * const sayHello = defineTool({
 *   name: 'sayHello',
 *   description: 'Greet someone',
 *   parameters: z.object({ personName: z.string().default('world') }),
 *   handler: ({ personName }) => `Hello, ${personName}! Nice to meet you.`,
 * });
 */
export function defineTool<S extends z.ZodObject>(spec: ZodToolSpec<S>): ZodTool<S> {
  return { ...spec, kind: 'zod' };
}

/**
 * The OpenAI JSON form of a tool, as ported from other character files. The
 * behaviour fields (`timeoutMs`, `cancellable`, `filler`, `background`,
 * `speakProgress`) sit beside `function`.
 */
export interface OpenAiToolJson extends ToolBehaviour {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** The description the model sees for a zod tool. */
export function describeZodTool(tool: ZodToolSpec): ToolDescription {
  return {
    name: tool.name,
    description: tool.description,
    parameters: zodToParameters(tool.parameters),
  };
}

/**
 * Compiles a JSON Schema (an OpenAI tool's `parameters`) into a zod validator
 * with zod 4's `z.fromJSONSchema`. Throws a {@link ConfigError} naming the tool
 * when the schema cannot be compiled.
 */
export function compileJsonSchema(
  name: string,
  parameters: Record<string, unknown> | undefined,
): z.ZodType {
  const schema = parameters ?? { type: 'object', properties: {} };
  try {
    // z.fromJSONSchema takes its own JSONSchema type; tool parameters are plain JSON.
    return z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (err) {
    throw new ConfigError(
      `tool ${name}: its parameters are not a JSON Schema that can be validated (${(err as Error).message}). ` +
        'Write an object schema: {"type":"object","properties":{...},"required":[...]}.',
      { cause: err },
    );
  }
}

/** Turns a zod tool with a handler into a runnable tool. */
export function zodToolToRunnable(tool: ZodToolSpec, handler?: ToolHandler): RunnableTool {
  const run = handler ?? (tool.handler as ToolHandler | undefined);
  if (typeof run !== 'function') {
    throw new ConfigError(
      `tool ${tool.name}: handler must be a function, got ${typeof run}. ` +
        'Give defineTool a handler, or bind the tool from a tool library.',
    );
  }
  return {
    description: describeZodTool(tool),
    schema: tool.parameters,
    handler: run,
    ...pickBehaviour(tool),
  };
}

/** Turns an OpenAI-JSON tool served by a shared handler into a runnable tool. */
export function jsonToolToRunnable(
  tool: OpenAiToolJson,
  handleToolCall: (name: string, args: Record<string, unknown>, ctx: ToolContext) => unknown,
  behaviour: ToolBehaviour = {},
): RunnableTool {
  const { name, description = '', parameters } = tool.function;
  return {
    description: {
      name,
      description,
      parameters: parameters ?? { type: 'object', properties: {} },
    },
    schema: compileJsonSchema(name, parameters),
    handler: (args, ctx) => handleToolCall(name, args, ctx),
    ...pickBehaviour(behaviour),
  };
}

/** The behaviour fields (timeout, cancellable, filler, background, speakProgress) that are set, and nothing else. */
export function pickBehaviour(b: ToolBehaviour): ToolBehaviour {
  const out: ToolBehaviour = {};
  if (b.timeoutMs !== undefined) out.timeoutMs = b.timeoutMs;
  if (b.cancellable !== undefined) out.cancellable = b.cancellable;
  if (b.filler !== undefined) out.filler = b.filler;
  if (b.background !== undefined) out.background = b.background;
  if (b.speakProgress !== undefined) out.speakProgress = b.speakProgress;
  return out;
}
