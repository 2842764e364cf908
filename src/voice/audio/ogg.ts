/**
 * Ogg pages (RFC 3533), read and written. An Ogg page is a 27-byte header,
 * a table of up to 255 lacing values and the body; a packet is a run of
 * lacing values ending in one below 255, so packets may span pages. Small
 * enough to write by hand; it runs for every audio page of every session, so
 * it copies as little as it can.
 */
import { randomInt } from 'node:crypto';
import { AudioFormatError } from '../../errors.js';

/** The largest packet {@link OggReader} assembles, in bytes; bigger is treated as junk. */
export const MAX_OGG_PACKET_BYTES = 1 << 20;
/** Header bytes before the lacing table. */
const OGG_HEADER_BYTES = 27;
/** Most lacing values on one page. */
const MAX_SEGMENTS = 255;
/** Largest possible page: header, full lacing table, 255 × 255 body bytes. */
const MAX_PAGE_BYTES = OGG_HEADER_BYTES + MAX_SEGMENTS + MAX_SEGMENTS * 255;
/** Header-type flags. */
const FLAG_CONTINUED = 0x01;
const FLAG_BOS = 0x02;
const FLAG_EOS = 0x04;
/** "OggS", the capture pattern that starts every page. */
const CAPTURE_BYTES = new Uint8Array([0x4f, 0x67, 0x67, 0x53]);
/** "OggS" read as a little-endian uint32. */
const CAPTURE_PATTERN = 0x5367674f;
/** Granule position of a page on which no packet ends. */
const NO_GRANULE = -1n;
/** Reader buffers larger than this (bytes) are released once emptied. */
const MAX_RETAINED_BUFFER_BYTES = 1 << 18;

/** CRC-32 with Ogg's polynomial 0x04C11DB7: MSB-first, initial 0, no final XOR. */
const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let k = 0; k < 8; k++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    table[i] = r >>> 0;
  }
  return table;
})();

/** Ogg's CRC-32 of `bytes[start, end)`, continuing from `crc`. */
function oggCrc(bytes: Uint8Array, start: number, end: number, crc = 0): number {
  for (let i = start; i < end; i++) {
    crc = (crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ bytes[i]!) & 0xff]!;
  }
  return crc >>> 0;
}

/**
 * Ogg's CRC-32 of some bytes (polynomial 0x04C11DB7, MSB first, initial
 * value 0, no final XOR; "123456789" gives 0x89A1897F).
 *
 * @example
 * ```ts
 * oggCrc32(new TextEncoder().encode('123456789')); // 0x89a1897f
 * ```
 */
export function oggCrc32(bytes: Uint8Array): number {
  return oggCrc(bytes, 0, bytes.length);
}

/**
 * Ogg's CRC-32 of a whole page, with its checksum field (bytes 22–25) taken as zero.
 *
 * @example
 * ```ts
 * const ok = oggPageCrc(page) === new DataView(page.buffer, page.byteOffset).getUint32(22, true);
 * ```
 */
export function oggPageCrc(page: Uint8Array): number {
  let crc = oggCrc(page, 0, 22);
  crc = oggCrc(ZERO_CRC_FIELD, 0, 4, crc);
  return oggCrc(page, 26, page.length, crc);
}
const ZERO_CRC_FIELD = new Uint8Array(4);

/** One packet of a logical Ogg stream. */
export interface OggPacket {
  /** The packet's bytes (standalone copy). */
  data: Uint8Array;
  /**
   * Granule position of the page on which this packet ends. RFC 3533 ties it
   * to the last packet completed on that page; earlier packets of the same
   * page carry the same value. (-1 marks pages on which no packet ends, so a
   * well-formed stream never shows it here.)
   */
  granule: bigint;
  /** The packet is the first of its logical stream (it ends on the BOS page). */
  bos: boolean;
  /** The packet is the last of its logical stream (the last one ending on the EOS page). */
  eos: boolean;
  /** The logical stream's serial number. */
  serial: number;
  /** Sequence number of the page on which the packet ends. */
  pageSequence: number;
}

/** A packet being joined across pages, per logical stream. */
interface PartialPacket {
  parts: Uint8Array[];
  size: number;
}

/** Shows the first bytes of junk in messages. */
function hexPreview(bytes: Uint8Array, start: number, end: number): string {
  const shown = Math.min(end - start, 8);
  let s = '';
  for (let i = 0; i < shown; i++)
    s += (i ? ' ' : '') + bytes[start + i]!.toString(16).padStart(2, '0');
  return end - start > shown ? `${s} …` : s;
}

