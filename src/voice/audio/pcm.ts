/**
 * Raw PCM16: base64 frames as the Realtime protocol carries them, conversions
 * to and from float, and RIFF/WAVE files. Audio inside Troupe is mono PCM16 in
 * a standalone `Int16Array` (its own `ArrayBuffer`, offset 0), because some
 * consumers (the WASM VAD, worker `postMessage`) copy or transfer the whole
 * underlying buffer.
 */
import { AudioFormatError } from '../../errors.js';

/** The Realtime protocol's PCM16 sample rate, in Hz. */
export const PCM16_SAMPLE_RATE = 24_000;

/** Bytes in one PCM16 sample. */
const BYTES_PER_SAMPLE = 2;
/** Scratch buffers larger than this (bytes) are not kept between pushes, so one huge frame doesn't pin memory. */
const MAX_RETAINED_SCRATCH_BYTES = 1 << 20;
/** Size of the canonical 44-byte WAV header {@link writeWav} writes, in bytes. */
const WAV_HEADER_BYTES = 44;
/** WAVE `fmt ` format tags. */
const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_IEEE_FLOAT = 0x0003;
const WAVE_FORMAT_ALAW = 0x0006;
const WAVE_FORMAT_MULAW = 0x0007;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;
/** Data chunk lengths that writers use as "unknown, read to the end" (streamed WAV). */
const WAV_LENGTH_PLACEHOLDERS = new Set([0, 0xffffffff, 0x7fffffff]);

/**
 * Whether this machine stores integers little-endian. PCM16 on the wire is
 * little-endian, so on a big-endian host every sample is byte-swapped.
 */
const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Swaps the bytes of every sample, in place (big-endian hosts only). */
function swapBytes16(bytes: Uint8Array): void {
  for (let i = 0; i + 1 < bytes.length; i += 2) {
    const b = bytes[i]!;
    bytes[i] = bytes[i + 1]!;
    bytes[i + 1] = b;
  }
}

/** Describes where a base64 string first breaks the standard alphabet (error path only). */
function describeBadBase64(base64: string): string {
  const bad = /[^A-Za-z0-9+/=]/.exec(base64);
  if (bad) {
    const code = bad[0].codePointAt(0) ?? 0;
    const shown =
      code >= 0x21 && code <= 0x7e
        ? `'${bad[0]}'`
        : `U+${code.toString(16).padStart(4, '0').toUpperCase()}`;
    const hint =
      bad[0] === '-' || bad[0] === '_'
        ? ' (that is base64url; send standard base64 with + and /)'
        : /\s/.test(bad[0])
          ? ' (send base64 without line breaks or spaces)'
          : '';
    return `character ${shown} at offset ${bad.index} is not in the base64 alphabet${hint}`;
  }
  const firstPad = base64.indexOf('=');
  return `'=' padding appears at offset ${firstPad}, before the end of the string or more than twice`;
}

/**
 * The bytes a base64 audio string promises (its length's, less padding),
 * once it is a string whose length is a multiple of 4; throws
 * `AudioFormatError` naming `name` (the format) otherwise.
 */
export function base64ByteLength(base64: unknown, name: string): number {
  if (typeof base64 !== 'string') {
    throw new AudioFormatError(
      `${name} audio must be a base64 string, got ${base64 === null ? 'null' : typeof base64}.`,
    );
  }
  const length = base64.length;
  if (length % 4 !== 0) {
    throw new AudioFormatError(
      `Invalid base64 ${name} audio: its length (${length}) is not a multiple of 4. Send padded standard base64 (RFC 4648 §4).`,
    );
  }
  const padding =
    length === 0 ? 0 : base64[length - 1] === '=' ? (base64[length - 2] === '=' ? 2 : 1) : 0;
  return (length / 4) * 3 - padding;
}

/**
 * Throws `AudioFormatError` unless Node's decoder wrote the bytes `base64`
 * promised. Cheap strictness: Node skips unknown characters and stops at an
 * early '=', both of which yield fewer bytes than the length promises. It
 * accepts the base64url letters, so those are looked for separately.
 * `holding` says what the bytes are, for the message.
 */
