/**
 * Validation of character modules with zod. Every problem becomes a
 * {@link CharacterError} naming the field path, what is wrong and what to
 * write instead; all problems of a file are reported, not only the first.
 */
import { z } from 'zod';
import { CharacterError, type CharacterErrorKind } from '../errors.js';
import { MAX_BACKGROUND_TOOL_TIMEOUT_MS, TOOL_NAME_PATTERN } from '../tools/constants.js';
import { compileJsonSchema } from '../tools/define-tool.js';
import { formatPath, preview } from '../tools/preview.js';
import { unrepresentableFields } from '../tools/zod-json.js';
import { MAX_MCP_SERVERS } from '../mcp/constants.js';
import { MCP_SERVER_FIELDS, mcpServerSchema } from '../mcp/schema.js';
import { closest } from './closest.js';
import { HANDOFF_TOOL_PREFIX } from './handoffs.js';
import {
  CHARACTER_ID_PATTERN,
  MAX_CHARACTER_HANDOFFS,
  MAX_CHARACTER_TOOL_ROUNDS,
  MAX_CHARACTER_TOOL_TIMEOUT_MS,
  MAX_CHARACTER_TOOLS,
} from './constants.js';

/** Longest id a character may hand off to: `transfer_to_<id>` is a tool name (at most 64). */
const MAX_HANDOFF_ID_LENGTH = 64 - HANDOFF_TOOL_PREFIX.length;

/** A path into the character object, as zod reports it. */
export type FieldPath = readonly PropertyKey[];

/** One problem found in a character, before it is tied to its file. */
export interface FieldProblem {
  kind: CharacterErrorKind;
  path: FieldPath;
  detail: string;
}

function fn(what: string, example: string, kind: CharacterErrorKind = 'handler_type') {
  return z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', {
    error: `expected a function (${what}) such as ${example}`,
    params: { kind },
  });
}

const JSON_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'] as const;
const JSON_TYPE_LIST = JSON_TYPES.map((t) => `"${t}"`).join(', ');

/**
 * The subset of JSON Schema that tool parameters use, checked field by field
 * so a mistake is reported at its exact path (`…properties.importance.enum`).
 */
const jsonSchemaNode: z.ZodType = z.lazy(() =>
  z
    .looseObject(
      {
        type: z
          .union([z.enum(JSON_TYPES), z.array(z.enum(JSON_TYPES)).min(1)], {
            error: `expected one of ${JSON_TYPE_LIST} (or an array of them)`,
          })
          .optional(),
        description: z.string({ error: 'expected a string' }).optional(),
        properties: z
          .record(z.string(), jsonSchemaNode, {
            error: 'expected an object mapping each property name to its schema',
          })
          .optional(),
        required: z
          .array(z.string({ error: 'expected a property name (a string)' }), {
            error: 'expected an array of property names such as ["location"]',
          })
          .optional(),
        items: jsonSchemaNode.optional(),
        anyOf: z.array(jsonSchemaNode, { error: 'expected an array of schemas' }).optional(),
        oneOf: z.array(jsonSchemaNode, { error: 'expected an array of schemas' }).optional(),
        allOf: z.array(jsonSchemaNode, { error: 'expected an array of schemas' }).optional(),
        additionalProperties: z
          .union([z.boolean(), jsonSchemaNode], { error: 'expected true, false or a schema' })
          .optional(),
        minimum: z.number({ error: 'expected a number' }).optional(),
        maximum: z.number({ error: 'expected a number' }).optional(),
        minLength: z.int({ error: 'expected an integer' }).min(0).optional(),
        maxLength: z.int({ error: 'expected an integer' }).min(0).optional(),
        minItems: z.int({ error: 'expected an integer' }).min(0).optional(),
        maxItems: z.int({ error: 'expected an integer' }).min(0).optional(),
      },
      { error: 'expected a JSON Schema object such as {"type":"string"}' },
    )
    .superRefine(
      (node, ctx) => {
        checkEnum(node, ctx);
        if (
          Array.isArray(node.required) &&
          node.properties &&
          typeof node.properties === 'object'
        ) {
          const props = node.properties as Record<string, unknown>;
          node.required.forEach((key, i) => {
            if (typeof key === 'string' && !(key in props)) {
              ctx.addIssue({
                code: 'custom',
                path: ['required', i],
                input: key,
                message: `lists "${key}", which is not in properties; add it to properties or remove it from required`,
              });
            }
          });
        }
      }, // Run even when a field above failed, so every mistake of a node is reported.
      { when: (payload) => isPlainObject(payload.value) },
    ),
);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkEnum(node: Record<string, unknown>, ctx: z.RefinementCtx): void {
  if (!('enum' in node)) return;
  const values = node.enum;
  const type = node.type;
  const want =
    type === undefined || type === 'string'
      ? 'strings'
      : type === 'number' || type === 'integer'
        ? 'numbers'
        : 'values';
  if (!Array.isArray(values) || values.length === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['enum'],
      input: values,
      message: `expected an array of ${want}`,
    });
    return;
  }
  values.forEach((v, i) => {
    const ok =
      want === 'strings'
        ? typeof v === 'string'
        : want === 'numbers'
          ? typeof v === 'number'
          : v === null || ['string', 'number', 'boolean'].includes(typeof v);
    if (!ok) {
      ctx.addIssue({
        code: 'custom',
        path: ['enum', i],
        input: v,
        message: `expected ${want === 'values' ? 'a string, number, boolean or null' : `one of the ${want} of a ${String(type ?? 'string')} enum`}`,
      });
    }
  });
}

