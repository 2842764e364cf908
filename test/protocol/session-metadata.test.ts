import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../src/errors.js';
import { parseClientEvent } from '../../src/protocol/index.js';
import {
  MAX_SESSION_METADATA_BYTES,
  metadataParam,
  metadataProblem,
} from '../../src/protocol/session-metadata.js';

const url = (query: string): URL => new URL(`ws://127.0.0.1/v1/realtime?${query}`);
const encoded = (value: unknown): string => encodeURIComponent(JSON.stringify(value));
const keys = (n: number): Record<string, string> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));

describe('a session metadata value', () => {
  it('is taken as a JSON object within the limits', () => {
    expect(metadataProblem({})).toBeUndefined();
    expect(metadataProblem({ userName: 'Ada', plan: { tier: 'pro', seats: [1, 2] } })).toBe(
      undefined,
    );
    expect(metadataProblem(keys(16))).toBeUndefined();
    expect(metadataProblem({ ['k'.repeat(64)]: 1 })).toBeUndefined();
  });

  it('is refused when it is not an object, saying what is expected', () => {
    for (const value of [null, 'Ada', 3, ['Ada']]) {
      expect(metadataProblem(value)).toMatch(/^expected a JSON object/);
    }
  });

  it('is refused past 16 keys, a key past 64 characters or empty, 8 levels, or 4 KiB', () => {
    expect(metadataProblem(keys(17))).toBe('expected at most 16 keys (it has 17)');
    expect(metadataProblem({ ['k'.repeat(65)]: 1 })).toMatch(/keys of 1 to 64 characters/);
    expect(metadataProblem({ '': 1 })).toMatch(/keys of 1 to 64 characters \(one has 0\)/);
    let deep: unknown = 'x';
    for (let i = 0; i < 8; i++) deep = { d: deep };
    expect(metadataProblem(deep)).toBeUndefined();
    expect(metadataProblem({ d: deep })).toMatch(/nested at most 8 levels/);
    // Bytes, not characters: "é" is two.
    const big = { note: 'é'.repeat(MAX_SESSION_METADATA_BYTES / 2) };
    expect(metadataProblem(big)).toMatch(/at most 4096 bytes as JSON \(it has 4107\)/);
  });
});

describe('?metadata=', () => {
  it('gives the object it encodes, or nothing when absent', () => {
    expect(metadataParam(url(`metadata=${encoded({ userName: 'Ada' })}`))).toEqual({
      userName: 'Ada',
    });
    expect(metadataParam(url('character=hello'))).toBeUndefined();
  });

  it('is refused naming the parameter, without repeating the value', () => {
    for (const query of [
      'metadata=%7Bnot-json',
      `metadata=${encoded(['Ada-secret'])}`,
      `metadata=${encoded(keys(17))}`,
    ]) {
      const error = metadataParam(url(query));
      expect(error).toBeInstanceOf(ProtocolError);
      expect((error as ProtocolError).payload).toMatchObject({
        code: 'invalid_metadata',
        param: 'metadata',
        message: expect.stringMatching(/^\?metadata=: expected .*URL-encoded JSON object/),
      });
      expect((error as ProtocolError).message).not.toContain('Ada-secret');
    }
  });
});

describe('session.update session.troupe.metadata', () => {
  const update = (metadata: unknown) =>
    parseClientEvent(
      JSON.stringify({ type: 'session.update', session: { troupe: { metadata } } }),
      'openai',
    );

  it('parses into the update', () => {
    expect(update({ userName: 'Ada' })).toMatchObject({
      ok: true,
      event: { type: 'session.update', session: { metadata: { userName: 'Ada' } } },
    });
  });

  it('is refused with the same limits, naming the field', () => {
    const refused = update(keys(17));
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.error.payload).toMatchObject({
      code: 'invalid_value',
      param: 'session.troupe.metadata',
      message: expect.stringContaining('expected at most 16 keys (it has 17)'),
    });
  });
});
