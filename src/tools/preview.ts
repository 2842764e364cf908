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
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