/** The `parameters` of a tool: an object schema at the top. */
const toolParameters = z
  .looseObject(
    {
      type: z.literal('object', {
        error: 'expected "object": tool parameters are {"type":"object","properties":{…}}',
      }),
    },
    {
      error:
        'expected an object schema such as {"type":"object","properties":{"city":{"type":"string"}}}',
    },
  )
  // The node schema is recursive (z.lazy), so its static type is loose; any is safe here.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  .pipe(jsonSchemaNode as z.ZodType<any, any>);

const toolName = z
  .string({ error: 'expected a tool name (a string) such as "get_weather"' })
  .refine((s) => TOOL_NAME_PATTERN.test(s), {
    error: 'is not a valid tool name; use 1-64 letters, digits, "_" or "-" such as "get_weather"',
    params: { kind: 'tool_name' },
  });

const behaviourShape = {
  timeoutMs: z
    .number({ error: 'expected a number of milliseconds such as 100' })
    .positive({ error: 'expected a positive number of milliseconds such as 100' })
    .max(MAX_BACKGROUND_TOOL_TIMEOUT_MS, {
      error: `expected at most ${MAX_BACKGROUND_TOOL_TIMEOUT_MS} ms (a background tool's limit)`,
    })
    .optional(),
  cancellable: z.boolean({ error: 'expected true or false' }).optional(),
  background: z.boolean({ error: 'expected true or false' }).optional(),
  speakProgress: z.boolean({ error: 'expected true or false' }).optional(),
  filler: z
    .strictObject(
      {
        text: z.string({ error: 'expected the text to say while waiting' }),
        afterMs: z.number({ error: 'expected milliseconds such as 500' }).min(0),
      },
      { error: 'expected { text: "One moment…", afterMs: 500 }' },
    )
    .optional(),
};

const zodToolSchema = z.strictObject({
  kind: z.literal('zod').optional(),
  name: toolName,
  description: z.string({ error: 'expected a string saying what the tool does' }),
  parameters: z.custom<z.ZodObject>((v) => v instanceof z.ZodObject, {
    error: 'expected a zod object schema such as z.object({ city: z.string() })',
  }),
  handler: fn('the tool handler', '({ city }, ctx) => `Sunny in ${city}`').optional(),
  ...behaviourShape,
});

const jsonToolSchema = z.strictObject({
  type: z.literal('function', { error: 'expected "function"' }),
  function: z.strictObject(
    {
      name: toolName,
      description: z.string({ error: 'expected a string saying what the tool does' }).optional(),
      parameters: toolParameters.optional(),
      strict: z.boolean({ error: 'expected true or false' }).optional(),
    },
    { error: 'expected { name, description, parameters }' },
  ),
  ...behaviourShape,
});

const toolLibrarySchema = z.custom<{ variant: string }>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    typeof (v as { variant?: unknown }).variant === 'string' &&
    (v as { implementations?: unknown }).implementations instanceof Map,
  { error: 'expected a tool library made with defineToolLibrary(variant, { … })' },
);