export function checkBase64Decoded(
  base64: string,
  written: number,
  expected: number,
  name: string,
  holding: string,
): void {
  if (written !== expected || base64.includes('-') || base64.includes('_')) {
    throw new AudioFormatError(
      `Invalid base64 ${name} audio: ${describeBadBase64(base64)}. Send standard padded base64 of ${holding}.`,
    );
  }
}

/**
 * Turns base64 PCM16 (little-endian, mono) into samples, frame after frame.
 * Clients split audio anywhere, so an odd trailing byte is kept and joined to
 * the next push rather than rejected. Base64 is checked strictly: Node's own
 * decoder silently skips characters it does not know, which would turn junk
 * into shifted, noisy audio.
 *
 * @example
 * ```ts
 * const decoder = new Pcm16Decoder();
 * const samples = decoder.push(event.audio); // Int16Array at PCM16_SAMPLE_RATE
 * ```
 */
export class Pcm16Decoder {
  /** The odd byte left over from the previous push, or -1. */
  #carry = -1;
  #scratch: Buffer = Buffer.allocUnsafeSlow(0);

  /** Bytes carried to the next push (0 or 1). */
  get pendingBytes(): number {
    return this.#carry < 0 ? 0 : 1;
  }

  /**
   * Decodes one base64 frame. Returns the whole samples available so far (a
   * standalone, aligned array; empty when the frame held a single byte).
   * Throws `AudioFormatError` on invalid base64; the carried byte is kept.
   */
  push(base64: string): Int16Array {
    const expected = base64ByteLength(base64, 'PCM16');
    const length = base64.length;
    const carryBytes = this.#carry < 0 ? 0 : 1;
    const needed = carryBytes + expected + 3; // +3: room to notice a decoder that writes more than expected
    if (this.#scratch.length < needed) this.#scratch = Buffer.allocUnsafeSlow(needed);
    const scratch = this.#scratch;
    const written = length === 0 ? 0 : scratch.write(base64, carryBytes, 'base64');
    checkBase64Decoded(base64, written, expected, 'PCM16', 'little-endian 16-bit samples');
    if (carryBytes) scratch[0] = this.#carry;
    const total = carryBytes + expected;
    const samples = total >> 1;
    const out = new Int16Array(samples);
    const outBytes = new Uint8Array(out.buffer);
    outBytes.set(scratch.subarray(0, samples * BYTES_PER_SAMPLE));
    if (!HOST_IS_LITTLE_ENDIAN) swapBytes16(outBytes);
    this.#carry = total % 2 === 1 ? scratch[total - 1]! : -1;
    if (scratch.length > MAX_RETAINED_SCRATCH_BYTES) this.#scratch = Buffer.allocUnsafeSlow(0);
    return out;
  }

  /** Drops a carried odd byte (e.g. when the client clears its input buffer). */
  reset(): void {
    this.#carry = -1;
  }
}

/**
 * Encodes samples as base64 PCM16 little-endian.
 *
 * @example
 * ```ts
 * send({ type: 'response.output_audio.delta', delta: encodePcm16Base64(pcm) });
 * ```
 */
export function encodePcm16Base64(pcm: Int16Array): string {
  if (HOST_IS_LITTLE_ENDIAN) {
    return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');
  }
  const copy = Buffer.from(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  swapBytes16(copy);
  return copy.toString('base64');
}

/**
 * PCM16 to float in [-1, 1): divides by 32768, the inverse of {@link float32ToInt16}.
 *
 * @example
 * ```ts
 * kyutai.send({ type: 'Audio', pcm: Array.from(int16ToFloat32(pcm)) });
 * ```
 */
export function int16ToFloat32(pcm: Int16Array): Float32Array {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i]! / 32768;
  return out;
}

/**
 * Float samples to PCM16: scales by 32768, rounds, clamps to the int16 range
 * (so 1.0 becomes 32767) and turns NaN into 0.
 *
 * @example
 * ```ts
 * const pcm = float32ToInt16(message.pcm); // Kyutai TTS float32 → PCM16
 * ```
 */
export function float32ToInt16(f: ArrayLike<number>): Int16Array {
  const n = f.length;
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const v = Math.round(f[i]! * 32768);
    // NaN fails both comparisons and falls through to `| 0`, which makes it 0.
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v | 0;
  }
  return out;
}

