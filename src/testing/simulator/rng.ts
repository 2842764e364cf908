/**
 * Seeded randomness for the simulator: a small generator, so that the n-th
 * request of a seed always gets the same bytes, and the random strings that
 * ids are made of.
 */

/** A seeded random source in [0, 1). */
export type Rng = () => number;

/** mulberry32: tiny, fast and good enough for splitting and ids. */
export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  return function next(): number {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Alphabets that vendors' ids are made of. */
export const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
export const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
export const HEX = '0123456789abcdef';
export const DIGITS = '0123456789';

/** `length` characters drawn from `alphabet`. */
export function randomString(rng: Rng, alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[Math.floor(rng() * alphabet.length)];
  return out;
}

/** A random string shaped like a UUID (8-4-4-4-12 hex digits). */
export function uuidLike(rng: Rng): string {
  const h = (n: number): string => randomString(rng, HEX, n);
  return `${h(8)}-${h(4)}-${h(4)}-${h(4)}-${h(12)}`;
}
