import { describe, expect, it } from 'vitest';
import { AudioFormatError } from '../../../src/errors.js';
import { firstDifference } from '../../helpers/audio.js';
import {
  PCM16_SAMPLE_RATE,
  Pcm16Decoder,
  encodePcm16Base64,
  float32ToInt16,
  int16ToFloat32,
  readWav,
  samplesToMs,
  writeWav,
} from '../../../src/voice/audio/pcm.js';

/** Base64 of raw bytes. */
function b64(bytes: number[]): string {
  return Buffer.from(bytes).toString('base64');
}

/** A WAV file built chunk by chunk, for the reader's odd cases. */
function wavFile(
  chunks: { id: string; body: Uint8Array; declaredSize?: number }[],
  riffId = 'RIFF',
): Uint8Array {
  const parts: Buffer[] = [Buffer.from(riffId), Buffer.alloc(4), Buffer.from('WAVE')];
  for (const { id, body, declaredSize } of chunks) {
    const header = Buffer.alloc(8);
    header.write(id, 0, 'latin1');
    header.writeUInt32LE(declaredSize ?? body.length, 4);
    parts.push(header, Buffer.from(body));
    if (body.length % 2 === 1 && declaredSize === undefined) parts.push(Buffer.alloc(1));
  }
  const file = Buffer.concat(parts);
  file.writeUInt32LE(file.length - 8, 4);
  return new Uint8Array(file);
}

function fmtChunk(tag: number, channels: number, rate: number, bits: number): Uint8Array {
  const b = Buffer.alloc(16);
  b.writeUInt16LE(tag, 0);
  b.writeUInt16LE(channels, 2);
  b.writeUInt32LE(rate, 4);
  b.writeUInt32LE((rate * channels * bits) / 8, 8);
  b.writeUInt16LE((channels * bits) / 8, 12);
  b.writeUInt16LE(bits, 14);
  return b;
}

function int16Bytes(samples: number[]): Uint8Array {
  return new Uint8Array(new Int16Array(samples).buffer);
}

describe('Pcm16Decoder', () => {
  it('uses 24 kHz as the Realtime default rate', () => {
    expect(PCM16_SAMPLE_RATE).toBe(24_000);
  });

  it('decodes base64 little-endian PCM16 into samples', () => {
    const out = new Pcm16Decoder().push(b64([0x01, 0x00, 0xff, 0x7f, 0x00, 0x80, 0xff, 0xff]));
    expect(Array.from(out)).toEqual([1, 32767, -32768, -1]);
  });

  it('returns a standalone, aligned array that owns its whole buffer', () => {
    const out = new Pcm16Decoder().push(b64([1, 0, 2, 0, 3, 0]));
    expect(out.byteOffset).toBe(0);
    expect(out.buffer.byteLength).toBe(out.byteLength);
  });

  it('carries an odd trailing byte over to the next push', () => {
    const bytes = Array.from({ length: 101 }, (_, i) => (i * 37) & 0xff);
    const whole = new Pcm16Decoder().push(b64(bytes.slice(0, 100)));
    const decoder = new Pcm16Decoder();
    const a = decoder.push(b64(bytes.slice(0, 33)));
    expect(a.length).toBe(16);
    expect(decoder.pendingBytes).toBe(1);
    const b = decoder.push(b64(bytes.slice(33, 34))); // a single byte completes one sample
    const c = decoder.push(b64(bytes.slice(34, 101)));
    expect(decoder.pendingBytes).toBe(1);
    expect([...a, ...b, ...c]).toEqual(Array.from(whole));
  });

  it('returns an empty array for an empty string', () => {
    expect(new Pcm16Decoder().push('').length).toBe(0);
  });

  it('rejects characters outside the base64 alphabet, naming the character and offset', () => {
    const decoder = new Pcm16Decoder();
    expect(() => decoder.push('AAAA*AAA')).toThrow(AudioFormatError);
    expect(() => decoder.push('AAAA*AAA')).toThrow(/'\*' at offset 4/);
    expect(() => decoder.push('AAAA AAA')).toThrow(/line breaks or spaces/);
  });

  it('rejects base64url, which Node would otherwise accept silently', () => {
    expect(() => new Pcm16Decoder().push('AA-_')).toThrow(/base64url/);
  });

  it('rejects bad padding and lengths that are not a multiple of 4', () => {
    const decoder = new Pcm16Decoder();
    expect(() => decoder.push('QQ=A')).toThrow(/padding/);
    expect(() => decoder.push('A===')).toThrow(AudioFormatError);
    expect(() => decoder.push('AA==AAAA')).toThrow(/padding/);
    expect(() => decoder.push('AAAAA')).toThrow(/not a multiple of 4/);
  });

  it('rejects a non-string payload with a clear message', () => {
    const decoder = new Pcm16Decoder();
    expect(() => decoder.push(null as unknown as string)).toThrow(/base64 string, got null/);
    expect(() => decoder.push(42 as unknown as string)).toThrow(/got number/);
  });

  it('keeps the carried byte when a push fails, and drops it on reset()', () => {
    const decoder = new Pcm16Decoder();
    decoder.push(b64([0x34]));
    expect(() => decoder.push('****')).toThrow(AudioFormatError);
    expect(Array.from(decoder.push(b64([0x12])))).toEqual([0x1234]);
    decoder.push(b64([0x34]));
    decoder.reset();
    expect(decoder.pendingBytes).toBe(0);
    expect(Array.from(decoder.push(b64([0x01, 0x00])))).toEqual([1]);
  });

  it('decodes a second of audio quickly', () => {
    const pcm = new Int16Array(PCM16_SAMPLE_RATE);
    for (let i = 0; i < pcm.length; i++) pcm[i] = (i * 7919) & 0x7fff;
    const text = encodePcm16Base64(pcm);
    const decoder = new Pcm16Decoder();
    const started = performance.now();
    const out = decoder.push(text);
    const ms = performance.now() - started;
    console.log(`Pcm16Decoder: ${ms.toFixed(3)} ms per second of 24 kHz audio`);
    expect(firstDifference(out, pcm)).toBe(-1);
  });
});

