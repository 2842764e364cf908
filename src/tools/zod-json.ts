/**
 * Turning a zod tool's parameters into the JSON Schema the model is shown,
 * and finding the fields that JSON cannot carry (a `z.date()` is shown as
 * `{}`, and the string the model sends for it never parses).
 */
import { z } from 'zod';

/** A field of a zod tool's parameters that JSON cannot carry. */
export interface UnrepresentableField {
  /** The field's path inside the parameters (`['trip', 'when']`); empty for the object itself. */
  path: PropertyKey[];
  /** Where inside the field, when not the field itself: `its items`, `its values`, `one of its options`. */
  within: string | undefined;
  /** The zod type as written: `z.date()`. */
  written: string;
  /** What to write instead. */
  advice: string;
}

/** The zod type as an author writes it, and what to write instead, by zod's `def.type`. */
const ADVICE: Record<string, { written: string; advice: string }> = {
  date: {
    written: 'z.date()',
    advice:
      'use z.iso.datetime() (or z.iso.date()) for an ISO date string, or z.number() for epoch milliseconds, and make the Date in the handler (z.coerce.date() also works)',
  },
  bigint: {
    written: 'z.bigint()',
    advice: 'use z.int() for a whole number, or z.string() for digits too long for a number',
  },
  map: {
    written: 'z.map()',
    advice: 'use z.record(z.string(), …) for an object of keys to values',
  },
  set: { written: 'z.set()', advice: 'use z.array(…) (make the Set in the handler)' },
  symbol: { written: 'z.symbol()', advice: 'use z.string() or z.enum([…])' },
  function: { written: 'z.function()', advice: 'remove it: a model cannot send a function' },
  undefined: { written: 'z.undefined()', advice: 'make the field .optional() instead' },
  void: { written: 'z.void()', advice: 'make the field .optional() instead' },
  literal: {
    written: 'a z.literal() of undefined or a bigint',
    advice: 'use .optional() for undefined, or a number literal',
  },
  nan: { written: 'z.nan()', advice: 'use z.number()' },
  custom: {
    written: 'z.custom() (or z.instanceof())',
    advice:
      'use a JSON type (z.string(), z.number(), z.object({ … }) …) with .refine() for the check',
  },
  transform: {
    written: 'z.transform() on its own',
    advice: 'put it after a JSON type: z.string().transform(…)',
  },
};

const GENERIC = {
  written: 'a zod type with no JSON form',
  advice: 'use a JSON type: z.string(), z.number(), z.boolean(), z.array(…), z.object({ … })',
};

/**
 * Converts with zod 4's `z.toJSONSchema` (in `input` form: what the model may
 * send), calling `onUnrepresentable` for each part that has no JSON Schema.
 */
function convert(
  schema: z.ZodType,
  onUnrepresentable?: (field: UnrepresentableField) => void,
): Record<string, unknown> {
  return z.toJSONSchema(schema, {
    // `io: 'input'` keeps defaulted fields optional, which is what the model may send.
    io: 'input',
    unrepresentable: ({ zodSchema, path }) => {
      const def = zodSchema._zod.def as { type: string; coerce?: boolean };
      // A coerced date or bigint takes a string or a number, so it has a JSON form after all.
      if (def.coerce && def.type === 'date') return { type: 'string', format: 'date-time' };
      if (def.coerce && def.type === 'bigint') return { type: 'integer' };
      onUnrepresentable?.({ ...fieldPath(path), ...(ADVICE[def.type] ?? GENERIC) });
      return 'any';
    },
  }) as Record<string, unknown>;
}

/** A JSON Schema path (`properties.trip.properties.when`) as the field path an author reads. */
function fieldPath(
  jsonPath: readonly (string | number)[],
): Pick<UnrepresentableField, 'path' | 'within'> {
  const path: PropertyKey[] = [];
  let within: string | undefined;
  for (let i = 0; i < jsonPath.length; i++) {
    const key = jsonPath[i];
    if (key === 'properties' && i + 1 < jsonPath.length) {
      path.push(jsonPath[++i]!);
      within = undefined;
    } else if (key === 'items' || key === 'prefixItems') within ??= 'its items';
    else if (key === 'additionalProperties') within ??= 'its values';
    else if (key === 'anyOf' || key === 'oneOf' || key === 'allOf') {
      within ??= 'one of its options';
    }
  }
  return { path, within };
}

/** The JSON Schema (OpenAI function `parameters`) of a zod object schema. */
export function zodToParameters(schema: z.ZodType): Record<string, unknown> {
  const json = convert(schema);
  delete json.$schema;
  return json;
}

/**
 * The fields of a zod schema that JSON cannot carry: the model would be
 * shown `{}` for them and no value it sends would pass. Empty when every
 * field can be sent.
 *
 * @example
 * unrepresentableFields(z.object({ when: z.date() }))
 * // [{ path: ['when'], within: undefined, written: 'z.date()', advice: 'use z.iso.datetime() …' }]
 */
export function unrepresentableFields(schema: z.ZodType): UnrepresentableField[] {
  const found: UnrepresentableField[] = [];
  convert(schema, (field) => found.push(field));
  return found;
}