/**
 * Joins PCM chunks into one array (the chunk itself when there is only one).
 *
 * @example
 * concatPcm([new Int16Array([1]), new Int16Array([2, 3])]); // Int16Array [1, 2, 3]
 */
export function concatPcm(
  chunks: readonly Int16Array[],
  samples = chunks.reduce((n, c) => n + c.length, 0),
): Int16Array {
  if (chunks.length === 1 && chunks[0]!.length === samples) return chunks[0]!;
  const out = new Int16Array(samples);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** Duration of `samples` at `sampleRate`, in ms. */
export function samplesToMs(samples: number, sampleRate: number): number {
  return (samples * 1000) / sampleRate;
}

/** What {@link readWav} found. */
export interface WavAudio {
  /** The file's sample rate, in Hz. */
  sampleRate: number;
  /** Channels in the file (the returned `pcm` is always mono). */
  channels: number;
  /** Mono samples (channels averaged). */
  pcm: Int16Array;
}

/** Reads a four-character chunk id for messages. */
function fourCc(view: DataView, offset: number): string {
  let s = '';
  for (let i = 0; i < 4; i++) {
    const c = view.getUint8(offset + i);
    s += c >= 0x20 && c <= 0x7e ? String.fromCharCode(c) : `\\x${c.toString(16).padStart(2, '0')}`;
  }
  return s;
}

/** Names a WAVE format tag for messages. */
function formatName(tag: number): string {
  switch (tag) {
    case WAVE_FORMAT_PCM:
      return 'integer PCM';
    case WAVE_FORMAT_IEEE_FLOAT:
      return 'IEEE float';
    case WAVE_FORMAT_ALAW:
      return 'A-law';
    case WAVE_FORMAT_MULAW:
      return 'µ-law';
    default:
      return `format tag 0x${tag.toString(16).padStart(4, '0')}`;
  }
}

/**
 * Reads a RIFF/WAVE file of 16-bit integer PCM (any rate, any channel count,
 * mixed down to mono). Unknown chunks are skipped; a data length of 0,
 * 0xFFFFFFFF or one past the end (streamed WAV, e.g. `espeak-ng --stdout`)
 * means "to the end of the file". Anything else throws `AudioFormatError`
 * naming what was found.
 *
 * @example
 * ```ts
 * const { sampleRate, pcm } = readWav(await readFile('utt.wav'));
 * const pcm16k = resample(pcm, sampleRate, 16_000);
 * ```
 */
export function readWav(data: Uint8Array): WavAudio {
  if (!(data instanceof Uint8Array)) {
    throw new AudioFormatError('readWav takes the file bytes as a Uint8Array (or Buffer).');
  }
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (data.length < 12) {
    throw new AudioFormatError(
      `Not a WAV file: ${data.length} bytes is shorter than a RIFF header (12 bytes). Send a RIFF/WAVE file of 16-bit PCM.`,
    );
  }
  const riff = fourCc(view, 0);
  const wave = fourCc(view, 8);
  if (riff !== 'RIFF' || wave !== 'WAVE') {
    const what =
      riff === 'RF64' || riff === 'RIFX'
        ? `a ${riff} file (not supported)`
        : `'${riff}'…'${wave}' instead of 'RIFF'…'WAVE'`;
    throw new AudioFormatError(
      `Not a WAV file: found ${what}. Send a little-endian RIFF/WAVE file of 16-bit PCM.`,
    );
  }

  let fmt: { channels: number; sampleRate: number; blockAlign: number } | undefined;
  let offset = 12;
  while (offset + 8 <= data.length) {
    const id = fourCc(view, offset);
    const size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + 16 > data.length) {
        throw new AudioFormatError(
          `Broken WAV file: the 'fmt ' chunk is ${Math.min(size, data.length - body)} bytes, fewer than the 16 it needs.`,
        );
      }
      let tag = view.getUint16(body, true);
      const channels = view.getUint16(body + 2, true);
      const sampleRate = view.getUint32(body + 4, true);
      const blockAlign = view.getUint16(body + 12, true);
      const bits = view.getUint16(body + 14, true);
      if (tag === WAVE_FORMAT_EXTENSIBLE && size >= 40 && body + 26 <= data.length) {
        // WAVE_FORMAT_EXTENSIBLE keeps the real format in the first two bytes of its SubFormat GUID.
        tag = view.getUint16(body + 24, true);
      }
      if (tag !== WAVE_FORMAT_PCM || bits !== 16) {
        throw new AudioFormatError(
          `Unsupported WAV audio: ${bits}-bit ${formatName(tag)}. Only 16-bit integer PCM WAV is supported; convert it first (e.g. sox in.wav -b 16 -e signed-integer out.wav).`,
        );
      }
      if (channels < 1 || sampleRate < 1 || blockAlign !== channels * BYTES_PER_SAMPLE) {
        throw new AudioFormatError(
          `Broken WAV file: 'fmt ' says ${channels} channel(s) at ${sampleRate} Hz with ${blockAlign}-byte frames, which does not add up for 16-bit PCM.`,
        );
      }
      fmt = { channels, sampleRate, blockAlign };
    } else if (id === 'data') {
      if (!fmt) {
        throw new AudioFormatError(
          "Broken WAV file: the 'data' chunk comes before 'fmt ', so its format is unknown.",
        );
      }
      const toEnd = data.length - body;
      const length = WAV_LENGTH_PLACEHOLDERS.has(size) || size > toEnd ? toEnd : size;
      return {
        sampleRate: fmt.sampleRate,
        channels: fmt.channels,
        pcm: mixToMono(data, body, length, fmt.channels),
      };
    }
    // Chunks are padded to an even length.
    offset = body + size + (size & 1);
  }
  throw new AudioFormatError(
    fmt
      ? "Broken WAV file: no 'data' chunk after 'fmt '; the file holds no audio."
      : "Broken WAV file: no 'fmt ' chunk was found.",
  );
}