/** The fields of a character; tools are checked one by one afterwards. */
const characterSchema = z.strictObject({
  name: z
    .string({ error: 'expected a non-empty string, the name users see, such as "Narrator"' })
    .trim()
    .min(1, { error: 'expected a non-empty string, the name users see, such as "Narrator"' }),
  description: z.string({ error: 'expected a one-line string' }).optional(),
  voice: z
    .record(z.string(), z.string({ error: 'expected a voice name (a string)' }), {
      error: 'expected the voice per TTS provider such as { espeak: "en-us", openai: "alloy" }',
    })
    .optional(),
  instructions: z.unknown().refine((v) => v !== undefined, {
    error: 'missing; expected the instructions such as { prompt: "You are a storyteller…" }',
  }),
  makeSystemPrompt: fn(
    'the prompt generator',
    '(instructions, ctx) => instructions.prompt',
  ).optional(),
  tools: z
    .array(z.unknown(), { error: 'expected an array of tools such as [defineTool({ … })]' })
    .max(MAX_CHARACTER_TOOLS, { error: `expected at most ${MAX_CHARACTER_TOOLS} tools` })
    .optional(),
  handleToolCall: fn(
    'serving the OpenAI-JSON tools',
    'async (name, args, ctx) => ({ … })',
  ).optional(),
  toolLibraries: z
    .array(toolLibrarySchema, {
      error: 'expected an array of tool libraries such as [defineToolLibrary("a", { … })]',
    })
    .optional(),
  maxToolRounds: z
    .int({ error: 'expected a whole number such as 3' })
    .min(1, { error: 'expected at least 1' })
    .max(MAX_CHARACTER_TOOL_ROUNDS, { error: `expected at most ${MAX_CHARACTER_TOOL_ROUNDS}` })
    .optional(),
  toolMode: z.enum(['native', 'prompt'], { error: 'expected "native" or "prompt"' }).optional(),
  toolFormat: z
    .enum(['tools', 'functions'], { error: 'expected "tools" or "functions"' })
    .optional(),
  greeting: z.string({ error: 'expected the first line the character says' }).optional(),
  handoffs: z
    .array(
      z
        .string({
          error: 'expected a character id (a file name without extension) such as "weather"',
        })
        .regex(CHARACTER_ID_PATTERN, {
          error:
            'is not a character id; use the file name without extension: letters, digits, "_" or "-", such as "weather"',
        })
        .max(MAX_HANDOFF_ID_LENGTH, {
          error: `is too long to hand off to: "${HANDOFF_TOOL_PREFIX}" and the id make a tool name of at most 64 characters, so the id may have ${MAX_HANDOFF_ID_LENGTH}; rename the file`,
        }),
      { error: 'expected an array of character ids such as ["weather", "quizmaster"]' },
    )
    .max(MAX_CHARACTER_HANDOFFS, {
      error: `expected at most ${MAX_CHARACTER_HANDOFFS} characters to hand off to`,
    })
    // An id listed twice is reported with the other handoff problems (handoffProblems).
    .optional(),
  llm: z
    .strictObject(
      {
        model: z.string({ error: 'expected a model name' }).min(1).optional(),
        temperature: z
          .number({ error: 'expected a number from 0 to 2' })
          .min(0, { error: 'expected a number from 0 to 2' })
          .max(2, { error: 'expected a number from 0 to 2' })
          .optional(),
        maxTokens: z
          .int({ error: 'expected a whole number of tokens such as 512' })
          .positive({ error: 'expected a positive number of tokens' })
          .optional(),
      },
      { error: 'expected { model?, temperature?, maxTokens? }' },
    )
    .optional(),
  metadata: z.record(z.string(), z.unknown(), { error: 'expected an object' }).optional(),
  mcp: z
    .array(z.unknown(), {
      error:
        'expected an array of MCP servers such as [{ label: "files", command: "node", args: ["mcp/server.mjs"] }]',
    })
    .max(MAX_MCP_SERVERS, { error: `expected at most ${MAX_MCP_SERVERS} MCP servers` })
    .optional(),
});

const KNOWN_FIELDS = Object.keys(characterSchema.shape);

/** A character whose fields passed validation (tools still as written). */
export type ValidCharacter = z.output<typeof characterSchema>;

