import { z } from 'zod';

/**
 * A short, readable rendering of a wrong value for an error message: JSON cut
 * to 60 characters, and words for what JSON cannot show (functions, schemas).
 *
 * @example preview('kelvin') // '"kelvin"'
 */
export function preview(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'function') return 'a function';
  if (value instanceof z.ZodType) return 'a zod schema';
  if (value instanceof Map) return 'a Map';
  if (typeof value === 'bigint' || typeof value === 'symbol') return String(value);
  // JSON.parse reads 1e400 as Infinity, which JSON.stringify writes as null.
  if (typeof value === 'number' && !Number.isFinite(value)) return `${value} (a number too large)`;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * A field path as people write it: `tools[0].function.name`; keys that are
 * not identifiers are quoted (`headers["x-id"]`).
 *
 * @example formatPath(['item', 'content', 0, 'text']) // 'item.content[0].text'
 */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_$][\w$]*$/.test(key)) {
      out += out ? `.${key}` : key;
    } else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

/** The value at a (zod issue) path inside `input`; undefined when absent. */
export function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = input;
  for (const key of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[key];
  }
  return cur;
}
