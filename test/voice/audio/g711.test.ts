import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AudioFormatError } from '../../../src/errors.js';
import {
  decodeG711,
  decodeG711Base64,
  encodeG711,
  pcmToAlaw,
  pcmToMulaw,
} from '../../../src/voice/audio/g711.js';

/** Every PCM16 value, -32768 to 32767. */
function everySample(): Int16Array {
  return Int16Array.from({ length: 65_536 }, (_, i) => i - 32_768);
}

const EVERY_BYTE = Uint8Array.from({ length: 256 }, (_, i) => i);

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('G.711 μ-law', () => {
  it('decodes 0xFF and 0x7F (the two zeros) to 0 and encodes 0 as 0xFF', () => {
    expect([...decodeG711(new Uint8Array([0xff, 0x7f]), 'mulaw')]).toEqual([0, 0]);
    expect(pcmToMulaw(0)).toBe(0xff);
  });

  it('decodes the loudest codes to ±32124', () => {
    expect([...decodeG711(new Uint8Array([0x80, 0x00]), 'mulaw')]).toEqual([32_124, -32_124]);
  });

  it('encodes known samples as the reference does', () => {
    const samples = [0, -1, 1, 100, -100, 1000, -1000, 32_767, -32_768];
    expect(samples.map(pcmToMulaw)).toEqual([255, 126, 255, 242, 114, 206, 78, 128, 0]);
  });

  it('encodes every PCM16 value exactly as the reference implementation', () => {
    // The digest of Sun's g711.c linear2ulaw over -32768…32767 (CPython's audioop.lin2ulaw).
    expect(sha256(encodeG711(everySample(), 'mulaw'))).toBe(
      '81d633c9e6972a18c74a58720b96cb8ca0bdd096d4060b646dd708c3b846019a',
    );
  });

  it('encodes every decoded byte back to itself (0x7F, negative zero, becomes 0xFF)', () => {
    const back = encodeG711(decodeG711(EVERY_BYTE, 'mulaw'), 'mulaw');
    const expected = Uint8Array.from(EVERY_BYTE, (b) => (b === 0x7f ? 0xff : b));
    expect([...back]).toEqual([...expected]);
  });
});

describe('G.711 A-law', () => {
  it('decodes 0xD5 to 8 and encodes 0 as 0xD5', () => {
    expect([...decodeG711(new Uint8Array([0xd5, 0x55]), 'alaw')]).toEqual([8, -8]);
    expect(pcmToAlaw(0)).toBe(0xd5);
  });

  it('decodes the loudest codes to ±32256', () => {
    expect([...decodeG711(new Uint8Array([0xaa, 0x2a]), 'alaw')]).toEqual([32_256, -32_256]);
  });

  it('encodes known samples as the reference does', () => {
    const samples = [0, -1, 1, 100, -100, 1000, -1000, 32_767, -32_768];
    expect(samples.map(pcmToAlaw)).toEqual([213, 85, 213, 211, 83, 250, 122, 170, 42]);
  });

  it('encodes every PCM16 value exactly as the reference implementation', () => {
    // The digest of Sun's g711.c linear2alaw over -32768…32767 (CPython's audioop.lin2alaw).
    expect(sha256(encodeG711(everySample(), 'alaw'))).toBe(
      '38488f6fd710f4686360edc4d38639f96c491595ef93f8eb8d62d5e07ca6ce7b',
    );
  });

  it('encodes every decoded byte back to itself', () => {
    expect([...encodeG711(decodeG711(EVERY_BYTE, 'alaw'), 'alaw')]).toEqual([...EVERY_BYTE]);
  });
});

describe('G.711 round trip', () => {
  it('keeps a speech-level tone within the quantisation step of each law', () => {
    const tone = Int16Array.from({ length: 800 }, (_, i) =>
      Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 8000)),
    );
    for (const law of ['mulaw', 'alaw'] as const) {
      const back = decodeG711(encodeG711(tone, law), law);
      for (let i = 0; i < tone.length; i++) {
        // Steps are 1/16 of a segment: at most ~3.2% of the magnitude, at least a few units.
        expect(Math.abs(back[i]! - tone[i]!)).toBeLessThanOrEqual(
          Math.max(16, Math.abs(tone[i]!) / 16),
        );
      }
    }
  });
});

describe('decodeG711Base64', () => {
  it('reads one sample per byte', () => {
    const base64 = Buffer.from([0xff, 0x80, 0x00]).toString('base64');
    expect([...decodeG711Base64(base64, 'mulaw')]).toEqual([0, 32_124, -32_124]);
  });

  it('refuses base64 that is not standard, naming the format', () => {
    expect(() => decodeG711Base64('ab-_', 'mulaw')).toThrow(AudioFormatError);
    expect(() => decodeG711Base64('abc', 'alaw')).toThrow(/audio\/pcma.*multiple of 4/);
    expect(() => decodeG711Base64('a*cd', 'mulaw')).toThrow(/audio\/pcmu.*'\*' at offset 1/);
  });
});
