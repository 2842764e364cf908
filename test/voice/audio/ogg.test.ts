import { describe, expect, it } from 'vitest';
import { AudioFormatError } from '../../../src/errors.js';
import {
  MAX_OGG_PACKET_BYTES,
  OggReader,
  OggWriter,
  oggCrc32,
  oggPageCrc,
} from '../../../src/voice/audio/ogg.js';
import type { OggPacket } from '../../../src/voice/audio/ogg.js';

function bytesOf(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** A small stream: three pages, the middle one with several packets. */
function sampleStream(writer = new OggWriter(0x1234)): {
  bytes: Uint8Array;
  packets: Uint8Array[];
} {
  const packets = [
    bytesOf(19, 1),
    bytesOf(0, 2),
    bytesOf(254, 3),
    bytesOf(255, 4),
    bytesOf(600, 5),
  ];
  const pages = [
    writer.page([packets[0]!], { granule: 0n, bos: true }),
    writer.page([packets[1]!, packets[2]!, packets[3]!], { granule: 960n }),
    writer.page([packets[4]!], { granule: 1920n, eos: true }),
  ];
  return { bytes: concat(pages), packets };
}

function summary(packets: OggPacket[]): unknown[] {
  return packets.map((p) => [p.data.length, p.granule, p.bos, p.eos, p.serial, p.pageSequence]);
}

describe('oggCrc32', () => {
  it('matches the CRC-32/CKSUM check value without its final XOR (Ogg’s variant)', () => {
    // CRC-32/CKSUM (poly 0x04C11DB7, init 0, no reflection) checks to 0x765E7680 after XOR 0xFFFFFFFF.
    expect(oggCrc32(new TextEncoder().encode('123456789'))).toBe((0x765e7680 ^ 0xffffffff) >>> 0);
  });
});

describe('OggWriter', () => {
  it('writes the page header fields RFC 3533 defines', () => {
    const writer = new OggWriter(0xdeadbeef);
    const page = writer.page([bytesOf(300, 0)], { granule: 123456789012n, bos: true, eos: true });
    const view = new DataView(page.buffer);
    expect(Buffer.from(page.subarray(0, 4)).toString('latin1')).toBe('OggS');
    expect(page[4]).toBe(0);
    expect(page[5]).toBe(0x06);
    expect(view.getBigInt64(6, true)).toBe(123456789012n);
    expect(view.getUint32(14, true)).toBe(0xdeadbeef);
    expect(view.getUint32(18, true)).toBe(0);
    expect(view.getUint32(22, true)).toBe(oggPageCrc(page));
    expect(Array.from(page.subarray(26, 29))).toEqual([2, 255, 45]);
    expect(page.length).toBe(27 + 2 + 300);
    expect(writer.nextPageSequence).toBe(1);
  });

  it('ends a packet whose length is a multiple of 255 with a zero lacing value', () => {
    const page = new OggWriter(1).page([bytesOf(510, 0)], { granule: 0n });
    expect(Array.from(page.subarray(26, 30))).toEqual([3, 255, 255, 0]);
  });

  it('refuses several packets that need more than 255 lacing values on one page', () => {
    const writer = new OggWriter(1);
    expect(() => writer.page([bytesOf(40_000, 0), bytesOf(40_000, 1)], { granule: 0n })).toThrow(
      /a page holds 255/,
    );
  });

  it('rejects a serial number that does not fit 32 bits', () => {
    expect(() => new OggWriter(-1)).toThrow(AudioFormatError);
    expect(() => new OggWriter(2 ** 32)).toThrow(/0 to 4294967295/);
  });
});

describe('OggReader', () => {
  it('reads back what OggWriter wrote: data, granule, flags, serial and sequence', () => {
    const { bytes, packets } = sampleStream();
    const read = new OggReader().push(bytes);
    expect(read.map((p) => Array.from(p.data))).toEqual(packets.map((p) => Array.from(p)));
    expect(summary(read)).toEqual([
      [19, 0n, true, false, 0x1234, 0],
      [0, 960n, false, false, 0x1234, 1],
      [254, 960n, false, false, 0x1234, 1],
      [255, 960n, false, false, 0x1234, 1],
      [600, 1920n, false, true, 0x1234, 2],
    ]);
  });

  it('gives the same packets fed byte by byte, page by page or all at once', () => {
    const { bytes } = sampleStream();
    const whole = summary(new OggReader().push(bytes));
    const reader = new OggReader();
    const byByte: OggPacket[] = [];
    for (let i = 0; i < bytes.length; i++) byByte.push(...reader.push(bytes.subarray(i, i + 1)));
    expect(summary(byByte)).toEqual(whole);
    expect(reader.bufferedBytes).toBe(0);
    const uneven = new OggReader();
    const chunks: OggPacket[] = [];
    for (let i = 0, size = 5; i < bytes.length; i += size, size = (size * 3) % 97) {
      chunks.push(...uneven.push(bytes.subarray(i, i + size)));
    }
    expect(summary(chunks)).toEqual(whole);
  });

  it('returns packets as standalone copies', () => {
    const { bytes } = sampleStream();
    const [first] = new OggReader().push(bytes);
    expect(first!.data.byteOffset).toBe(0);
    expect(first!.data.buffer.byteLength).toBe(first!.data.length);
  });

  it('joins a packet continued across pages (granule -1 on the pages it spans)', () => {
    const big = bytesOf(150_000, 9);
    const writer = new OggWriter(7);
    const bytes = concat([
      writer.page([bytesOf(10, 1)], { granule: 0n, bos: true }),
      writer.page([big], { granule: 48_000n, eos: true }),
    ]);
    // Three pages for the big packet: 65,025 + 65,025 + 19,950 bytes.
    expect(writer.nextPageSequence).toBe(4);
    const pageGranules: bigint[] = [];
    for (let at = 0; at < bytes.length;) {
      const view = new DataView(bytes.buffer, at);
      pageGranules.push(view.getBigInt64(6, true));
      const segments = bytes[at + 26]!;
      let body = 0;
      for (let i = 0; i < segments; i++) body += bytes[at + 27 + i]!;
      at += 27 + segments + body;
    }
    expect(pageGranules).toEqual([0n, -1n, -1n, 48_000n]);
    const read = new OggReader().push(bytes);
    expect(read).toHaveLength(2);
    expect(Buffer.from(read[1]!.data).equals(big)).toBe(true);
    expect(read[1]!.granule).toBe(48_000n);
    expect(read[1]!.pageSequence).toBe(3);
    expect(read[1]!.eos).toBe(true);
  });

  it('reports a CRC mismatch and carries on with the next page', () => {
    const { bytes } = sampleStream();
    const corrupt = bytes.slice();
    const secondPage = 27 + 1 + 19;
    corrupt[secondPage + 40]! ^= 0x01; // a body byte of page 1
    const reader = new OggReader();
    expect(() => reader.push(corrupt)).toThrow(AudioFormatError);
    // The page before the bad one came out of the same push: it is returned now, with what follows.
    const rest = reader.push(new Uint8Array(0));
    expect(summary(rest)).toEqual([
      [19, 0n, true, false, 0x1234, 0],
      [600, 1920n, false, true, 0x1234, 2],
    ]);
  });

  it('names the CRC mismatch in its message', () => {
    const { bytes } = sampleStream();
    const corrupt = bytes.slice();
    corrupt[22]! ^= 0xff;
    expect(() => new OggReader().push(corrupt)).toThrow(/page 0: CRC mismatch \(stored 0x/);
  });

  it('reports bytes without the "OggS" capture pattern, then resynchronises', () => {
    const { bytes } = sampleStream();
    const reader = new OggReader();
    expect(() => reader.push(new Uint8Array([0x78, 0x01, 0x02, 0x03]))).toThrow(
      /expected the "OggS" capture pattern.*got 78 01 02 03/,
    );
    expect(() => reader.push(concat([bytesOf(50, 3), bytes]))).toThrow(AudioFormatError);
    expect(reader.push(new Uint8Array(0))).toHaveLength(5);
  });

  it('reports junk as soon as it arrives, even a few bytes', () => {
    expect(() => new OggReader().push(new Uint8Array([0x4f, 0x67, 0x00]))).toThrow(/"OggS"/);
  });

  it('rejects a page of an unknown stream structure version', () => {
    const page = new OggWriter(1).page([bytesOf(5, 0)], { granule: 0n });
    page[4] = 1;
    expect(() => new OggReader().push(page)).toThrow(/version 1, only version 0 exists/);
  });

  it('drops a packet that grows past the size cap and skips the rest of it', () => {
    const writer = new OggWriter(3);
    const huge = writer.page([new Uint8Array(2 * MAX_OGG_PACKET_BYTES)], { granule: 0n });
    const after = writer.page([bytesOf(10, 0)], { granule: 1n });
    const reader = new OggReader();
    const errors: unknown[] = [];
    const read: OggPacket[] = [];
    const pageBytes = 27 + 255 + 255 * 255;
    for (let at = 0; at < huge.length; at += pageBytes) {
      try {
        read.push(...reader.push(huge.subarray(at, at + pageBytes)));
      } catch (error) {
        errors.push(error);
      }
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(AudioFormatError);
    expect(String(errors[0])).toMatch(/grew past 1048576 bytes.*dropped/);
    expect(read).toHaveLength(0);
    expect(summary(reader.push(after))).toEqual([[10, 1n, false, false, 3, 33]]);
  });

  it('skips the orphaned tail of a packet whose start it never saw', () => {
    const writer = new OggWriter(5);
    const pages = writer.page([bytesOf(70_000, 1)], { granule: 10n });
    const firstPageLength = 27 + 255 + 255 * 255;
    const next = writer.page([bytesOf(3, 2)], { granule: 20n });
    const read = new OggReader().push(concat([pages.subarray(firstPageLength), next]));
    // The 70,000-byte packet took pages 0 and 1; only page 1 was fed.
    expect(summary(read)).toEqual([[3, 20n, false, false, 5, 2]]);
  });

  it('keeps logical streams apart by serial number', () => {
    const a = new OggWriter(1);
    const b = new OggWriter(2);
    const bigA = bytesOf(300, 1);
    const bigB = bytesOf(400, 2);
    // Interleave: each big packet spans two pages, alternating streams.
    const pageA = a.page([bigA], { granule: 1n });
    const pageB = b.page([bigB], { granule: 2n });
    const read = new OggReader().push(concat([pageA, pageB]));
    expect(read.map((p) => [p.serial, p.data.length])).toEqual([
      [1, 300],
      [2, 400],
    ]);
  });

  it('rejects input that is not bytes', () => {
    expect(() => new OggReader().push('OggS' as unknown as Uint8Array)).toThrow(/Uint8Array/);
  });

  it('reads a minute of 40 ms pages quickly', () => {
    const writer = new OggWriter(9);
    const pages: Uint8Array[] = [];
    for (let i = 0; i < 1500; i++)
      pages.push(writer.page([bytesOf(80, i), bytesOf(80, i + 1)], { granule: BigInt(i) }));
    const reader = new OggReader();
    const started = performance.now();
    let count = 0;
    for (const page of pages) count += reader.push(page).length;
    const ms = performance.now() - started;
    console.log(`OggReader: ${(ms / 60).toFixed(3)} ms per second of 2-frame pages`);
    expect(count).toBe(3000);
  });
});
