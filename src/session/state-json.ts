/**
 * A character's `ctx.session.state` as the resume store keeps it: JSON. A
 * handler may put anything there; what JSON cannot carry (a BigInt, a
 * circular reference) would make every save of the session throw, so the
 * conversation could not be resumed at all, and what JSON mangles without a
 * word (a Map or Set becomes `{}`) would come back empty. Such values are
 * left out of the saved copy, each named once, and the rest is kept.
 */
import type { Logger } from 'pino';

/** How deep a state may nest before the rest is left out (JSON.stringify's own stack is the limit). */
export const MAX_STATE_DEPTH = 64;

/** A value left out of the saved state: where (`quiz.rounds[2]`) and what it was. */
export interface LeftOut {
  path: string;
  kind: string;
}

/**
 * A copy of `state` that JSON carries whole, and what was left out of it.
 * Values with a `toJSON` (a Date) are kept as JSON keeps them.
 *
 * @example jsonState({ n: 1, big: 10n }) // { value: { n: 1 }, leftOut: [{ path: 'big', kind: 'a BigInt' }] }
 */
export function jsonState(state: Record<string, unknown>): {
  value: Record<string, unknown>;
  leftOut: LeftOut[];
} {
  const leftOut: LeftOut[] = [];
  const open = new Set<object>();
  const copy = (v: unknown, path: string, depth: number): unknown => {
    const problem = (kind: string) => {
      leftOut.push({ path, kind });
      return undefined;
    };
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return v;
      case 'number':
        return Number.isFinite(v) ? v : problem(String(v));
      case 'undefined':
        return undefined;
      case 'bigint':
        return problem('a BigInt');
      case 'symbol':
        return problem('a Symbol');
      case 'function':
        return problem('a function');
    }
    if (v === null) return null;
    const o = v as object;
    if (typeof (o as { toJSON?: unknown }).toJSON === 'function') {
      return copy((o as { toJSON: () => unknown }).toJSON(), path, depth);
    }
    if (o instanceof Map || o instanceof Set) return problem(`a ${o.constructor.name}`);
    if (open.has(o)) return problem('a circular reference');
    if (depth >= MAX_STATE_DEPTH) return problem(`nested over ${MAX_STATE_DEPTH} levels`);
    open.add(o);
    let out: unknown;
    if (Array.isArray(o)) {
      // JSON keeps an array's places: what cannot be kept is null there.
      out = o.map((item, i) => copy(item, `${path}[${i}]`, depth + 1) ?? null);
    } else {
      const fields: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(o)) {
        const kept = copy(item, path === '' ? key : `${path}.${key}`, depth + 1);
        if (kept !== undefined) fields[key] = kept;
      }
      out = fields;
    }
    open.delete(o);
    return out;
  };
  return { value: copy(state, '', 0) as Record<string, unknown>, leftOut };
}

/** The character states of a session as the store keeps them. */
export interface CharacterStates {
  characterState: Record<string, unknown>;
  characterStates?: Record<string, Record<string, unknown>>;
}

/**
 * Keeps a session's character states as JSON carries them (the serving
 * character's, and those put aside by handoffs), warning once per session
 * and place of each value it leaves out.
 */
export class StateSaver {
  readonly #told = new Set<string>();

  save(states: CharacterStates, serving: string, log: Logger): CharacterStates {
    const save = (state: Record<string, unknown>, character: string) => {
      const { value, leftOut } = jsonState(state);
      for (const { path, kind } of leftOut) {
        const key = `${character}\n${path}`;
        if (this.#told.has(key)) continue;
        this.#told.add(key);
        log.warn(
          { stateOf: character, key: path, kind },
          'ctx.session.state holds a value JSON cannot keep: a resumed session will not have it',
        );
      }
      return value;
    };
    const saved: CharacterStates = { characterState: save(states.characterState, serving) };
    if (states.characterStates !== undefined) {
      saved.characterStates = Object.fromEntries(
        Object.entries(states.characterStates).map(([id, s]) => [id, save(s, id)]),
      );
    }
    return saved;
  }
}
