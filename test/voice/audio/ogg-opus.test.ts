import { Decoder, Encoder } from '@evan/opus';
import { describe, expect, it } from 'vitest';
import { AudioFormatError, ConfigError } from '../../../src/errors.js';
import { OggReader, OggWriter } from '../../../src/voice/audio/ogg.js';
import { OggOpusDecoder, OggOpusEncoder } from '../../../src/voice/audio/ogg-opus.js';
import { concatPcm } from '../../../src/voice/audio/pcm.js';
import { firstDifference } from '../../helpers/audio.js';

const RATE = 24_000;

/** A signal that is not periodic (a chirp plus a wobbling tone), so alignment is unambiguous. */
function speechLike(rate: number, seconds: number): Int16Array {
  const n = Math.round(rate * seconds);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const t = i / rate;
    out[i] = Math.round(
      6000 * Math.sin(2 * Math.PI * (200 * t + 900 * t * t)) +
        3000 * Math.sin(2 * Math.PI * 1300 * t + Math.sin(2 * Math.PI * 3 * t)),
    );
  }
  return out;
}

function concatBytes(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** Best normalised correlation of `y` against `x` over lags in ±maxLag, ignoring the edges. */
function bestCorrelation(
  x: Int16Array,
  y: Int16Array,
  maxLag = 300,
): { correlation: number; lag: number } {
  let best = { correlation: -1, lag: 0 };
  const edge = maxLag + 500;
  for (let lag = -maxLag; lag <= maxLag; lag++) {
    let xy = 0;
    let xx = 0;
    let yy = 0;
    for (let i = edge; i < x.length - edge; i++) {
      const a = x[i]!;
      const b = y[i + lag] ?? 0;
      xy += a * b;
      xx += a * a;
      yy += b * b;
    }
    const correlation = xy / Math.sqrt(xx * yy);
    if (correlation > best.correlation) best = { correlation, lag };
  }
  return best;
}

/** Encodes a whole signal, pushing it in 20 ms chunks as a TTS stream would. */
function encodeAll(pcm: Int16Array, encoder = new OggOpusEncoder(), chunk = 480): Uint8Array {
  const parts: Uint8Array[] = [];
  for (let i = 0; i < pcm.length; i += chunk) parts.push(encoder.push(pcm.subarray(i, i + chunk)));
  parts.push(encoder.flush());
  return concatBytes(parts);
}

/** Splits a byte stream into its Ogg pages (by their lacing tables). */
function splitPages(bytes: Uint8Array): Uint8Array[] {
  const pages: Uint8Array[] = [];
  for (let at = 0; at < bytes.length;) {
    const segments = bytes[at + 26]!;
    let body = 0;
    for (let i = 0; i < segments; i++) body += bytes[at + 27 + i]!;
    const end = at + 27 + segments + body;
    pages.push(bytes.subarray(at, end));
    at = end;
  }
  return pages;
}

function opusHead(channels: number, preSkip: number, rate: number, mapping = 0): Uint8Array {
  const head = new Uint8Array(19);
  const view = new DataView(head.buffer);
  head.set(new TextEncoder().encode('OpusHead'));
  head[8] = 1;
  head[9] = channels;
  view.setUint16(10, preSkip, true);
  view.setUint32(12, rate, true);
  head[18] = mapping;
  return head;
}

function opusTags(): Uint8Array {
  const tags = new Uint8Array(16);
  tags.set(new TextEncoder().encode('OpusTags'));
  return tags; // vendor length 0, no comments
}

describe('OggOpusEncoder and OggOpusDecoder', () => {
  it('round-trips a signal to the same length and a closely correlated waveform', () => {
    const input = speechLike(RATE, 1.013); // not a whole number of frames
    const output = new OggOpusDecoder().push(encodeAll(input));
    // Pre-skip removes the encoder's delay and the EOS granule trims the padding: exact length.
    expect(output.length).toBe(input.length);
    const { correlation, lag } = bestCorrelation(input, output);
    expect(correlation).toBeGreaterThan(0.95);
    expect(Math.abs(lag)).toBeLessThanOrEqual(2);
  });

  it('decodes the same audio fed all at once, page by page or byte by byte', () => {
    const bytes = encodeAll(speechLike(RATE, 0.5));
    const whole = new OggOpusDecoder().push(bytes);
    const byPage = new OggOpusDecoder();
    const pages = splitPages(bytes).map((page) => byPage.push(page));
    expect(firstDifference(concatPcm(pages), whole)).toBe(-1);
    const byByte = new OggOpusDecoder();
    const bytewise: Int16Array[] = [];
    for (let i = 0; i < bytes.length; i++) bytewise.push(byByte.push(bytes.subarray(i, i + 1)));
    expect(firstDifference(concatPcm(bytewise), whole)).toBe(-1);
  });

  it('writes OpusHead and OpusTags pages first, on the first push', () => {
    const encoder = new OggOpusEncoder({ serial: 77 });
    const first = encoder.push(new Int16Array(100)); // less than a frame: headers only
    const packets = new OggReader().push(first);
    expect(packets).toHaveLength(2);
    const [head, tags] = packets;
    expect(new TextDecoder().decode(head!.data.subarray(0, 8))).toBe('OpusHead');
    expect(head!.bos).toBe(true);
    expect(head!.granule).toBe(0n);
    expect(head!.serial).toBe(77);
    const view = new DataView(head!.data.buffer);
    expect(head!.data[9]).toBe(1); // mono
    expect(view.getUint16(10, true)).toBe(encoder.preSkip);
    expect(view.getUint32(12, true)).toBe(24_000);
    expect(new TextDecoder().decode(tags!.data.subarray(0, 8))).toBe('OpusTags');
    expect(tags!.pageSequence).toBe(1);
    expect(encoder.push(new Int16Array(0)).length).toBe(0);
  });

  it('puts two 20 ms frames on each page, granule positions counting 48 kHz samples decoded', () => {
    const encoder = new OggOpusEncoder();
    const input = new Int16Array(RATE); // 1 s = 50 frames = 25 pages
    const packets = new OggReader().push(encodeAll(input, encoder, 1000));
    const audio = packets.slice(2);
    const preSkip = BigInt(encoder.preSkip);
    expect(encoder.preSkip).toBe(312); // libopus's 6.5 ms look-ahead at 48 kHz
    const probe = new Decoder({ channels: 1, sample_rate: 24_000 });
    for (const packet of audio.slice(0, -3)) expect(probe.decode(packet.data).length / 2).toBe(480);
    // Pages of two frames until the end.
    expect(audio[0]!.pageSequence).toBe(2);
    expect(audio[1]!.pageSequence).toBe(2);
    // RFC 7845 §4.2: the first page's granule minus its samples is the start, 0.
    expect(audio[0]!.granule).toBe(2n * 960n);
    expect(audio[2]!.granule).toBe(4n * 960n);
    // The last page carries the remaining frames plus padding for the look-ahead,
    // and a granule position of pre-skip + input that trims the padding away.
    const last = audio[audio.length - 1]!;
    expect(last.eos).toBe(true);
    expect(last.granule).toBe(preSkip + 48_000n);
  });

  it('starts a new chained stream after flush(), which the decoder follows', () => {
    const encoder = new OggOpusEncoder({ serial: 5 });
    const a = speechLike(RATE, 0.3);
    const b = speechLike(RATE, 0.2);
    const bytes = concatBytes([encodeAll(a, encoder), encodeAll(b, encoder)]);
    const serials = new Set(new OggReader().push(bytes).map((p) => p.serial));
    expect([...serials]).toEqual([5, 6]);
    expect(new OggOpusDecoder().push(bytes).length).toBe(a.length + b.length);
  });

  it('writes a valid, empty stream when flushed without audio', () => {
    const bytes = new OggOpusEncoder().flush();
    const packets = new OggReader().push(bytes);
    expect(packets.map((p) => [p.bos, p.eos])).toEqual([
      [true, false],
      [false, false],
      [false, true],
    ]);
    expect(new OggOpusDecoder().push(bytes).length).toBe(0);
  });

  it('takes 22,050 Hz input (espeak) by resampling to 48 kHz, and can decode to that rate', () => {
    const input = speechLike(22_050, 0.5);
    const bytes = encodeAll(input, new OggOpusEncoder({ sampleRate: 22_050 }), 441);
    const output = new OggOpusDecoder({ sampleRate: 22_050 }).push(bytes);
    expect(output.length).toBe(input.length);
    expect(bestCorrelation(input, output).correlation).toBeGreaterThan(0.95);
  });

  it('decodes to 16 kHz for speech recognition', () => {
    const bytes = encodeAll(speechLike(RATE, 0.6));
    expect(new OggOpusDecoder({ sampleRate: 16_000 }).push(bytes).length).toBe(9600);
  });

  it('downmixes a stereo stream to mono', () => {
    const mono = speechLike(48_000, 0.4);
    const stereo = new Int16Array(mono.length * 2);
    for (let i = 0; i < mono.length; i++) {
      stereo[2 * i] = mono[i]!;
      stereo[2 * i + 1] = mono[i]!;
    }
    const encoder = new Encoder({ channels: 2, sample_rate: 48_000 });
    const preSkip = encoder.ctl(4027);
    const writer = new OggWriter(11);
    const pages = [
      writer.page([opusHead(2, preSkip, 48_000)], { granule: 0n, bos: true }),
      writer.page([opusTags()], { granule: 0n }),
    ];
    const frame = 960;
    for (let i = 0; i + frame <= mono.length; i += frame) {
      const last = i + 2 * frame > mono.length;
      const packet = encoder.encode(stereo.subarray(2 * i, 2 * (i + frame)));
      // Granule positions count decoded samples, pre-skip included (RFC 7845 §4).
      pages.push(writer.page([packet], { granule: BigInt(i + frame), eos: last }));
    }
    const output = new OggOpusDecoder({ sampleRate: 48_000 }).push(concatBytes(pages));
    // Whole frames and no padding: the stream ends pre-skip samples short of the input.
    expect(output.length).toBe(mono.length - preSkip);
    expect(bestCorrelation(mono, output).correlation).toBeGreaterThan(0.95);
  });

  it('applies OpusHead’s output gain', () => {
    const input = speechLike(RATE, 0.3);
    const bytes = encodeAll(input);
    const loud = bytes.slice();
    // Rewrite OpusHead's gain to -6.02 dB (Q7.8) and fix the page CRC by rewriting the page.
    const pages = splitPages(loud);
    const head = new OggReader().push(pages[0]!)[0]!.data;
    new DataView(head.buffer).setInt16(16, Math.round(-6.0206 * 256), true);
    const rewritten = concatBytes([
      new OggWriter(new DataView(pages[0]!.buffer, pages[0]!.byteOffset).getUint32(14, true)).page(
        [head],
        {
          granule: 0n,
          bos: true,
        },
      ),
      ...pages.slice(1),
    ]);
    const normal = new OggOpusDecoder().push(bytes);
    const halved = new OggOpusDecoder().push(rewritten);
    let ratio = 0;
    let count = 0;
    for (let i = 1000; i < normal.length - 1000; i += 97) {
      if (Math.abs(normal[i]!) > 2000) {
        ratio += halved[i]! / normal[i]!;
        count++;
      }
    }
    expect(ratio / count).toBeCloseTo(0.5, 1);
  });

  it('encodes and decodes a second of audio well under real time (printed)', () => {
    const input = speechLike(RATE, 1);
    encodeAll(input); // warm up
    // Best of several runs: it measures the code, not other processes on a busy 2-core box.
    let encodeMs = Number.POSITIVE_INFINITY;
    let bytes: Uint8Array = new Uint8Array(0);
    for (let r = 0; r < 5; r++) {
      const started = performance.now();
      bytes = encodeAll(input);
      encodeMs = Math.min(encodeMs, performance.now() - started);
    }
    const pages = splitPages(bytes);
    new OggOpusDecoder().push(bytes);
    let decodeMs = Number.POSITIVE_INFINITY;
    for (let r = 0; r < 5; r++) {
      const started = performance.now();
      const decoder = new OggOpusDecoder();
      for (const page of pages) decoder.push(page);
      decodeMs = Math.min(decodeMs, performance.now() - started);
    }
    console.log(
      `Ogg/Opus per second of 24 kHz mono: encode ${encodeMs.toFixed(2)} ms, decode ${decodeMs.toFixed(2)} ms, ${bytes.length} bytes (${((bytes.length * 8) / 1000).toFixed(1)} kbit/s)`,
    );
    // Printed, not asserted: on a shared machine other processes set the times.
    expect(bytes.length).toBeGreaterThan(0);
  });
});

describe('OggOpusDecoder errors', () => {
  it('reports CRC corruption and keeps decoding the pages after it', () => {
    const input = speechLike(RATE, 0.5);
    const bytes = encodeAll(input);
    const pages = splitPages(bytes).map((p) => p.slice());
    pages[5]![40]! ^= 0x55;
    const decoder = new OggOpusDecoder();
    const out: Int16Array[] = [];
    const errors: unknown[] = [];
    for (const page of pages) {
      try {
        out.push(decoder.push(page));
      } catch (error) {
        errors.push(error);
      }
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(AudioFormatError);
    expect(String(errors[0])).toMatch(/CRC mismatch/);
    // One 40 ms page is missing; everything else decoded.
    expect(concatPcm(out).length).toBe(input.length - 960);
  });

  it('rejects raw Opus packets that lack Ogg framing, and still accepts Ogg afterwards', () => {
    const raw = new Encoder({ channels: 1, sample_rate: 24_000 }).encode(new Int16Array(480));
    const decoder = new OggOpusDecoder();
    expect(() => decoder.push(raw)).toThrow(AudioFormatError);
    expect(() => decoder.push(raw)).toThrow(
      /^Expected Ogg\/Opus: the first page must carry OpusHead \(got [0-9a-f ]+.*not an Ogg page; raw Opus packets need Ogg framing/,
    );
    const input = speechLike(RATE, 0.2);
    expect(decoder.push(encodeAll(input)).length).toBe(input.length);
  });

  it('rejects garbage bytes with a clear message', () => {
    const decoder = new OggOpusDecoder();
    const garbage = new TextEncoder().encode('hello, this is not audio at all');
    expect(() => decoder.push(garbage)).toThrow(/Expected Ogg\/Opus.*got "hello, t"/);
  });

  it('rejects an Ogg stream of another codec', () => {
    const writer = new OggWriter(1);
    const vorbis = writer.page([new TextEncoder().encode('\u0001vorbis\u0000\u0000\u0000\u0000')], {
      granule: 0n,
      bos: true,
    });
    expect(() => new OggOpusDecoder().push(vorbis)).toThrow(
      /first page must carry OpusHead \(got a stream whose first packet is .*which is not Opus/,
    );
  });

  it('rejects audio before OpusHead', () => {
    const writer = new OggWriter(1);
    const page = writer.page([new Uint8Array([0xfc, 0xff, 0xfe])], { granule: 960n });
    expect(() => new OggOpusDecoder().push(page)).toThrow(/before any OpusHead/);
  });

  it('rejects multistream (channel mapping family 1) with what to send instead', () => {
    const writer = new OggWriter(1);
    const page = writer.page(
      [concatBytes([opusHead(6, 312, 48_000, 1), new Uint8Array([4, 2, 0, 4, 1, 2, 3, 5])])],
      {
        granule: 0n,
        bos: true,
      },
    );
    expect(() => new OggOpusDecoder().push(page)).toThrow(
      /channel mapping family 1.*mono or stereo/,
    );
  });

  it('reports a corrupt Opus packet, keeps the audio around it, and stays usable', () => {
    const input = speechLike(RATE, 0.4);
    const encoder = new OggOpusEncoder({ framesPerPage: 1 });
    const bytes = encodeAll(input, encoder);
    const pages = splitPages(bytes);
    // Page 6 carries one audio packet; replace it with bytes libopus refuses, with a valid CRC.
    const sequence6 = new DataView(pages[6]!.buffer, pages[6]!.byteOffset).getUint32(18, true);
    expect(sequence6).toBe(6);
    const writer = new OggWriter(encoder.serial - 1);
    for (let i = 0; i < 6; i++) writer.page([new Uint8Array(1)], { granule: 0n }); // advance sequence numbers
    const broken = writer.page([new Uint8Array([0xff, 0xff, 0xff])], { granule: 99n });
    const stream = concatBytes([...pages.slice(0, 6), broken, ...pages.slice(7)]);
    const decoder = new OggOpusDecoder();
    let error: unknown;
    try {
      decoder.push(stream);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(AudioFormatError);
    expect(String(error)).toMatch(
      /Corrupt Opus packet in page 6 .*libopus rejected it.*later pages still decode/,
    );
    // Everything but the broken 20 ms frame comes out on the next push.
    expect(decoder.push(new Uint8Array(0)).length).toBe(input.length - 480);
  });

  it('throws when used after close()', () => {
    const decoder = new OggOpusDecoder();
    decoder.close();
    expect(() => decoder.push(new Uint8Array(0))).toThrow(/after close/);
    const encoder = new OggOpusEncoder();
    encoder.close();
    expect(() => encoder.push(new Int16Array(0))).toThrow(/after close/);
    expect(() => encoder.flush()).toThrow(/after close/);
  });

  it('rejects encoder options libopus cannot honour', () => {
    expect(() => new OggOpusEncoder({ frameMs: 30 })).toThrow(ConfigError);
    expect(() => new OggOpusEncoder({ frameMs: 30 })).toThrow(/2\.5, 5, 10, 20, 40 or 60/);
    expect(() => new OggOpusEncoder({ framesPerPage: 0 })).toThrow(/framesPerPage 0/);
    expect(() => new OggOpusEncoder({ bitrate: 10 })).toThrow(/500–512000/);
    expect(() => new OggOpusEncoder({ sampleRate: 1000 })).toThrow(AudioFormatError);
    expect(() => new OggOpusDecoder({ sampleRate: 500_000 })).toThrow(AudioFormatError);
    expect(() => new OggOpusEncoder().push([1, 2] as unknown as Int16Array)).toThrow(/Int16Array/);
  });
});