/** Averages interleaved 16-bit frames to mono; a partial trailing frame is dropped. */
function mixToMono(data: Uint8Array, start: number, length: number, channels: number): Int16Array {
  const frames = Math.floor(length / (channels * BYTES_PER_SAMPLE));
  const out = new Int16Array(frames);
  const view = new DataView(
    data.buffer,
    data.byteOffset + start,
    frames * channels * BYTES_PER_SAMPLE,
  );
  if (channels === 1) {
    if (HOST_IS_LITTLE_ENDIAN) {
      new Uint8Array(out.buffer).set(data.subarray(start, start + frames * BYTES_PER_SAMPLE));
    } else {
      for (let i = 0; i < frames; i++) out[i] = view.getInt16(i * 2, true);
    }
    return out;
  }
  let p = 0;
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++, p += 2) sum += view.getInt16(p, true);
    out[i] = Math.round(sum / channels);
  }
  return out;
}

/**
 * Writes mono PCM16 as a canonical 44-byte-header WAV file.
 *
 * @example
 * ```ts
 * await writeFile('reply.wav', writeWav(pcm, 24_000));
 * ```
 */
export function writeWav(pcm: Int16Array, sampleRate: number): Uint8Array {
  if (!Number.isInteger(sampleRate) || sampleRate < 1 || sampleRate > 0xffffffff) {
    throw new AudioFormatError(
      `Cannot write a WAV file at ${sampleRate} Hz: the sample rate must be a positive integer.`,
    );
  }
  const dataBytes = pcm.length * BYTES_PER_SAMPLE;
  const out = new Uint8Array(WAV_HEADER_BYTES + dataBytes);
  const view = new DataView(out.buffer);
  const ascii = (offset: number, text: string): void => {
    for (let i = 0; i < text.length; i++) out[offset + i] = text.charCodeAt(i);
  };
  ascii(0, 'RIFF');
  view.setUint32(4, WAV_HEADER_BYTES - 8 + dataBytes, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, WAVE_FORMAT_PCM, true);
  view.setUint16(22, 1, true);
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * BYTES_PER_SAMPLE, true);
  view.setUint16(32, BYTES_PER_SAMPLE, true);
  view.setUint16(34, 16, true);
  ascii(36, 'data');
  view.setUint32(40, dataBytes, true);
  const body = new Uint8Array(pcm.buffer, pcm.byteOffset, dataBytes);
  out.set(body, WAV_HEADER_BYTES);
  if (!HOST_IS_LITTLE_ENDIAN) swapBytes16(out.subarray(WAV_HEADER_BYTES));
  return out;
}
