/**
 * G.711 (ITU-T G.711): μ-law (`audio/pcmu`) and A-law (`audio/pcma`), the
 * telephone network's 8 kHz, one-byte-per-sample codecs. Each byte expands to
 * a 14-bit (μ-law) or 13-bit (A-law) sample, returned as PCM16; encoding
 * takes PCM16 and keeps the top bits, as the reference implementation (Sun's
 * `g711.c`) does, so a decoded byte encodes back to itself.
 */
import { base64ByteLength, checkBase64Decoded } from './pcm.js';

/** G.711's sample rate, in Hz. */
export const G711_SAMPLE_RATE = 8_000;

/** The two G.711 companding laws. */
export type G711Law = 'mulaw' | 'alaw';

/** μ-law's bias, added to the 14-bit magnitude before finding its segment. */
const MULAW_BIAS = 0x21;
/** Largest 14-bit magnitude μ-law encodes; larger ones clip to it. */
const MULAW_CLIP = 8_159;
/** A-law's even bits are inverted on the line. */
const ALAW_XOR = 0x55;

/** PCM16 for every μ-law byte. */
const MULAW_TO_PCM = new Int16Array(256);
/** PCM16 for every A-law byte. */
const ALAW_TO_PCM = new Int16Array(256);
for (let byte = 0; byte < 256; byte++) {
  MULAW_TO_PCM[byte] = mulawToPcm(byte);
  ALAW_TO_PCM[byte] = alawToPcm(byte);
}

function mulawToPcm(byte: number): number {
  const u = ~byte & 0xff;
  const exponent = (u >> 4) & 0x07;
  const magnitude = ((((u & 0x0f) << 3) + (MULAW_BIAS << 2)) << exponent) - (MULAW_BIAS << 2);
  return u & 0x80 ? -magnitude : magnitude;
}

function alawToPcm(byte: number): number {
  const a = byte ^ ALAW_XOR;
  const segment = (a & 0x70) >> 4;
  let magnitude = (a & 0x0f) << 4;
  if (segment === 0) magnitude += 8;
  else magnitude = (magnitude + 0x108) << (segment - 1);
  return a & 0x80 ? magnitude : -magnitude;
}

/**
 * One PCM16 sample as a μ-law byte.
 *
 * @example
 * pcmToMulaw(0); // 0xff
 */
export function pcmToMulaw(sample: number): number {
  // μ-law codes 14 bits; the floor of the shift keeps negative samples as the reference rounds them.
  let value = sample >> 2;
  let mask = 0xff;
  if (value < 0) {
    mask = 0x7f;
    value = -value;
  }
  if (value > MULAW_CLIP) value = MULAW_CLIP;
  value += MULAW_BIAS;
  let segment = 0;
  while (segment < 8 && value >= 0x40 << segment) segment++;
  if (segment >= 8) return 0x7f ^ mask;
  return ((segment << 4) | ((value >> (segment + 1)) & 0x0f)) ^ mask;
}

/**
 * One PCM16 sample as an A-law byte.
 *
 * @example
 * pcmToAlaw(0); // 0xd5
 */
export function pcmToAlaw(sample: number): number {
  // A-law codes 13 bits; the sign of the 16-bit sample decides the mask.
  let value = sample >> 3;
  let mask = 0xd5;
  if (value < 0) {
    mask = 0x55;
    value = -value - 1;
  }
  let segment = 0;
  while (segment < 8 && value >= 0x20 << segment) segment++;
  if (segment >= 8) return 0x7f ^ mask;
  const mantissa = segment < 2 ? (value >> 1) & 0x0f : (value >> segment) & 0x0f;
  return ((segment << 4) | mantissa) ^ mask;
}

/**
 * G.711 bytes as PCM16 samples at {@link G711_SAMPLE_RATE} (a standalone array).
 *
 * @example
 * decodeG711(new Uint8Array([0xff, 0x7f]), 'mulaw'); // Int16Array [0, 0]
 */
export function decodeG711(bytes: Uint8Array, law: G711Law): Int16Array {
  const table = law === 'mulaw' ? MULAW_TO_PCM : ALAW_TO_PCM;
  const out = new Int16Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) out[i] = table[bytes[i]!]!;
  return out;
}

/**
 * PCM16 samples (already at {@link G711_SAMPLE_RATE}) as G.711 bytes, one per sample.
 *
 * @example
 * encodeG711(new Int16Array([0, 0]), 'alaw'); // Uint8Array [0xd5, 0xd5]
 */
export function encodeG711(pcm: Int16Array, law: G711Law): Uint8Array {
  const encode = law === 'mulaw' ? pcmToMulaw : pcmToAlaw;
  const out = new Uint8Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = encode(pcm[i]!);
  return out;
}

/**
 * Base64 G.711 as the Realtime protocol carries it (`audio/pcmu`,
 * `audio/pcma`) into PCM16 at 8 kHz. Base64 is checked as strictly as PCM16's:
 * Node's decoder would skip characters it does not know and shift the audio.
 *
 * @example
 * const pcm8k = decodeG711Base64(event.audio, 'mulaw');
 */
export function decodeG711Base64(base64: string, law: G711Law): Int16Array {
  const name = law === 'mulaw' ? 'G.711 μ-law (audio/pcmu)' : 'G.711 A-law (audio/pcma)';
  const expected = base64ByteLength(base64, name);
  const bytes = Buffer.from(base64, 'base64');
  checkBase64Decoded(base64, bytes.length, expected, name, '8 kHz G.711 bytes');
  return decodeG711(bytes, law);
}