describe('encodePcm16Base64', () => {
  it('round-trips through Pcm16Decoder, also from a subarray at an offset', () => {
    const backing = new Int16Array([9, 1, -2, 32767, -32768, 0, 9]);
    const view = backing.subarray(1, 6);
    const text = encodePcm16Base64(view);
    expect(text).toBe(b64([1, 0, 0xfe, 0xff, 0xff, 0x7f, 0x00, 0x80, 0, 0]));
    expect(Array.from(new Pcm16Decoder().push(text))).toEqual(Array.from(view));
  });
});

describe('int16ToFloat32 and float32ToInt16', () => {
  it('round-trips every int16 value exactly', () => {
    const all = new Int16Array(65536);
    for (let i = 0; i < all.length; i++) all[i] = i - 32768;
    expect(firstDifference(float32ToInt16(int16ToFloat32(all)), all)).toBe(-1);
  });

  it('scales to [-1, 1) and clamps out-of-range floats', () => {
    expect(Array.from(int16ToFloat32(new Int16Array([-32768, 0, 16384])))).toEqual([-1, 0, 0.5]);
    expect(Array.from(float32ToInt16([1, -1, 2, -2, 0.5, Number.NaN]))).toEqual([
      32767, -32768, 32767, -32768, 16384, 0,
    ]);
  });
});

describe('samplesToMs', () => {
  it('converts a sample count to milliseconds at a rate', () => {
    expect(samplesToMs(480, 24_000)).toBe(20);
    expect(samplesToMs(22_050, 22_050)).toBe(1000);
  });
});

