/**
 * Ogg/Opus (RFC 7845) as Kyutai Unmute's browser frontend speaks it: its
 * recorder (opus-recorder) sends 24 kHz mono Opus in 20 ms frames, two frames
 * a page, and its player decodes the pages we stream back. Opus itself is
 * libopus through `@evan/opus` (a prebuilt native addon inside the npm
 * package, with a bundled WASM fallback; nothing is fetched at run time).
 */
import { Decoder, Encoder } from '@evan/opus';
import { AudioFormatError, ConfigError } from '../../errors.js';
import { OggReader, OggWriter } from './ogg.js';
import { concatPcm } from './pcm.js';
import type { OggPacket } from './ogg.js';
import { createResampler } from './resample.js';
import type { Resampler } from './resample.js';

/** Default rate of decoded and encoded PCM, in Hz (Unmute's and the Realtime protocol's). */
export const OGG_OPUS_DEFAULT_SAMPLE_RATE = 24_000;
/** Opus frame length Unmute uses, in ms. */
export const OGG_OPUS_DEFAULT_FRAME_MS = 20;
/** Opus frames per Ogg page Unmute uses. */
export const OGG_OPUS_DEFAULT_FRAMES_PER_PAGE = 2;
/** Granule positions of Ogg/Opus always count 48 kHz samples (RFC 7845 §4). */
const GRANULE_RATE_HZ = 48_000;
/** Rates libopus encodes and decodes natively; others go through the resampler at 48 kHz. */
const OPUS_RATES: ReadonlySet<number> = new Set([8_000, 12_000, 16_000, 24_000, 48_000]);
/** Frame lengths an Opus encoder accepts, in ms. */
const OPUS_FRAME_MS: ReadonlySet<number> = new Set([2.5, 5, 10, 20, 40, 60]);
/** Most frames we put on one page (keeps pages small and latency bounded). */
const MAX_FRAMES_PER_PAGE = 50;
/** libopus `OPUS_GET_LOOKAHEAD` request: the encoder's delay, in samples at its rate. */
const OPUS_GET_LOOKAHEAD = 4027;
/** Written into OpusTags. */
const VENDOR = 'Troupe (libopus via @evan/opus)';

const OPUS_HEAD = new TextEncoder().encode('OpusHead');
const OPUS_TAGS = new TextEncoder().encode('OpusTags');

/** Rates libopus runs at. */
type OpusRate = 8000 | 12000 | 16000 | 24000 | 48000;

function isOpusRate(rate: number): rate is OpusRate {
  return OPUS_RATES.has(rate);
}

/** Whether bytes could begin an Ogg page ("OggS", or a prefix of it when shorter). */
function startsLikeOgg(bytes: Uint8Array): boolean {
  const capture = [0x4f, 0x67, 0x67, 0x53];
  for (let i = 0; i < 4 && i < bytes.length; i++) if (bytes[i] !== capture[i]) return false;
  return true;
}

function startsWith(data: Uint8Array, magic: Uint8Array): boolean {
  if (data.length < magic.length) return false;
  for (let i = 0; i < magic.length; i++) if (data[i] !== magic[i]) return false;
  return true;
}

/** The first bytes of a packet, readable in an error message. */
function preview(data: Uint8Array): string {
  const shown = data.subarray(0, 8);
  let text = '';
  let printable = true;
  for (const b of shown) {
    if (b < 0x20 || b > 0x7e) printable = false;
    text += String.fromCharCode(b);
  }
  if (printable && shown.length >= 4) return `"${text}"`;
  return (
    Array.from(shown, (b) => b.toString(16).padStart(2, '0')).join(' ') +
    (data.length > 8 ? ' …' : '')
  );
}

