/**
 * Improvising from a request's tools: when no script rule matches, a script
 * with `improvise: true` calls the offered tool whose name, description or
 * parameters the user's words name, with arguments valid for its JSON
 * Schema, then answers from the tool's result. So a character the script has
 * never heard of still uses its tools in the demo.
 */
import type { ConversationFacts, SimReply } from './script.js';

/** A tool as a request offers it (`tools` or legacy `functions`). */
export interface OfferedTool {
  name: string;
  description: string;
  parameters: JsonSchema;
}

/** The parts of JSON Schema the improviser reads. */
type JsonSchema = Record<string, unknown>;

/** Longest summary of a tool result put in a reply. */
export const MAX_SUMMARY_CHARS = 400;

const STOPWORDS = new Set(
  (
    'a an and are as at be by can could do does for from get give has have how i in is it its ' +
    'me my of on or please right say tell that the their there this to use what whats when ' +
    'where which who will with would you your now just some any one want like need let lets'
  ).split(' '),
);

const NUMBER_WORDS: Record<string, number> = {
  zero: 0,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  twenty: 20,
  hundred: 100,
};

/** The tools a chat request offers, in either format; malformed entries are skipped. */
export function offeredTools(body: Record<string, unknown>): OfferedTool[] {
  const list: unknown[] = Array.isArray(body.tools)
    ? body.tools.map((t) => (isRecord(t) ? t.function : undefined))
    : Array.isArray(body.functions)
      ? body.functions
      : [];
  const tools: OfferedTool[] = [];
  for (const fn of list) {
    if (!isRecord(fn) || typeof fn.name !== 'string') continue;
    tools.push({
      name: fn.name,
      description: typeof fn.description === 'string' ? fn.description : '',
      parameters: isRecord(fn.parameters) ? fn.parameters : {},
    });
  }
  return tools;
}

/** What improvising produced: a reply, or a hint naming the tools when none matched. */
export type Improvised = { reply: SimReply } | { hint: string } | undefined;

/**
 * Improvises a reply: round 0 calls the best-matching tool, a later round
 * answers from the tool results. `undefined` when there is nothing to go on.
 *
 * @example improvise(conversationFacts(messages), offeredTools(body))
 */
export function improvise(facts: ConversationFacts, tools: readonly OfferedTool[]): Improvised {
  if (facts.round > 0) {
    if (facts.toolResults.length === 0) return undefined;
    return { reply: { parts: [{ text: answerFromResults(facts.toolResults) }] } };
  }
  if (facts.user === null || tools.length === 0) return undefined;
  const tool = bestTool(facts.user, tools);
  if (!tool) {
    const names = tools.map((t) => (t.description ? `${t.name} (${t.description})` : t.name));
    return { hint: `This character's tools: ${names.join('; ')}. Name one to see it used.` };
  }
  const args = argumentsFor(tool.parameters, facts.user);
  return { reply: { parts: [{ toolCall: { name: tool.name, arguments: args } }] } };
}

/** The sentence a reply says about tool results. */
export function answerFromResults(results: readonly string[]): string {
  const summaries = results.map(summarizeToolResult);
  const failed = results.every((r) => /^\s*error\b/i.test(r));
  return failed
    ? `The tool failed: ${summaries.join('; ')}.`
    : `Here is what I found: ${summaries.join('; ')}.`;
}

/**
 * A tool result in words: JSON objects become `key value` pairs
 * (`temperature 5, conditions light rain`), other text stays as it is.
 *
 * @example summarizeToolResult('{"temperature":5,"conditions":"light rain"}') // 'temperature 5, conditions light rain'
 */
export function summarizeToolResult(text: string): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = text;
  }
  const words = inWords(value)
    .trim()
    .replace(/[.\s]+$/, '');
  return words.length > MAX_SUMMARY_CHARS ? `${words.slice(0, MAX_SUMMARY_CHARS - 1)}…` : words;
}

function inWords(value: unknown, depth = 0): string {
  if (value === null || value === undefined) return 'none';
  if (typeof value !== 'object') return String(value);
  if (depth > 3) return '…';
  if (Array.isArray(value)) {
    return value.map((v) => (isRecord(v) ? `(${inWords(v, depth + 1)})` : inWords(v))).join(', ');
  }
  return Object.entries(value)
    .map(([k, v]) => {
      const inner = inWords(v, depth + 1);
      return `${k.replace(/_/g, ' ')} ${isRecord(v) || Array.isArray(v) ? `(${inner})` : inner}`;
    })
    .join(', ');
}

/** Lower-case words of a text; camelCase and snake_case split; plural `s` dropped. */
function words(text: string): string[] {
  return text
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 1 && !STOPWORDS.has(w))
    .map((w) => (w.length > 3 && w.endsWith('s') && !w.endsWith('ss') ? w.slice(0, -1) : w));
}

/** The tool the user's words name most (name words count most), if any. */
function bestTool(user: string, tools: readonly OfferedTool[]): OfferedTool | undefined {
  const said = new Set(words(user));
  let best: OfferedTool | undefined;
  let bestScore = 0;
  for (const tool of tools) {
    const weights = new Map<string, number>();
    const add = (text: string, weight: number) => {
      for (const w of words(text)) weights.set(w, Math.max(weights.get(w) ?? 0, weight));
    };
    add(tool.description, 1);
    for (const [name, schema] of Object.entries(properties(tool.parameters))) {
      add(name, 2);
      if (typeof schema.description === 'string') add(schema.description, 1);
      for (const v of enumOf(schema)) add(String(v), 2);
    }
    add(tool.name, 3);
    let score = 0;
    for (const [w, weight] of weights) if (said.has(w)) score += weight;
    if (score > bestScore) [best, bestScore] = [tool, score];
  }
  return best;
}

