/**
 * WAV and raw PCM16 read as they stream in, cut anywhere: an HTTP body's
 * chunks may split the WAV header, a sample or a stereo frame. Servers that
 * stream WAV (ffmpeg or libav writing to a pipe: speaches, openedai-speech,
 * Kokoro-FastAPI) cannot know the length up front and write 0 or 0xFFFFFFFF
 * as the sizes, and put other chunks (`LIST` with the encoder's name) before
 * `data`; both are handled. Output is mono PCM16 (channels averaged).
 */
import { AudioFormatError } from '../../errors.js';
import { readWav } from './pcm.js';

/** Most header bytes (everything before the `data` chunk's samples) read before giving up. */
export const MAX_WAV_HEADER_BYTES = 65_536;
/** Sizes a streamed WAV writes when it does not know the length yet. */
const STREAMED_SIZES = new Set([0, 0xffffffff, 0x7fffffff]);
const BYTES_PER_SAMPLE = 2;

/** What a WAV header says. */
export interface WavStreamFormat {
  sampleRate: number;
  channels: number;
  /** Bytes of samples the header announces, or undefined for a streamed WAV (size 0 or 0xFFFFFFFF). */
  dataBytes: number | undefined;
}

/**
 * Interleaved PCM16 LE frames of `channels` samples, cut anywhere, to mono:
 * a partial frame waits for the next chunk.
 *
 * @example
 * const frames = new Pcm16FrameReader(2);
 * frames.push(new Uint8Array([1, 0, 3])); // Int16Array [] (frame incomplete)
 * frames.push(new Uint8Array([0]));       // Int16Array [2]
 */
export class Pcm16FrameReader {
  readonly channels: number;
  readonly #frameBytes: number;
  /** Bytes of an incomplete frame. */
  #carry: Uint8Array = new Uint8Array(0);

  constructor(channels = 1) {
    if (!Number.isInteger(channels) || channels < 1) {
      throw new AudioFormatError(`PCM16 needs a whole number of channels ≥ 1, got ${channels}.`);
    }
    this.channels = channels;
    this.#frameBytes = channels * BYTES_PER_SAMPLE;
  }

  /** Adds bytes; returns the mono samples of the frames they complete (possibly none). */
  push(bytes: Uint8Array): Int16Array {
    let data = bytes;
    if (this.#carry.length > 0) {
      data = new Uint8Array(this.#carry.length + bytes.length);
      data.set(this.#carry);
      data.set(bytes, this.#carry.length);
    }
    const frames = Math.floor(data.length / this.#frameBytes);
    const used = frames * this.#frameBytes;
    this.#carry = data.slice(used);
    const view = new DataView(data.buffer, data.byteOffset, used);
    const out = new Int16Array(frames);
    const channels = this.channels;
    if (channels === 1) {
      for (let i = 0; i < frames; i++) out[i] = view.getInt16(i * 2, true);
      return out;
    }
    for (let i = 0, p = 0; i < frames; i++) {
      let sum = 0;
      for (let c = 0; c < channels; c++, p += 2) sum += view.getInt16(p, true);
      out[i] = Math.round(sum / channels);
    }
    return out;
  }

  /** Bytes of an incomplete frame waiting (at the end of a body: a truncated frame). */
  get pendingBytes(): number {
    return this.#carry.length;
  }
}

/**
 * Reads a WAV byte stream: holds bytes until the header up to the `data`
 * chunk has come (checking it as soon as it can), then gives out mono
 * samples as they arrive, up to the announced length if there is one.
 * Anything but 16-bit integer PCM throws `AudioFormatError` naming what it is.
 *
 * @example
 * const wav = new WavStreamReader();
 * for await (const chunk of body) use(wav.push(chunk), wav.format?.sampleRate);
 * wav.end(); // throws if the header never completed
 */
export class WavStreamReader {
  /** Bytes before the samples, until the header is complete. */
  #head: Uint8Array | undefined = new Uint8Array(0);
  #format: WavStreamFormat | undefined;
  #frames: Pcm16FrameReader | undefined;
  /** Sample bytes still to read, when the header gave a length. */
  #left = Number.POSITIVE_INFINITY;

  /** The header's format, once it has been read. */
  get format(): WavStreamFormat | undefined {
    return this.#format;
  }

  /** Adds body bytes; returns the mono samples they complete (none while the header comes). */
  push(bytes: Uint8Array): Int16Array {
    let data = bytes;
    if (this.#head !== undefined) {
      const head = new Uint8Array(this.#head.length + bytes.length);
      head.set(this.#head);
      head.set(bytes, this.#head.length);
      const start = this.#readHeader(head);
      if (start === undefined) {
        this.#head = head;
        return new Int16Array(0);
      }
      this.#head = undefined;
      data = head.subarray(start);
    }
    if (data.length > this.#left) data = data.subarray(0, this.#left);
    this.#left -= data.length;
    return this.#frames!.push(data);
  }

  /**
   * The body ended. Throws `AudioFormatError` when the header never
   * completed; returns how many bytes of a last partial frame were dropped.
   */
  end(): number {
    if (this.#head !== undefined) {
      const got = this.#head.length;
      throw new AudioFormatError(
        got === 0
          ? 'The WAV body was empty: no header, no audio.'
          : `The WAV body ended after ${got} bytes, before its header reached the 'data' chunk.`,
      );
    }
    return this.#frames!.pendingBytes;
  }

  /** Where the samples start in `head`, or undefined while more bytes are needed. */
  #readHeader(head: Uint8Array): number | undefined {
    if (head.length >= 12) {
      const riff = ascii(head, 0);
      const wave = ascii(head, 8);
      if (riff !== 'RIFF' || wave !== 'WAVE') {
        throw new AudioFormatError(
          `Not a WAV stream: it starts with '${riff}'…'${wave}' instead of 'RIFF'…'WAVE'` +
            (riff === 'RF64' || riff === 'RIFX' ? ` (${riff} is not supported).` : '.'),
        );
      }
    }
    const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
    let offset = 12;
    while (offset + 8 <= head.length) {
      const size = view.getUint32(offset + 4, true);
      if (ascii(head, offset) === 'data') {
        const body = offset + 8;
        // readWav checks the format and names what is wrong; with no
        // samples after the header, it reads none.
        const { sampleRate, channels } = readWav(head.subarray(0, body));
        const dataBytes = STREAMED_SIZES.has(size) ? undefined : size;
        this.#format = { sampleRate, channels, dataBytes };
        this.#frames = new Pcm16FrameReader(channels);
        this.#left = dataBytes ?? Number.POSITIVE_INFINITY;
        return body;
      }
      // Chunks are padded to an even length.
      offset += 8 + size + (size & 1);
    }
    if (head.length > MAX_WAV_HEADER_BYTES) {
      throw new AudioFormatError(
        `The WAV stream has no 'data' chunk within its first ${MAX_WAV_HEADER_BYTES} bytes.`,
      );
    }
    return undefined;
  }
}

/** Four bytes as text, for chunk ids. */
function ascii(bytes: Uint8Array, at: number): string {
  let s = '';
  for (let i = at; i < at + 4; i++) {
    const c = bytes[i]!;
    s += c >= 0x20 && c <= 0x7e ? String.fromCharCode(c) : `\\x${c.toString(16).padStart(2, '0')}`;
  }
  return s;
}