function concatBytes(parts: Uint8Array[]): Uint8Array {
  let total = 0;
  for (const p of parts) total += p.length;
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** Options of {@link OggOpusDecoder}. */
export interface OggOpusDecoderOptions {
  /**
   * Rate of the PCM it returns, in Hz. 8/12/16/24/48 kHz come straight from
   * libopus; any other rate (8–192 kHz) is decoded at 48 kHz and resampled.
   * @defaultValue 24000
   */
  sampleRate?: number;
}

/** What OpusHead told us, plus the decoding state of one logical stream. */
interface OpusStream {
  serial: number;
  channels: number;
  /** Pre-skip in 48 kHz samples, from OpusHead. */
  preSkip48: number;
  /** Decoded samples still to drop at the start, at the decode rate. */
  skipLeft: number;
  /** Sequence number of the page the last packet ended on. */
  pageSequence: number;
  /** That page's granule position. */
  pageGranule: bigint;
  /** Granule position of the page before it: where that page's audio starts (for end trimming). */
  startGranule: bigint;
  /** Samples decoded from that page so far, pre-skip included, at the decode rate. */
  pageSamples: number;
  tagsSeen: boolean;
  decoder: Decoder;
}

/**
 * Decodes a streamed Ogg/Opus byte stream to mono PCM16. Bytes may arrive
 * split anywhere. Pre-skip and end trimming follow RFC 7845; stereo streams
 * are downmixed by libopus; a new OpusHead (a chained stream) starts afresh.
 *
 * Errors are `AudioFormatError`s and leave the decoder usable: a corrupt page
 * or Opus packet is skipped, and audio decoded before it in the same push is
 * returned by the next push.
 *
 * @example
 * ```ts
 * const decoder = new OggOpusDecoder(); // 24 kHz out
 * ws.on('message', (bytes: Buffer) => stt.write(decoder.push(bytes)));
 * ```
 */
export class OggOpusDecoder {
  /** Rate of the PCM `push` returns, in Hz. */
  readonly sampleRate: number;
  readonly #decodeRate: OpusRate;
  readonly #resampler: Resampler | undefined;
  #reader = new OggReader();
  /** Packets read but not decoded yet (a packet before them threw). */
  #queue: OggPacket[] = [];
  /** Audio decoded during a push that then threw; returned by the next push. */
  #carried: Int16Array[] = [];
  #stream: OpusStream | undefined;
  #closed = false;

  constructor(options: OggOpusDecoderOptions = {}) {
    const rate = options.sampleRate ?? OGG_OPUS_DEFAULT_SAMPLE_RATE;
    this.sampleRate = rate;
    if (isOpusRate(rate)) {
      this.#decodeRate = rate;
    } else {
      // createResampler rejects absurd rates with a clear AudioFormatError.
      this.#resampler = createResampler(GRANULE_RATE_HZ, rate);
      this.#decodeRate = GRANULE_RATE_HZ;
    }
  }

  /**
   * Adds bytes; returns the PCM (mono, at `sampleRate`) of every packet they
   * completed, possibly empty. Throws `AudioFormatError` on data that is not
   * Ogg/Opus or is corrupt.
   */
  push(bytes: Uint8Array): Int16Array {
    if (this.#closed) throw new Error('OggOpusDecoder.push() was called after close().');
    if (!(bytes instanceof Uint8Array)) {
      throw new AudioFormatError('OggOpusDecoder.push takes bytes as a Uint8Array (or Buffer).');
    }
    if (this.#stream === undefined && this.#reader.bufferedBytes === 0 && !startsLikeOgg(bytes)) {
      // Nothing consumed: the next push may still begin a proper stream.
      throw new AudioFormatError(
        `Expected Ogg/Opus: the first page must carry OpusHead (got ${preview(bytes)}, which is not an Ogg page; raw Opus packets need Ogg framing, as opus-recorder or opusenc write it).`,
      );
    }
    const ready = this.#carried;
    this.#carried = [];
    /** This push's audio of the current stream, at the decode rate, not yet resampled. */
    let pending: Int16Array[] = [];
    const settle = (endOfStream: boolean): void => {
      let total = 0;
      for (const p of pending) total += p.length;
      const pcm = concatPcm(pending, total);
      pending = [];
      if (this.#resampler) {
        ready.push(this.#resampler.push(pcm));
        if (endOfStream) ready.push(this.#resampler.flush());
      } else if (pcm.length > 0) {
        ready.push(pcm);
      }
    };
    let queue = this.#queue;
    this.#queue = [];
    let next = 0;
    try {
      const packets = this.#readPackets(bytes);
      queue = queue.length === 0 ? packets : queue.concat(packets);
      // Decode in order; a failing packet leaves those after it queued.
      while (next < queue.length) {
        const packet = queue[next++]!;
        if (startsWith(packet.data, OPUS_HEAD)) {
          settle(false);
          this.#stream = this.#openStream(packet);
          continue;
        }
        if (this.#isHeader(packet)) continue;
        this.#notePage(packet);
        const pcm = this.#decodePacket(packet);
        if (pcm !== undefined && pcm.length > 0) pending.push(pcm);
        if (packet.eos) {
          this.#trimEnd(packet, pending);
          settle(true);
        }
      }
    } catch (error) {
      settle(false);
      this.#carried = ready;
      this.#queue = queue.slice(next);
      throw error;
    }
    settle(false);
    let total = 0;
    for (const p of ready) total += p.length;
    return concatPcm(ready, total);
  }

  #readPackets(bytes: Uint8Array): OggPacket[] {
    try {
      return this.#reader.push(bytes);
    } catch (error) {
      if (this.#stream === undefined && error instanceof AudioFormatError) {
        throw new AudioFormatError(
          `Expected Ogg/Opus: the first page must carry OpusHead, but the Ogg framing is broken: ${error.message}`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /** Frees the decoder; later pushes throw. */
  close(): void {
    this.#closed = true;
    this.#stream = undefined;
    this.#queue = [];
    this.#carried = [];
    this.#reader.reset();
  }

  /** Checks the packet belongs to the open stream; true when it is OpusTags (nothing to decode). */
  #isHeader(packet: OggPacket): boolean {
    const data = packet.data;
    const stream = this.#stream;
    if (stream === undefined) {
      throw new AudioFormatError(
        `Expected Ogg/Opus: the first page must carry OpusHead (got ${packet.bos ? 'a stream whose first packet is' : 'a packet'} ${preview(data)}${packet.bos ? ', which is not Opus' : ' before any OpusHead'}). Send Ogg/Opus as opus-recorder or opusenc write it.`,
      );
    }
    if (packet.serial !== stream.serial) {
      throw new AudioFormatError(
        `Unexpected Ogg page of stream ${packet.serial} while decoding stream ${stream.serial}: multiplexed Ogg is not supported; send one Opus stream (a new stream must start with OpusHead). The packet was skipped.`,
      );
    }
    if (!stream.tagsSeen) {
      stream.tagsSeen = true;
      // RFC 7845 puts OpusTags second; if a muxer left it out, the packet is audio.
      if (startsWith(data, OPUS_TAGS)) return true;
    }
    return false;
  }

  #openStream(packet: OggPacket): OpusStream {
    const data = packet.data;
    if (data.length < 19) {
      throw new AudioFormatError(
        `Invalid OpusHead in Ogg stream ${packet.serial}: ${data.length} bytes, fewer than the 19 it needs (RFC 7845 §5.1).`,
      );
    }
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    const version = data[8]!;
    const channels = data[9]!;
    const preSkip48 = view.getUint16(10, true);
    const outputGain = view.getInt16(16, true);
    const mapping = data[18]!;
    if (version >> 4 !== 0) {
      throw new AudioFormatError(
        `Unsupported OpusHead version ${version} in Ogg stream ${packet.serial}: only version 1 (major 0) is understood.`,
      );
    }
    if (channels < 1 || (mapping === 0 && channels > 2)) {
      throw new AudioFormatError(
        `Invalid OpusHead in Ogg stream ${packet.serial}: ${channels} channels with channel mapping family ${mapping}; family 0 allows 1 or 2.`,
      );
    }
    if (mapping !== 0) {
      throw new AudioFormatError(
        `Unsupported Ogg/Opus stream ${packet.serial}: channel mapping family ${mapping} (${channels} channels, multistream). Send mono or stereo Opus (mapping family 0).`,
      );
    }
    // A mono decoder: libopus downmixes stereo packets itself, cheaper than decoding two channels and averaging.
    const decoder = new Decoder({ channels: 1, sample_rate: this.#decodeRate });
    // OpusHead's output gain is Q7.8 dB, the unit of OPUS_SET_GAIN.
    if (outputGain !== 0) decoder.gain = outputGain;
    return {
      serial: packet.serial,
      channels,
      preSkip48,
      skipLeft: Math.round((preSkip48 * this.#decodeRate) / GRANULE_RATE_HZ),
      pageSequence: packet.pageSequence,
      pageGranule: packet.granule,
      startGranule: 0n,
      pageSamples: 0,
      tagsSeen: false,
      decoder,
    };
  }

  #decodePacket(packet: OggPacket): Int16Array | undefined {
    const stream = this.#stream!;
    // A zero-byte packet carries no audio (RFC 7845 lets muxers send it for DTX gaps).
    if (packet.data.length === 0) return undefined;
    let bytes: Uint8Array;
    try {
      bytes = stream.decoder.decode(packet.data);
    } catch (error) {
      throw new AudioFormatError(
        `Corrupt Opus packet in page ${packet.pageSequence} of Ogg stream ${packet.serial} (${packet.data.length} bytes, starting ${preview(packet.data)}): libopus rejected it (${error instanceof Error ? error.message : String(error)}). The packet was skipped; later pages still decode.`,
        { cause: error },
      );
    }
    // @evan/opus returns a fresh copy; view it in place when aligned.
    stream.pageSamples += bytes.length >> 1;
    let pcm =
      bytes.byteOffset % 2 === 0
        ? new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length >> 1)
        : new Int16Array(bytes.slice().buffer);
    if (stream.skipLeft > 0) {
      const skip = Math.min(stream.skipLeft, pcm.length);
      stream.skipLeft -= skip;
      pcm = pcm.slice(skip);
    }
    return pcm;
  }

  /** Tracks page boundaries: a page's audio starts at the previous page's granule position. */
  #notePage(packet: OggPacket): void {
    const stream = this.#stream!;
    if (packet.pageSequence === stream.pageSequence) return;
    stream.startGranule = stream.pageGranule;
    stream.pageSequence = packet.pageSequence;
    stream.pageGranule = packet.granule;
    stream.pageSamples = 0;
  }

  /**
   * End trimming (RFC 7845 §4.5): the EOS page's granule position may stop
   * short of its decoded audio (the encoder padded its last frame). The page
   * holds `granule - previous page's granule` samples; the excess is dropped
   * from the end. Measuring against the previous page, not a running count,
   * keeps the trim right when an earlier page was lost.
   */
  #trimEnd(packet: OggPacket, out: Int16Array[]): void {
    const stream = this.#stream!;
    if (packet.granule < 0n || stream.startGranule < 0n) return;
    const expected = Number(
      ((packet.granule - stream.startGranule) * BigInt(this.#decodeRate)) / BigInt(GRANULE_RATE_HZ),
    );
    let excess = stream.pageSamples - Math.max(0, expected);
    while (excess > 0 && out.length > 0) {
      const last = out[out.length - 1]!;
      if (last.length <= excess) {
        out.pop();
        excess -= last.length;
      } else {
        out[out.length - 1] = last.slice(0, last.length - excess);
        excess = 0;
      }
    }
  }
}

/** Options of {@link OggOpusEncoder}. */
export interface OggOpusEncoderOptions {
  /**
   * Rate of the PCM pushed in, in Hz. 8/12/16/24/48 kHz are encoded as they
   * are; other rates (8–192 kHz, e.g. espeak's 22,050) are resampled to 48 kHz.
   * @defaultValue 24000
   */
  sampleRate?: number;
  /** Opus frame length: 2.5, 5, 10, 20, 40 or 60 ms. @defaultValue 20 */
  frameMs?: number;
  /** Opus frames per Ogg page (latency vs overhead). @defaultValue 2 */
  framesPerPage?: number;
  /** The Ogg stream's serial number. @defaultValue random */
  serial?: number;
  /**
   * libopus application: `voip` favours intelligibility of speech, `audio`
   * fidelity. @defaultValue 'audio'
   */
  application?: 'voip' | 'audio';
  /** Target bitrate in bits/s (500–512,000), or libopus's choice. @defaultValue 'auto' */
  bitrate?: number | 'auto';
}

/**
 * Encodes mono PCM16 as a streamed Ogg/Opus byte stream: OpusHead and
 * OpusTags pages first, then pages of `framesPerPage` frames as soon as they
 * fill, granule positions in 48 kHz samples counting the pre-skip (RFC 7845).
 * `flush()` ends the logical stream with an EOS page whose granule position
 * trims the padding, so a decoder gives back exactly the samples pushed;
 * pushing again starts a new chained stream (fresh headers, next serial).
 *
 * @example
 * ```ts
 * const encoder = new OggOpusEncoder(); // 24 kHz mono, 20 ms frames, 2 per page
 * tts.onAudio((pcm) => ws.send(encoder.push(pcm)));
 * ws.send(encoder.flush());
 * ```
 */
export class OggOpusEncoder {
  /** Rate of the PCM `push` takes, in Hz. */
  readonly sampleRate: number;
  readonly #encodeRate: OpusRate;
  readonly #frameSamples: number;
  readonly #framesPerPage: number;
  readonly #resampler: Resampler | undefined;
  readonly #encoder: Encoder;
  /** Encoder delay in samples at the encode rate; pre-skip is this in 48 kHz units. */
  readonly #lookahead: number;
  readonly #frame: Int16Array;
  #frameFill = 0;
  #writer: OggWriter;
  #headersWritten = false;
  #packets: Uint8Array[] = [];
  #framesEncoded = 0;
  /** Samples given to the encoder at the encode rate, padding excluded. */
  #inputSamples = 0;
  #closed = false;

  constructor(options: OggOpusEncoderOptions = {}) {
    const rate = options.sampleRate ?? OGG_OPUS_DEFAULT_SAMPLE_RATE;
    const frameMs = options.frameMs ?? OGG_OPUS_DEFAULT_FRAME_MS;
    const framesPerPage = options.framesPerPage ?? OGG_OPUS_DEFAULT_FRAMES_PER_PAGE;
    if (!OPUS_FRAME_MS.has(frameMs)) {
      throw new ConfigError(
        `OggOpusEncoder frameMs ${String(frameMs)} is not an Opus frame length: use 2.5, 5, 10, 20, 40 or 60 (default ${OGG_OPUS_DEFAULT_FRAME_MS}).`,
      );
    }
    if (
      !Number.isInteger(framesPerPage) ||
      framesPerPage < 1 ||
      framesPerPage > MAX_FRAMES_PER_PAGE
    ) {
      throw new ConfigError(
        `OggOpusEncoder framesPerPage ${String(framesPerPage)} is out of range: use an integer from 1 to ${MAX_FRAMES_PER_PAGE} (default ${OGG_OPUS_DEFAULT_FRAMES_PER_PAGE}).`,
      );
    }
    this.sampleRate = rate;
    if (isOpusRate(rate)) {
      this.#encodeRate = rate;
    } else {
      this.#resampler = createResampler(rate, GRANULE_RATE_HZ);
      this.#encodeRate = GRANULE_RATE_HZ;
    }
    this.#frameSamples = (this.#encodeRate * frameMs) / 1000;
    this.#framesPerPage = framesPerPage;
    this.#frame = new Int16Array(this.#frameSamples);
    this.#writer = new OggWriter(options.serial);
    this.#encoder = new Encoder({
      channels: 1,
      sample_rate: this.#encodeRate,
      application: options.application ?? 'audio',
    });
    const bitrate = options.bitrate ?? 'auto';
    if (bitrate !== 'auto') {
      if (!Number.isInteger(bitrate) || bitrate < 500 || bitrate > 512_000) {
        throw new ConfigError(
          `OggOpusEncoder bitrate ${String(bitrate)} is out of range: use 500–512000 bits/s or 'auto'.`,
        );
      }
      this.#encoder.bitrate = bitrate;
    }
    this.#lookahead = this.#encoder.ctl(OPUS_GET_LOOKAHEAD);
  }

  /** Pre-skip written into OpusHead, in 48 kHz samples. */
  get preSkip(): number {
    return (this.#lookahead * GRANULE_RATE_HZ) / this.#encodeRate;
  }

  /** The current logical stream's serial number. */
  get serial(): number {
    return this.#writer.serial;
  }

  /**
   * Adds mono PCM16 at `sampleRate`; returns the complete pages so far
   * (header pages first on the first call of a stream), possibly empty.
   */
  push(pcm: Int16Array): Uint8Array {
    this.#checkOpen('push');
    if (!(pcm instanceof Int16Array)) {
      throw new AudioFormatError('OggOpusEncoder.push takes mono PCM16 samples as an Int16Array.');
    }
    const pages: Uint8Array[] = [];
    this.#writeHeaders(pages);
    const samples = this.#resampler ? this.#resampler.push(pcm) : pcm;
    this.#inputSamples += samples.length;
    this.#feed(samples, pages);
    return concatBytes(pages);
  }

  /**
   * Ends the stream: encodes what is left (padded with silence past the
   * encoder's delay) and writes the EOS page. The next `push` starts a new
   * chained stream.
   */
  flush(): Uint8Array {
    this.#checkOpen('flush');
    const pages: Uint8Array[] = [];
    this.#writeHeaders(pages);
    if (this.#resampler) {
      const tail = this.#resampler.flush();
      this.#inputSamples += tail.length;
      this.#feed(tail, pages);
    }
    // Encode until every real sample has left the encoder's look-ahead, so
    // nothing is cut; the EOS granule position tells decoders to drop the padding.
    const needed = this.#inputSamples + this.#lookahead;
    while (this.#framesEncoded * this.#frameSamples < needed) {
      this.#frame.fill(0, this.#frameFill);
      this.#frameFill = this.#frameSamples;
      this.#encodeFrame(pages, false);
    }
    // All remaining packets, padding included, go on the EOS page: end
    // trimming only reaches into the last page. Its granule position is the
    // pre-skip plus the real samples, which ends playback at the last one pushed.
    const granule = BigInt(
      this.preSkip + (this.#inputSamples * GRANULE_RATE_HZ) / this.#encodeRate,
    );
    pages.push(this.#writer.page(this.#packets, { granule, eos: true }));
    this.#startNewStream();
    return concatBytes(pages);
  }

  /** Frees the encoder; later calls throw. */
  close(): void {
    this.#closed = true;
    this.#packets = [];
  }

  #checkOpen(method: string): void {
    if (this.#closed) throw new Error(`OggOpusEncoder.${method}() was called after close().`);
  }

  #startNewStream(): void {
    this.#writer = new OggWriter((this.#writer.serial + 1) >>> 0);
    this.#headersWritten = false;
    this.#packets = [];
    this.#framesEncoded = 0;
    this.#inputSamples = 0;
    this.#frameFill = 0;
    this.#encoder.reset();
  }

  #writeHeaders(pages: Uint8Array[]): void {
    if (this.#headersWritten) return;
    this.#headersWritten = true;
    const head = new Uint8Array(19);
    const view = new DataView(head.buffer);
    head.set(OPUS_HEAD, 0);
    head[8] = 1; // version
    head[9] = 1; // channels
    view.setUint16(10, this.preSkip, true);
    view.setUint32(12, this.sampleRate, true); // original input rate (informational)
    view.setInt16(16, 0, true); // output gain
    head[18] = 0; // mapping family 0: mono/stereo
    const vendor = new TextEncoder().encode(VENDOR);
    const tags = new Uint8Array(8 + 4 + vendor.length + 4);
    const tagsView = new DataView(tags.buffer);
    tags.set(OPUS_TAGS, 0);
    tagsView.setUint32(8, vendor.length, true);
    tags.set(vendor, 12);
    tagsView.setUint32(12 + vendor.length, 0, true); // no user comments
    pages.push(this.#writer.page([head], { granule: 0n, bos: true }));
    pages.push(this.#writer.page([tags], { granule: 0n }));
  }

  /** Copies samples into frames, encoding each full frame. */
  #feed(samples: Int16Array, pages: Uint8Array[]): void {
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(this.#frameSamples - this.#frameFill, samples.length - offset);
      this.#frame.set(samples.subarray(offset, offset + take), this.#frameFill);
      this.#frameFill += take;
      offset += take;
      if (this.#frameFill === this.#frameSamples) this.#encodeFrame(pages, true);
    }
  }

  #encodeFrame(pages: Uint8Array[], mayClosePage: boolean): void {
    this.#packets.push(this.#encoder.encode(this.#frame));
    this.#frameFill = 0;
    this.#framesEncoded++;
    if (mayClosePage && this.#packets.length >= this.#framesPerPage) {
      // RFC 7845 §4: a page's granule position counts every sample decoded
      // through it at 48 kHz, the pre-skip samples included.
      const granule = BigInt(
        (this.#framesEncoded * this.#frameSamples * GRANULE_RATE_HZ) / this.#encodeRate,
      );
      pages.push(this.#writer.page(this.#packets, { granule }));
      this.#packets = [];
    }
  }
}
