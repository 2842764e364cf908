import { describe, expect, it } from 'vitest';
import { Pcm16ByteCarry, splitWords } from '../../../src/voice/tts/pcm.js';

/** PCM16 LE bytes of the given samples. */
function bytesOf(samples: number[]): Uint8Array {
  const buf = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => buf.writeInt16LE(s, i * 2));
  return new Uint8Array(buf);
}

describe('Pcm16ByteCarry', () => {
  it('gives back the same samples however the bytes are cut', () => {
    const samples = [0, 1, -1, 32767, -32768, 1234, -4321, 258];
    const bytes = bytesOf(samples);
    for (let size = 1; size <= bytes.length; size++) {
      const carry = new Pcm16ByteCarry();
      const out: number[] = [];
      for (let at = 0; at < bytes.length; at += size) {
        out.push(...carry.push(bytes.subarray(at, at + size)));
      }
      expect(out).toEqual(samples);
      expect(carry.pending).toBe(false);
    }
  });

  it('keeps an odd byte waiting until the next chunk completes it', () => {
    const carry = new Pcm16ByteCarry();
    const bytes = bytesOf([300, -2]);
    expect(Array.from(carry.push(bytes.subarray(0, 3)))).toEqual([300]);
    expect(carry.pending).toBe(true);
    expect(Array.from(carry.push(new Uint8Array(0)))).toEqual([]);
    expect(Array.from(carry.push(bytes.subarray(3)))).toEqual([-2]);
    expect(carry.pending).toBe(false);
  });

  it('reads chunks that start at an odd offset of their buffer', () => {
    const backing = new Uint8Array(7);
    backing.set(bytesOf([7, -7, 99]), 1);
    expect(Array.from(new Pcm16ByteCarry().push(backing.subarray(1)))).toEqual([7, -7, 99]);
  });
});

describe('splitWords', () => {
  it('splits at runs of whitespace and drops empty words', () => {
    expect(splitWords('  Hello,\n there!  How\tare you? ')).toEqual([
      'Hello,',
      'there!',
      'How',
      'are',
      'you?',
    ]);
    expect(splitWords('   ')).toEqual([]);
  });
});