/** Checks a character object; returns every problem found (empty when valid). */
export function validateCharacter(value: unknown): {
  character: ValidCharacter | undefined;
  problems: FieldProblem[];
} {
  if (!isPlainObject(value)) {
    return {
      character: undefined,
      problems: [
        {
          kind: 'shape',
          path: [],
          detail: `the default export must be a character object, got ${preview(value)}; write export default defineCharacter({ name, instructions, … })`,
        },
      ],
    };
  }
  const problems: FieldProblem[] = [];
  const parsed = characterSchema.safeParse(value, { reportInput: true });
  if (!parsed.success) problems.push(...issuesToProblems(parsed.error.issues, [], KNOWN_FIELDS));
  const raw = value as Record<string, unknown>;
  if (Array.isArray(raw.tools)) problems.push(...checkTools(raw));
  if (Array.isArray(raw.mcp)) problems.push(...checkMcpServers(raw.mcp));
  if (raw.makeSystemPrompt === undefined && raw.instructions !== undefined) {
    const i = raw.instructions as { prompt?: unknown } | string;
    if (typeof i !== 'string' && typeof i?.prompt !== 'string') {
      problems.push({
        kind: 'shape',
        path: ['makeSystemPrompt'],
        detail:
          'missing; without instructions.prompt (a string) the character needs a prompt generator such as makeSystemPrompt: (instructions, ctx) => "You are …"',
      });
    }
  }
  return { character: problems.length ? undefined : (parsed.data as ValidCharacter), problems };
}

/** Whether a tool entry is written with zod (`defineTool`, or any zod `parameters`). */
export function isZodToolEntry(tool: unknown): boolean {
  if (typeof tool !== 'object' || tool === null) return false;
  const t = tool as Record<string, unknown>;
  return t.kind === 'zod' || t.parameters instanceof z.ZodType;
}

function checkTools(raw: Record<string, unknown>): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const tools = raw.tools as unknown[];
  const seen = new Map<string, number>();
  const hasLibraries = Array.isArray(raw.toolLibraries) && raw.toolLibraries.length > 0;
  tools.forEach((tool, i) => {
    const at: PropertyKey[] = ['tools', i];
    if (typeof tool !== 'object' || tool === null) {
      problems.push({
        kind: 'shape',
        path: at,
        detail: `expected a tool: defineTool({ name, description, parameters, handler }) or { type: "function", function: { name, description, parameters } }, got ${preview(tool)}`,
      });
      return;
    }
    const t = tool as Record<string, unknown>;
    const zodStyle = isZodToolEntry(t);
    const schema = zodStyle ? zodToolSchema : jsonToolSchema;
    const parsed = schema.safeParse(t, { reportInput: true });
    const fields = Object.keys(schema.shape);
    if (!parsed.success) problems.push(...issuesToProblems(parsed.error.issues, at, fields));
    if (
      parsed.success &&
      t.background !== true &&
      typeof t.timeoutMs === 'number' &&
      t.timeoutMs > MAX_CHARACTER_TOOL_TIMEOUT_MS
    ) {
      problems.push({
        kind: 'shape',
        path: [...at, 'timeoutMs'],
        detail: `expected at most ${MAX_CHARACTER_TOOL_TIMEOUT_MS} ms, got ${t.timeoutMs}; a slower tool should set background: true (it answers at once and finishes in the background)`,
      });
    }
    const fnPart = t.function as Record<string, unknown> | undefined;
    const name = zodStyle ? t.name : fnPart?.name;
    const namePath = zodStyle ? [...at, 'name'] : [...at, 'function', 'name'];
    if (typeof name === 'string') {
      const first = seen.get(name);
      if (first !== undefined) {
        problems.push({
          kind: 'duplicate_tool',
          path: namePath,
          detail: `duplicate tool name "${name}" (tools[${first}] has it too); give each tool its own name`,
        });
      } else seen.set(name, i);
    }
    if (zodStyle && parsed.success) {
      problems.push(...unsendableFields(name, t.parameters as z.ZodType, at));
    }
    if (!zodStyle && parsed.success && fnPart?.parameters !== undefined) {
      // What the field checks above miss, the compiler catches (e.g. a $ref it cannot follow).
      try {
        compileJsonSchema(String(name), fnPart.parameters as Record<string, unknown>);
      } catch (err) {
        problems.push({
          kind: 'json_schema',
          path: [...at, 'function', 'parameters'],
          detail: `is not a JSON Schema that can be validated (${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}); write an object schema such as {"type":"object","properties":{…},"required":[…]}`,
        });
      }
    }
    if (hasLibraries) return; // the libraries are checked when the tools are bound
    if (zodStyle && t.handler === undefined) {
      problems.push({
        kind: 'missing_handler',
        path: [...at, 'handler'],
        detail:
          'missing; give defineTool a handler such as handler: (args, ctx) => "done", or bind the tool from a tool library (toolLibraries)',
      });
    }
    if (!zodStyle && raw.handleToolCall === undefined) {
      problems.push({
        kind: 'missing_handler',
        path: at,
        detail: `the OpenAI-JSON tool "${String(name)}" has nothing to run it; add handleToolCall: async (name, args, ctx) => { … } to the character`,
      });
    }
  });
  return problems;
}

