/**
 * Checks a client tool's `parameters` as a JSON Schema before it reaches the
 * LLM: a strict LLM refuses the whole request over one bad schema, on every
 * later turn. The schema is checked against the draft-07 meta-schema, then
 * compiled, which finds what the meta-schema cannot: a `pattern` that is no
 * regular expression and a `$ref` that points nowhere.
 */
import { createHash } from 'node:crypto';
import { Ajv, MissingRefError, type ErrorObject } from 'ajv';

/** How many checked schemas are remembered: clients resend the same tools with each update. */
export const TOOL_SCHEMA_CACHE_ENTRIES = 512;

const ajv = new Ajv({
  // Unknown keywords (`x-…`, `title` variants) are the LLM's business, not a mistake.
  strict: false,
  // Formats are hints to the LLM; nothing is validated against them here.
  validateFormats: false,
  // Patterns are compiled as JavaScript reads them without the `u` flag, the more lenient reading.
  unicodeRegExp: false,
  // Schemas with an `$id` are not kept between checks.
  addUsedSchema: false,
  code: { optimize: false },
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
  // Compiling generates code (about a millisecond a tool): done only for what it finds.
  const problem = check(parameters, /"(pattern|patternProperties|\$ref)"/.test(json));
  checked.set(key, problem);
  if (checked.size > TOOL_SCHEMA_CACHE_ENTRIES) checked.delete(checked.keys().next().value!);
  return problem;
}

function check(parameters: Record<string, unknown>, compile: boolean): string | undefined {
  // A `$schema` (zod writes draft 2020-12's) is read as draft-07, which LLMs take; an `$id`
  // at the top is dropped so that no schema can stand in for one ajv keeps (its meta-schema).
  const { $schema: _schema, $id: _id, ...schema } = parameters;
  try {
    if (!ajv.validateSchema(schema)) return describe(ajv.errors?.[0]);
  } catch (e) {
    return (e as Error).message;
  }
  if (!compile) return undefined;
  try {
    ajv.compile(schema);
  } catch (e) {
    if (e instanceof MissingRefError) {
      return `$ref "${e.missingRef}" points nowhere in the schema (references such as "#/$defs/name" to a part of the same schema are resolved, nothing else)`;
    }
    return (e as Error).message.replace(
      /^Invalid regular expression: /,
      'pattern is no regular expression: ',
    );
  } finally {
    ajv.removeSchema(schema);
  }
  return undefined;
}

function describe(error: ErrorObject | undefined): string {
  if (error === undefined) return 'not a JSON Schema';
  const where = error.instancePath === '' ? 'the schema' : `at ${error.instancePath}`;
  const allowed = (error.params as { allowedValues?: unknown[] }).allowedValues;
  const values = allowed ? ` (${allowed.map((v) => JSON.stringify(v)).join(', ')})` : '';
  return `${where}: ${error.message ?? 'invalid'}${values}`;
}