/**
 * Splits a byte stream into Ogg packets. Bytes may arrive split anywhere:
 * partial pages wait for the next push, several pages in one push all come
 * out, and packets continued across pages are joined. Each page's CRC is
 * checked.
 *
 * On a bad page (missing "OggS", wrong version, CRC mismatch, oversize
 * packet) `push` throws `AudioFormatError`; the reader has already skipped
 * past the bad bytes, so the next `push` (even an empty one) returns the
 * packets completed before the bad page and carries on from the next page.
 *
 * @example
 * ```ts
 * const reader = new OggReader();
 * ws.on('message', (bytes) => {
 *   for (const packet of reader.push(bytes)) handle(packet);
 * });
 * ```
 */
export class OggReader {
  #buf = new Uint8Array(4096);
  #start = 0;
  #end = 0;
  #partials = new Map<number, PartialPacket>();
  #ready: OggPacket[] = [];

  /** Bytes held while waiting for the rest of a page. */
  get bufferedBytes(): number {
    return this.#end - this.#start;
  }

  /** Adds bytes and returns the packets completed by them, in stream order. */
  push(bytes: Uint8Array): OggPacket[] {
    if (!(bytes instanceof Uint8Array)) {
      throw new AudioFormatError('OggReader.push takes bytes as a Uint8Array (or Buffer).');
    }
    this.#append(bytes);
    // Packets collect on the instance so that, when a bad page throws, the
    // good packets before it are not lost: the next push returns them.
    const packets = this.#ready;
    while (this.#end > this.#start) {
      const pageLength = this.#nextPageLength();
      if (pageLength === 0) break; // incomplete page: wait for more bytes
      const at = this.#start;
      // Step past the page first: if it throws (oversize packet) it is not read twice.
      this.#start += pageLength;
      this.#readPage(at, pageLength, packets);
    }
    this.#ready = [];
    if (this.#start === this.#end) {
      this.#start = this.#end = 0;
      // One huge push shouldn't pin a huge buffer for the rest of the session.
      if (this.#buf.length > MAX_RETAINED_BUFFER_BYTES) this.#buf = new Uint8Array(4096);
    }
    return packets;
  }

  /** Forgets buffered bytes and half-joined packets (e.g. a new stream on the same socket). */
  reset(): void {
    this.#start = this.#end = 0;
    this.#partials.clear();
    this.#ready = [];
  }

  #append(bytes: Uint8Array): void {
    const held = this.#end - this.#start;
    if (this.#end + bytes.length > this.#buf.length) {
      if (held + bytes.length <= this.#buf.length) {
        this.#buf.copyWithin(0, this.#start, this.#end);
      } else {
        const grown = new Uint8Array(Math.max(held + bytes.length, this.#buf.length * 2));
        grown.set(this.#buf.subarray(this.#start, this.#end));
        this.#buf = grown;
      }
      this.#start = 0;
      this.#end = held;
    }
    this.#buf.set(bytes, this.#end);
    this.#end += bytes.length;
  }

  /**
   * Validates the page at `#start`: its length when complete, 0 when more
   * bytes are needed. Throws (after skipping the bad bytes) when it is not a page.
   */
  #nextPageLength(): number {
    const buf = this.#buf;
    const at = this.#start;
    const available = this.#end - at;
    // Check the capture pattern as soon as its bytes arrive, so junk is
    // reported on the push that brought it, not after 27 bytes piled up.
    let capturing = true;
    for (let i = 0; i < 4 && i < available; i++) {
      if (buf[at + i] !== CAPTURE_BYTES[i]) capturing = false;
    }
    if (!capturing) {
      const preview = hexPreview(buf, at, this.#end);
      this.#skipToNextCapture(at + 1);
      throw new AudioFormatError(
        `Invalid Ogg stream: expected the "OggS" capture pattern at the start of a page, got ${preview}. Send Ogg pages (RFC 3533), not raw codec packets; the bytes up to the next "OggS" were skipped.`,
      );
    }
    if (available < OGG_HEADER_BYTES) return 0;
    if (buf[at + 4] !== 0) {
      const version = buf[at + 4]!;
      this.#skipToNextCapture(at + 1);
      throw new AudioFormatError(
        `Invalid Ogg page: stream structure version ${version}, only version 0 exists (RFC 3533). The page was skipped.`,
      );
    }
    const segments = buf[at + 26]!;
    if (this.#end - at < OGG_HEADER_BYTES + segments) return 0;
    let body = 0;
    for (let i = 0; i < segments; i++) body += buf[at + OGG_HEADER_BYTES + i]!;
    const length = OGG_HEADER_BYTES + segments + body;
    if (this.#end - at < length) return 0;
    const view = new DataView(buf.buffer, buf.byteOffset + at, length);
    const stored = view.getUint32(22, true);
    const computed = oggPageCrc(buf.subarray(at, at + length));
    if (stored !== computed) {
      const sequence = view.getUint32(18, true);
      // A corrupt length byte could make "length" wrong, so resynchronise on
      // the next capture pattern instead of trusting it.
      this.#skipToNextCapture(at + 1);
      throw new AudioFormatError(
        `Invalid Ogg page ${sequence}: CRC mismatch (stored 0x${stored.toString(16).padStart(8, '0')}, computed 0x${computed.toString(16).padStart(8, '0')}); the page is corrupt and was skipped.`,
      );
    }
    return length;
  }

  /** Drops bytes up to the next "OggS" (keeping a possible partial pattern at the end). */
  #skipToNextCapture(from: number): void {
    const buf = this.#buf;
    const end = this.#end;
    let i = from;
    for (; i < end; i++) {
      // Stop at "OggS", or at a tail that may be the start of one ("O", "Og", "Ogg").
      if (
        buf[i] === 0x4f &&
        (i + 1 >= end || buf[i + 1] === 0x67) &&
        (i + 2 >= end || buf[i + 2] === 0x67) &&
        (i + 3 >= end || buf[i + 3] === 0x53)
      ) {
        break;
      }
    }
    this.#start = i;
    // Whatever was being joined lost a page.
    this.#partials.clear();
  }

  #readPage(at: number, length: number, packets: OggPacket[]): void {
    const buf = this.#buf;
    const view = new DataView(buf.buffer, buf.byteOffset + at, length);
    const flags = buf[at + 5]!;
    const granule = view.getBigInt64(6, true);
    const serial = view.getUint32(14, true);
    const pageSequence = view.getUint32(18, true);
    const segments = buf[at + 26]!;
    let offset = at + OGG_HEADER_BYTES + segments;
    let partial = this.#partials.get(serial);
    // A continued page without its beginning (we joined mid-stream, or the
    // previous page was bad): skip the orphaned tail. A fresh page while a
    // packet was pending means the stream dropped a page: drop the fragment.
    let skipping = (flags & FLAG_CONTINUED) !== 0 && partial === undefined;
    if ((flags & FLAG_CONTINUED) === 0 && partial !== undefined) {
      this.#partials.delete(serial);
      partial = undefined;
    }
    const firstIndex = packets.length;
    let segStart = offset;
    for (let i = 0; i < segments; i++) {
      const lace = buf[at + OGG_HEADER_BYTES + i]!;
      offset += lace;
      if (lace === 255) continue;
      // A packet (or the orphaned tail of one) ends at this segment.
      if (skipping) {
        skipping = false;
      } else if (partial !== undefined) {
        partial.parts.push(buf.slice(segStart, offset));
        partial.size += offset - segStart;
        this.#checkSize(partial.size, serial);
        packets.push(this.#packet(joinParts(partial), granule, serial, pageSequence));
        this.#partials.delete(serial);
        partial = undefined;
      } else {
        this.#checkSize(offset - segStart, serial);
        packets.push(this.#packet(buf.slice(segStart, offset), granule, serial, pageSequence));
      }
      segStart = offset;
    }
    if (segStart < offset) {
      // The last lacing value was 255: the page ends inside a packet, whose
      // fragment waits for the next page.
      if (!skipping) {
        if (partial === undefined) {
          partial = { parts: [], size: 0 };
          this.#partials.set(serial, partial);
        }
        partial.parts.push(buf.slice(segStart, offset));
        partial.size += offset - segStart;
        this.#checkSize(partial.size, serial);
      }
    }
    if (packets.length > firstIndex) {
      if (flags & FLAG_BOS) packets[firstIndex]!.bos = true;
      if (flags & FLAG_EOS) packets[packets.length - 1]!.eos = true;
    }
    if (flags & FLAG_EOS) this.#partials.delete(serial);
  }

  #checkSize(size: number, serial: number): void {
    if (size > MAX_OGG_PACKET_BYTES) {
      this.#partials.delete(serial);
      throw new AudioFormatError(
        `Invalid Ogg stream ${serial}: a packet grew past ${MAX_OGG_PACKET_BYTES} bytes, far beyond any audio packet; it was dropped.`,
      );
    }
  }

  #packet(data: Uint8Array, granule: bigint, serial: number, pageSequence: number): OggPacket {
    return { data, granule, bos: false, eos: false, serial, pageSequence };
  }
}

function joinParts(partial: PartialPacket): Uint8Array {
  const out = new Uint8Array(partial.size);
  let offset = 0;
  for (const part of partial.parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** Options of {@link OggWriter.page}. */
export interface OggPageOptions {
  /** Granule position of the last packet on the page (codec-defined units; Opus: 48 kHz samples). */
  granule: bigint;
  /** First page of the logical stream. @defaultValue false */
  bos?: boolean;
  /** Last page of the logical stream. @defaultValue false */
  eos?: boolean;
}

/**
 * Writes one logical Ogg stream: lacing, page sequence numbers and CRCs.
 *
 * @example
 * ```ts
 * const writer = new OggWriter();
 * socket.send(writer.page([opusHead], { granule: 0n, bos: true }));
 * ```
 */
export class OggWriter {
  /** The logical stream's serial number. */
  readonly serial: number;
  #sequence = 0;

  /** @param serial The stream's serial number. @defaultValue a random 32-bit number */
  constructor(serial?: number) {
    if (
      serial !== undefined &&
      !(Number.isInteger(serial) && serial >= 0 && serial <= 0xffffffff)
    ) {
      throw new AudioFormatError(
        `Invalid Ogg serial number ${String(serial)}: use an integer from 0 to 4294967295.`,
      );
    }
    this.serial = serial ?? randomInt(0, 0xffffffff);
  }

  /** The sequence number the next page gets. */
  get nextPageSequence(): number {
    return this.#sequence;
  }

  /**
   * Writes `packets` as one page, or, when a single packet is too big for a
   * page (over 65,025 bytes), as that packet continued over several pages
   * (granule -1 on all but the last, as RFC 3533 asks). Several packets
   * that together need more than 255 lacing values throw: write them in
   * separate calls, each with its own granule position.
   */
  page(packets: Uint8Array[], options: OggPageOptions): Uint8Array {
    let laces = 0;
    for (const p of packets) laces += Math.floor(p.length / 255) + 1;
    if (laces > MAX_SEGMENTS) {
      if (packets.length === 1) return this.#longPacket(packets[0]!, options);
      throw new AudioFormatError(
        `Cannot write ${packets.length} packets (${laces} lacing values) on one Ogg page: a page holds 255. Write fewer packets per page.`,
      );
    }
    const lacing = new Uint8Array(laces);
    let l = 0;
    let bodyBytes = 0;
    for (const p of packets) {
      let left = p.length;
      while (left >= 255) {
        lacing[l++] = 255;
        left -= 255;
      }
      lacing[l++] = left; // < 255 ends the packet; 0 when the length is a multiple of 255
      bodyBytes += p.length;
    }
    const flags = (options.bos ? FLAG_BOS : 0) | (options.eos ? FLAG_EOS : 0);
    const page = this.#header(lacing, bodyBytes, options.granule, flags);
    let offset = OGG_HEADER_BYTES + laces;
    for (const p of packets) {
      page.set(p, offset);
      offset += p.length;
    }
    return this.#seal(page);
  }

  #longPacket(packet: Uint8Array, options: OggPageOptions): Uint8Array {
    const pages: Uint8Array[] = [];
    let offset = 0;
    let first = true;
    for (;;) {
      const left = packet.length - offset;
      // A page of 255 full segments continues the packet; the final page
      // carries the rest plus its terminating lacing value.
      const last = left < MAX_SEGMENTS * 255;
      const chunk = last ? left : MAX_SEGMENTS * 255;
      const laces = last ? Math.floor(left / 255) + 1 : MAX_SEGMENTS;
      const lacing = new Uint8Array(laces).fill(255);
      if (last) lacing[laces - 1] = left % 255;
      const flags =
        (first ? 0 : FLAG_CONTINUED) |
        (first && options.bos ? FLAG_BOS : 0) |
        (last && options.eos ? FLAG_EOS : 0);
      const page = this.#header(lacing, chunk, last ? options.granule : NO_GRANULE, flags);
      page.set(packet.subarray(offset, offset + chunk), OGG_HEADER_BYTES + laces);
      pages.push(this.#seal(page));
      offset += chunk;
      first = false;
      if (last) break;
    }
    return joinParts({ parts: pages, size: pages.reduce((s, p) => s + p.length, 0) });
  }

  #header(lacing: Uint8Array, bodyBytes: number, granule: bigint, flags: number): Uint8Array {
    const page = new Uint8Array(OGG_HEADER_BYTES + lacing.length + bodyBytes);
    const view = new DataView(page.buffer);
    view.setUint32(0, CAPTURE_PATTERN, true);
    page[4] = 0;
    page[5] = flags;
    view.setBigInt64(6, BigInt.asIntN(64, granule), true);
    view.setUint32(14, this.serial, true);
    view.setUint32(18, this.#sequence, true);
    this.#sequence = (this.#sequence + 1) >>> 0;
    page[26] = lacing.length;
    page.set(lacing, OGG_HEADER_BYTES);
    return page;
  }

  #seal(page: Uint8Array): Uint8Array {
    new DataView(page.buffer).setUint32(22, oggPageCrc(page), true);
    return page;
  }
}

/** The largest page an Ogg stream can hold, in bytes (for callers sizing buffers). */
export const MAX_OGG_PAGE_BYTES = MAX_PAGE_BYTES;
