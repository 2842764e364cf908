/**
 * Checks a client tool's `parameters` as a JSON Schema before it reaches the
 * LLM: a strict LLM refuses the whole request over one bad schema, on every
 * later turn. The schema is checked against the draft-07 meta-schema, then
 * walked for what the meta-schema cannot find: a `pattern` that is no
 * regular expression and a `$ref` that points nowhere. Not compiled: ajv's
 * compiler writes code for each schema (about a millisecond a tool), which a
 * client sending new tools in a loop would have the server do for it.
 */
import { createHash } from 'node:crypto';
import { Ajv, type ErrorObject } from 'ajv';

/** How many checked schemas are remembered: clients resend the same tools with each update. */
export const TOOL_SCHEMA_CACHE_ENTRIES = 512;

const ajv = new Ajv({
  // Unknown keywords (`x-…`, `title` variants) are the LLM's business, not a mistake.
  strict: false,
  // Formats are hints to the LLM; nothing is validated against them here.
  validateFormats: false,
});

/** Results by a hash of the schema's JSON: undefined when it is valid, else the problem. */
const checked = new Map<string, string | undefined>();

/**
 * What is wrong with a tool's `parameters` as a JSON Schema, or undefined
 * when nothing is.
 *
 * @example
 * toolSchemaProblem({ type: 'object', properties: 5 }); // 'at /properties: must be object'
 */
export function toolSchemaProblem(parameters: Record<string, unknown>): string | undefined {
  const json = JSON.stringify(parameters);
  const key = createHash('sha256').update(json).digest('base64');
  if (checked.has(key)) {
    const problem = checked.get(key);
    // Refreshes its place: the oldest entry is the one dropped.
    checked.delete(key);
    checked.set(key, problem);
    return problem;
  }
  const problem = check(parameters);
  checked.set(key, problem);
  if (checked.size > TOOL_SCHEMA_CACHE_ENTRIES) checked.delete(checked.keys().next().value!);
  return problem;
}

function check(parameters: Record<string, unknown>): string | undefined {
  // A `$schema` (zod writes draft 2020-12's) is read as draft-07, which LLMs take.
  const { $schema: _schema, ...schema } = parameters;
  try {
    if (!ajv.validateSchema(schema)) return describe(ajv.errors?.[0]);
  } catch (e) {
    return (e as Error).message;
  }
  // A call's arguments are a JSON object; OpenAI refuses any other type here.
  if (schema.type !== undefined && schema.type !== 'object') {
    return `the schema's type must be "object" (a call's arguments are one object), not ${JSON.stringify(schema.type)}`;
  }
  return walk(schema);
}

/** Keywords whose values are data, not schemas: nothing in them is a `pattern` or `$ref`. */
const DATA_KEYWORDS = new Set(['enum', 'const', 'default', 'examples', 'description', 'title']);

/** The first bad `pattern` (or `patternProperties` key) or dangling `$ref` in a schema. */
function walk(root: Record<string, unknown>): string | undefined {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      stack.push(...(node as unknown[]));
      continue;
    }
    if (node === null || typeof node !== 'object') continue;
    const o = node as Record<string, unknown>;
    const patterns = [
      ...(typeof o.pattern === 'string' ? [o.pattern] : []),
      ...(o.patternProperties && typeof o.patternProperties === 'object'
        ? Object.keys(o.patternProperties)
        : []),
    ];
    for (const p of patterns) {
      try {
        new RegExp(p);
      } catch (e) {
        return (e as Error).message.replace(
          /^Invalid regular expression: /,
          'pattern is no regular expression: ',
        );
      }
    }
    if (typeof o.$ref === 'string' && !resolves(root, o.$ref)) {
      return `$ref "${o.$ref}" points nowhere in the schema (references such as "#/$defs/name" to a part of the same schema are resolved, nothing else)`;
    }
    for (const [k, v] of Object.entries(o)) if (!DATA_KEYWORDS.has(k)) stack.push(v);
  }
  return undefined;
}

/** Whether `ref` is `#` or a JSON Pointer (`#/…`) to a part of `root`. */
function resolves(root: unknown, ref: string): boolean {
  if (ref === '#') return true;
  if (!ref.startsWith('#/')) return false;
  let at: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    let part: string;
    try {
      part = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    } catch {
      return false;
    }
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, part)) return false;
    at = (at as Record<string, unknown>)[part];
  }
  return at !== null && (typeof at === 'object' || typeof at === 'boolean');
}

function describe(error: ErrorObject | undefined): string {
  if (error === undefined) return 'not a JSON Schema';
  const where = error.instancePath === '' ? 'the schema' : `at ${error.instancePath}`;
  const allowed = (error.params as { allowedValues?: unknown[] }).allowedValues;
  const values = allowed ? ` (${allowed.map((v) => JSON.stringify(v)).join(', ')})` : '';
  return `${where}: ${error.message ?? 'invalid'}${values}`;
}