/** Arguments valid for `schema`, taken from the user's words where they can be. */
export function argumentsFor(schema: JsonSchema, user: string): Record<string, unknown> {
  const numbers = numbersIn(user);
  const value = valueFor(schema, user, numbers, true);
  return isRecord(value) ? value : {};
}

function valueFor(schema: JsonSchema, user: string, numbers: number[], needed: boolean): unknown {
  const branch = firstBranch(schema);
  if ('const' in branch) return branch.const;
  const choices = enumOf(branch);
  if (choices.length > 0) {
    const lower = user.toLowerCase();
    const named = choices.find((c) => lower.includes(String(c).toLowerCase()));
    if (named !== undefined) return named;
    return needed ? ('default' in branch ? branch.default : choices[0]) : undefined;
  }
  switch (typeOf(branch)) {
    case 'object':
      return objectFor(branch, user, numbers);
    case 'integer':
    case 'number':
      return numberFor(branch, numbers, needed);
    case 'boolean':
      return needed ? (typeof branch.default === 'boolean' ? branch.default : false) : undefined;
    case 'array': {
      if (!needed) return undefined;
      const items = isRecord(branch.items) ? branch.items : {};
      const count = typeof branch.minItems === 'number' ? branch.minItems : 0;
      return Array.from({ length: count }, () => valueFor(items, user, numbers, true));
    }
    case 'null':
      return null;
    default:
      if (!needed) return undefined;
      if (typeof branch.default === 'string') return branch.default;
      return stringFor(branch, user);
  }
}

function objectFor(schema: JsonSchema, user: string, numbers: number[]): Record<string, unknown> {
  const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
  const out: Record<string, unknown> = {};
  for (const [name, prop] of Object.entries(properties(schema))) {
    const v = valueFor(prop, user, numbers, required.has(name));
    if (v !== undefined) out[name] = v;
  }
  return out;
}

function numberFor(schema: JsonSchema, numbers: number[], needed: boolean): number | undefined {
  const minimum = numberField(schema.minimum);
  const maximum = numberField(schema.maximum);
  const above = numberField(schema.exclusiveMinimum);
  const below = numberField(schema.exclusiveMaximum);
  const integer = typeOf(schema) === 'integer';
  const fits = (n: number) =>
    (!integer || Number.isInteger(n)) &&
    (minimum === undefined || n >= minimum) &&
    (maximum === undefined || n <= maximum) &&
    (above === undefined || n > above) &&
    (below === undefined || n < below);
  const said = numbers.findIndex(fits);
  if (said >= 0) return numbers.splice(said, 1)[0];
  if (!needed) return undefined;
  if (typeof schema.default === 'number') return schema.default;
  let n = minimum ?? (above === undefined ? 1 : above + 1);
  if (integer) n = Math.ceil(n);
  const top = maximum ?? (below === undefined ? undefined : below - 1);
  return top !== undefined && n > top ? top : n;
}

/** A name from the text (a capitalised run not opening it), else the words after a preposition, else the text. */
function stringFor(schema: JsonSchema, user: string): string {
  const text = user.trim();
  const names = [...text.matchAll(/(?<=\s)[A-Z][\p{L}'-]*(?:,?\s+[A-Z][\p{L}'-]*)*/gu)].map(
    (m) => m[0],
  );
  const after = /\b(?:in|for|to|about|of|on|at|called|named)\s+([^.?!,;]+)/i.exec(text)?.[1];
  let value = names[0] ?? after?.trim() ?? text.replace(/[.?!]+$/, '');
  const minLength = numberField(schema.minLength) ?? 0;
  const maxLength = numberField(schema.maxLength);
  if (maxLength !== undefined) value = value.slice(0, maxLength);
  if (value.length < minLength) value = value.padEnd(minLength, '.');
  return value;
}

function numbersIn(text: string): number[] {
  const out: number[] = [];
  for (const m of text.toLowerCase().matchAll(/-?\d+(?:\.\d+)?|[a-z]+/g)) {
    const token = m[0];
    if (/\d/.test(token)) out.push(Number(token));
    else if (token in NUMBER_WORDS) out.push(NUMBER_WORDS[token]!);
  }
  return out;
}

function firstBranch(schema: JsonSchema): JsonSchema {
  for (const key of ['anyOf', 'oneOf', 'allOf']) {
    const list = schema[key];
    if (Array.isArray(list)) {
      const branch = list.find((b) => isRecord(b) && b.type !== 'null');
      if (isRecord(branch)) return { ...schema, [key]: undefined, ...branch };
    }
  }
  return schema;
}

function typeOf(schema: JsonSchema): string | undefined {
  const t = schema.type;
  if (Array.isArray(t)) return t.find((x) => x !== 'null') as string | undefined;
  if (typeof t === 'string') return t;
  return isRecord(schema.properties) ? 'object' : undefined;
}

function properties(schema: JsonSchema): Record<string, JsonSchema> {
  const props = schema.properties;
  if (!isRecord(props)) return {};
  return Object.fromEntries(Object.entries(props).filter(([, v]) => isRecord(v))) as Record<
    string,
    JsonSchema
  >;
}

function enumOf(schema: JsonSchema): unknown[] {
  return Array.isArray(schema.enum) ? schema.enum : [];
}

function numberField(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