describe('readWav and writeWav', () => {
  it('round-trips mono PCM16 through a 44-byte-header file', () => {
    const pcm = new Int16Array([0, 1, -1, 32767, -32768, 1234]);
    const file = writeWav(pcm, 22_050);
    expect(file.length).toBe(44 + pcm.length * 2);
    expect(Buffer.from(file.subarray(0, 4)).toString('latin1')).toBe('RIFF');
    const back = readWav(file);
    expect(back).toEqual({ sampleRate: 22_050, channels: 1, pcm });
    expect(back.pcm.byteOffset).toBe(0);
  });

  it('reads a file whose bytes sit at an odd offset of a larger buffer', () => {
    const file = writeWav(new Int16Array([5, -5, 7]), 16_000);
    const big = new Uint8Array(file.length + 1);
    big.set(file, 1);
    expect(Array.from(readWav(big.subarray(1)).pcm)).toEqual([5, -5, 7]);
  });

  it('mixes stereo down to mono by averaging the channels', () => {
    const file = wavFile([
      { id: 'fmt ', body: fmtChunk(1, 2, 48_000, 16) },
      { id: 'data', body: int16Bytes([100, 300, -100, -300, 32767, 32767]) },
    ]);
    expect(readWav(file)).toEqual({
      sampleRate: 48_000,
      channels: 2,
      pcm: new Int16Array([200, -200, 32767]),
    });
  });

  it('skips unknown chunks, including odd-sized ones with their pad byte', () => {
    const file = wavFile([
      { id: 'LIST', body: new Uint8Array([1, 2, 3]) },
      { id: 'fmt ', body: fmtChunk(1, 1, 16_000, 16) },
      { id: 'fact', body: new Uint8Array(4) },
      { id: 'data', body: int16Bytes([1, 2, 3]) },
    ]);
    expect(Array.from(readWav(file).pcm)).toEqual([1, 2, 3]);
  });

  it.each([
    ['0', 0],
    ['0xFFFFFFFF', 0xffffffff],
    ['past the end of the file', 1_000_000],
  ])('reads a data chunk whose length is %s to the end of the file', (_label, size) => {
    const file = wavFile([
      { id: 'fmt ', body: fmtChunk(1, 1, 22_050, 16) },
      { id: 'data', body: int16Bytes([4, 5, 6, 7]), declaredSize: size },
    ]);
    expect(Array.from(readWav(file).pcm)).toEqual([4, 5, 6, 7]);
  });

  it('accepts WAVE_FORMAT_EXTENSIBLE with a PCM sub-format', () => {
    const fmt = Buffer.alloc(40);
    Buffer.from(fmtChunk(0xfffe, 1, 24_000, 16)).copy(fmt);
    fmt.writeUInt16LE(22, 16); // cbSize
    fmt.writeUInt16LE(1, 24); // SubFormat GUID starts with the PCM tag
    const file = wavFile([
      { id: 'fmt ', body: fmt },
      { id: 'data', body: int16Bytes([8, 9]) },
    ]);
    expect(Array.from(readWav(file).pcm)).toEqual([8, 9]);
  });

  it('rejects float WAV, saying what it found and what is supported', () => {
    const file = wavFile([
      { id: 'fmt ', body: fmtChunk(3, 1, 24_000, 32) },
      { id: 'data', body: new Uint8Array(8) },
    ]);
    expect(() => readWav(file)).toThrow(AudioFormatError);
    expect(() => readWav(file)).toThrow(/32-bit IEEE float.*Only 16-bit integer PCM/);
  });

  it('rejects 8-bit WAV the same way', () => {
    const file = wavFile([
      { id: 'fmt ', body: fmtChunk(1, 1, 8_000, 8) },
      { id: 'data', body: new Uint8Array(8) },
    ]);
    expect(() => readWav(file)).toThrow(/8-bit integer PCM.*Only 16-bit/);
  });

  it('rejects files that are not RIFF/WAVE, or that lack fmt or data', () => {
    expect(() => readWav(new Uint8Array([1, 2, 3]))).toThrow(/shorter than a RIFF header/);
    expect(() => readWav(new Uint8Array(Buffer.from('OggS\0\0\0\0WAVEfmt ')))).toThrow(
      /'OggS'.*instead of 'RIFF'/,
    );
    expect(() => readWav(wavFile([], 'RF64'))).toThrow(/RF64 file \(not supported\)/);
    expect(() => readWav(wavFile([{ id: 'data', body: new Uint8Array(4) }]))).toThrow(
      /'data' chunk comes before 'fmt '/,
    );
    expect(() => readWav(wavFile([{ id: 'fmt ', body: fmtChunk(1, 1, 8_000, 16) }]))).toThrow(
      /no 'data' chunk/,
    );
    expect(() => readWav(wavFile([{ id: 'fmt ', body: new Uint8Array(10) }]))).toThrow(
      /fewer than the 16/,
    );
    expect(() => readWav('RIFF' as unknown as Uint8Array)).toThrow(/Uint8Array/);
  });

  it('rejects a sample rate that cannot be written', () => {
    expect(() => writeWav(new Int16Array(1), 0)).toThrow(AudioFormatError);
    expect(() => writeWav(new Int16Array(1), 22_050.5)).toThrow(/positive integer/);
  });
});