/**
 * The fields of a zod tool's parameters that JSON cannot carry (`z.date()`,
 * `z.bigint()`, `z.map()` …): the model would be shown `{}` and every call
 * would fail its arguments, so the tool is refused at load.
 */
function unsendableFields(name: unknown, parameters: z.ZodType, at: FieldPath): FieldProblem[] {
  return unrepresentableFields(parameters).map((f) => ({
    kind: 'json_schema',
    path: [...at, 'parameters', ...f.path],
    detail: `tool "${name}" takes ${f.written}${f.within ? ` in ${f.within}` : ''} here, which JSON cannot carry: the model would be shown {} and every call would fail; ${f.advice}`,
  }));
}

/** Checks each `mcp` entry's shape and that labels are unique. */
function checkMcpServers(servers: readonly unknown[]): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const seen = new Map<string, number>();
  servers.forEach((server, i) => {
    const at: PropertyKey[] = ['mcp', i];
    const parsed = mcpServerSchema.safeParse(server, { reportInput: true });
    if (!parsed.success) {
      problems.push(...issuesToProblems(parsed.error.issues, at, MCP_SERVER_FIELDS));
    }
    const label = (server as { label?: unknown } | null)?.label;
    if (typeof label !== 'string') return;
    const first = seen.get(label);
    if (first === undefined) seen.set(label, i);
    else {
      problems.push({
        kind: 'shape',
        path: [...at, 'label'],
        detail: `duplicate MCP server label "${label}" (mcp[${first}] has it too); give each server its own label`,
      });
    }
  });
  return problems;
}

/**
 * Checks tool parameters that come from elsewhere (an MCP server's input
 * schema) with the same rules as a character's OpenAI-JSON tools. Returns
 * what is wrong, or `undefined` when they can be used.
 */
export function checkToolParameters(name: string, parameters: unknown): string | undefined {
  const parsed = toolParameters.safeParse(parameters, { reportInput: true });
  if (!parsed.success) {
    return parsed.error.issues
      .slice(0, 3)
      .map((issue) => `${formatPath(issue.path) || '(schema)'}: ${issue.message}`)
      .join('; ');
  }
  try {
    compileJsonSchema(name, parameters as Record<string, unknown>);
  } catch (err) {
    const cause = (err as Error).cause;
    return `cannot be validated (${cause instanceof Error ? cause.message : (err as Error).message})`;
  }
  return undefined;
}

/** Turns zod issues into problems with paths under `prefix`. */
function issuesToProblems(
  issues: readonly z.core.$ZodIssue[],
  prefix: FieldPath,
  knownFields: readonly string[],
): FieldProblem[] {
  const out: FieldProblem[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const guess = closest(key, knownFields);
        out.push({
          kind: 'shape',
          path: [...prefix, ...issue.path, key],
          detail: `unknown field${guess ? `; did you mean "${guess}"?` : `; known fields are ${knownFields.join(', ')}`}`,
        });
      }
      continue;
    }
    const path = [...prefix, ...issue.path];
    const kind = kindOf(issue, path);
    const input = (issue as { input?: unknown }).input;
    // Say what was given when there was something; a missing field says so instead.
    const detail =
      input !== undefined
        ? withGot(issue.message, input)
        : issue.code === 'custom' || issue.message.startsWith('missing')
          ? issue.message
          : `missing; ${issue.message}`;
    out.push({ kind, path, detail });
  }
  return out;
}

/** `what is wrong, got X; what to write`: the value goes before the advice. */
function withGot(message: string, input: unknown): string {
  const cut = message.indexOf('; ');
  const got = `, got ${preview(input)}`;
  return cut < 0 ? message + got : message.slice(0, cut) + got + message.slice(cut);
}

function kindOf(issue: z.core.$ZodIssue, path: FieldPath): CharacterErrorKind {
  const given = (issue as { params?: { kind?: CharacterErrorKind } }).params?.kind;
  if (given) return given;
  if (path[0] === 'handoffs') return 'handoff';
  // Anything inside an OpenAI tool's parameters is a JSON Schema mistake.
  if (path[0] === 'tools' && path[2] === 'function' && path[3] === 'parameters') {
    return 'json_schema';
  }
  return 'shape';
}

/** Ties problems to a file. */
export function toErrors(file: string, problems: readonly FieldProblem[]): CharacterError[] {
  return problems.map((p) => new CharacterError(p.kind, file, formatPath(p.path), p.detail));
}
