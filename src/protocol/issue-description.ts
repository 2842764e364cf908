/**
 * Turns zod's first issue with a client event into what the client is told:
 * a wire error code, the dotted path of the field, and a sentence naming
 * what was expected and what came, with unions narrowed to the branch the
 * client meant.
 */
import type { z } from 'zod';
import { formatPath, preview, valueAt } from '../tools/preview.js';

/** The first zod issue as a wire code, a dotted path and a sentence. */
export function describeIssue(
  first: z.core.$ZodIssue,
  input: Record<string, unknown>,
): { code: string; param: string; message: string } {
  const issue = narrowUnion(first, input);
  if (issue.code === 'unrecognized_keys') {
    const param = formatPath([...issue.path, issue.keys[0]!]);
    return {
      code: 'unknown_parameter',
      param,
      message: `${param}: unknown parameter${issue.keys.length > 1 ? ` (also ${issue.keys.slice(1).join(', ')})` : ''}.`,
    };
  }
  const param = formatPath(issue.path);
  const value = valueAt(input, issue.path);
  // Whatever the check (a type, a union's discriminator), nothing there means a missing field.
  if (value === undefined) {
    return {
      code: 'missing_required_parameter',
      param,
      message: `${param}: missing required parameter.`,
    };
  }
  return {
    code: 'invalid_value',
    param,
    message: `${param}: ${issue.message}, got ${preview(value)}.`,
  };
}

/**
 * A union reports "Invalid input" for the whole value; the client needs the
 * field that is wrong in the branch it meant. That branch is the one whose
 * kind (object or not) and `type` match the input; with exactly one such
 * branch, its first issue is reported instead (descending nested unions).
 * When no branch takes the `type`, the issue is the `type`, naming those taken.
 */
function narrowUnion(issue: z.core.$ZodIssue, input: unknown): z.core.$ZodIssue {
  let current = issue;
  while (current.code === 'invalid_union' && current.errors.length > 0) {
    const value = valueAt(input, current.path);
    const isObject = value !== null && typeof value === 'object' && !Array.isArray(value);
    const wrongKind = (e: z.core.$ZodIssue): boolean =>
      e.path.length === 0 &&
      (isObject ? e.code !== 'unrecognized_keys' : e.code === 'invalid_type');
    const wrongType = (e: z.core.$ZodIssue): boolean =>
      isObject && e.path.length === 1 && e.path[0] === 'type' && e.code === 'invalid_value';
    let viable = current.errors.filter((errs) => !errs.some((e) => wrongKind(e) || wrongType(e)));
    if (viable.length > 1) {
      // A value of the right kind that is not the literal of another branch (0 for a
      // token limit that also takes "inf") is about the branch with a real check.
      const checked = viable.filter(
        (errs) => !errs.every((e) => e.path.length === 0 && e.code === 'invalid_value'),
      );
      if (checked.length === 1) viable = checked;
    }
    if (viable.length === 1 && viable[0]!.length > 0) {
      const inner = viable[0]![0]!;
      current = { ...inner, path: [...current.path, ...inner.path] } as z.core.$ZodIssue;
      continue;
    }
    if (viable.length === 0 && isObject) {
      const types = current.errors.flatMap((errs) =>
        errs.flatMap((e) => (wrongType(e) && e.code === 'invalid_value' ? e.values : [])),
      );
      if (types.length > 0) {
        const message = `expected one of ${types.map((t) => JSON.stringify(t)).join(', ')}`;
        const path = [...current.path, 'type'];
        return { code: 'invalid_value', values: types, path, message };
      }
    }
    break;
  }
  return current;
}
