/**
 * Small PCM and text helpers shared by the TTS providers: engines hand out
 * raw little-endian bytes cut at arbitrary places, while Troupe passes mono
 * PCM16 as `Int16Array` around (float samples: `float32ToInt16` in `audio/pcm.ts`).
 */
import { endianness } from 'node:os';

/** Whether this machine stores `Int16Array` elements big-endian (the wire is little-endian). */
const HOST_IS_BIG_ENDIAN = endianness() === 'BE';

/**
 * Turns a byte stream of PCM16 LE, cut anywhere (HTTP chunks often have an
 * odd length), into whole samples: an odd last byte waits for the next chunk.
 *
 * @example
 * const carry = new Pcm16ByteCarry();
 * carry.push(new Uint8Array([1, 0, 2])); // Int16Array [1]
 * carry.push(new Uint8Array([0]));       // Int16Array [2]
 */
export class Pcm16ByteCarry {
  #odd: number | undefined;

  /** Adds bytes; returns the whole samples they complete (possibly none). */
  push(bytes: Uint8Array): Int16Array {
    const have = bytes.length + (this.#odd === undefined ? 0 : 1);
    const whole = have - (have % 2);
    // A fresh, aligned buffer: the chunk's own may start at an odd offset.
    const out = new Uint8Array(whole);
    let from = 0;
    if (this.#odd !== undefined && whole > 0) {
      out[0] = this.#odd;
      out.set(bytes.subarray(0, whole - 1), 1);
      from = whole - 1;
    } else {
      out.set(bytes.subarray(0, whole), 0);
      from = whole;
    }
    if (have % 2 === 1) this.#odd = bytes.length > from ? bytes[from] : this.#odd;
    else this.#odd = undefined;
    if (HOST_IS_BIG_ENDIAN) Buffer.from(out.buffer).swap16();
    return new Int16Array(out.buffer);
  }

  /** Whether a lone byte is waiting (at the end of a body, a truncated sample). */
  get pending(): boolean {
    return this.#odd !== undefined;
  }

  /** Forgets the waiting byte (at the end of one body, before the next). */
  reset(): void {
    this.#odd = undefined;
  }
}

/**
 * Splits text into words at runs of whitespace, dropping empty ones — the
 * granularity Kyutai's TTS wants its input in.
 *
 * @example
 * splitWords('  Hello,  there! '); // ['Hello,', 'there!']
 */
export function splitWords(text: string): string[] {
  return text.split(/\s+/u).filter((w) => w !== '');
}
