import { describe, expect, it } from 'vitest';
import { MAX_STATE_DEPTH, jsonState } from '../../src/session/state-json.js';

describe('jsonState', () => {
  it('keeps what JSON keeps, as JSON keeps it', () => {
    const state = { a: 1, b: 'x', c: [true, null, undefined], d: { e: new Date(0) }, f: undefined };
    const { value, leftOut } = jsonState(state);
    expect(value).toEqual(JSON.parse(JSON.stringify(state)));
    expect(leftOut).toEqual([]);
  });

  it('leaves out, and names, what JSON cannot keep or would empty', () => {
    const shared = { n: 1 };
    const { value, leftOut } = jsonState({
      nan: NaN,
      inf: -Infinity,
      fn: () => 1,
      sym: Symbol('s'),
      set: new Set([1]),
      twice: [shared, shared],
    });
    // The same object twice is no cycle: both places keep it.
    expect(value).toEqual({ twice: [{ n: 1 }, { n: 1 }] });
    expect(leftOut).toEqual([
      { path: 'nan', kind: 'NaN' },
      { path: 'inf', kind: '-Infinity' },
      { path: 'fn', kind: 'a function' },
      { path: 'sym', kind: 'a Symbol' },
      { path: 'set', kind: 'a Set' },
    ]);
  });

  it(`stops at ${MAX_STATE_DEPTH} levels`, () => {
    const deep: Record<string, unknown> = {};
    let at = deep;
    for (let i = 0; i < MAX_STATE_DEPTH + 5; i++) at = at.next = {};
    const { leftOut } = jsonState(deep);
    expect(leftOut).toHaveLength(1);
    expect(leftOut[0]!.kind).toBe(`nested over ${MAX_STATE_DEPTH} levels`);
    expect(leftOut[0]!.path.split('.')).toHaveLength(MAX_STATE_DEPTH);
  });
});
