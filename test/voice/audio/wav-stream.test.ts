import { describe, expect, it } from 'vitest';
import { AudioFormatError } from '../../../src/errors.js';
import { writeWav } from '../../../src/voice/audio/pcm.js';
import { Pcm16FrameReader, WavStreamReader } from '../../../src/voice/audio/wav-stream.js';

const PCM = Int16Array.from({ length: 50 }, (_, i) => (i - 25) * 100);

/** Pushes `bytes` in pieces of `size` and joins what comes out. */
function readAll(bytes: Uint8Array, size: number, reader = new WavStreamReader()): Int16Array {
  const out: number[] = [];
  for (let at = 0; at < bytes.length; at += size) {
    out.push(...reader.push(bytes.subarray(at, at + size)));
  }
  reader.end();
  return Int16Array.from(out);
}

describe('WavStreamReader', () => {
  it('gives the same samples however the file is cut, header included', () => {
    const wav = writeWav(PCM, 22_050);
    for (const size of [1, 2, 3, 7, 43, 44, 45, wav.length]) {
      const reader = new WavStreamReader();
      expect(readAll(wav, size, reader)).toEqual(PCM);
      expect(reader.format).toEqual({ sampleRate: 22_050, channels: 1, dataBytes: 100 });
    }
  });

  it('reads a streamed WAV (sizes 0xFFFFFFFF, a LIST chunk first) to the end of the body', () => {
    const plain = writeWav(PCM, 16_000);
    const list = new Uint8Array(
      [...'LIST'].map((c) => c.charCodeAt(0)).concat([4, 0, 0, 0, 73, 78, 70, 79]),
    );
    const wav = new Uint8Array(plain.length + list.length);
    wav.set(plain.subarray(0, 36));
    wav.set(list, 36);
    wav.set(plain.subarray(36), 36 + list.length);
    const view = new DataView(wav.buffer);
    view.setUint32(4, 0xffffffff, true);
    view.setUint32(36 + list.length + 4, 0xffffffff, true);
    const reader = new WavStreamReader();
    expect(readAll(wav, 5, reader)).toEqual(PCM);
    expect(reader.format?.dataBytes).toBeUndefined();
  });

  it('stops at the announced length, ignoring chunks after the samples', () => {
    const wav = writeWav(PCM, 24_000);
    const withTail = new Uint8Array(wav.length + 12);
    withTail.set(wav);
    withTail.set(
      [...'junk'].map((c) => c.charCodeAt(0)),
      wav.length,
    );
    expect(readAll(withTail, 9)).toEqual(PCM);
  });

  it('names what is wrong: not a WAV, not 16-bit, a header cut short', () => {
    expect(() =>
      new WavStreamReader().push(new TextEncoder().encode('{"error": "no voice"}')),
    ).toThrow(/Not a WAV stream: it starts with '\{"er'/);
    const eightBit = writeWav(PCM, 16_000);
    new DataView(eightBit.buffer).setUint16(34, 8, true);
    expect(() => new WavStreamReader().push(eightBit)).toThrow(AudioFormatError);
    expect(() => new WavStreamReader().push(eightBit)).toThrow(/8-bit integer PCM/);
    const cut = new WavStreamReader();
    cut.push(writeWav(PCM, 16_000).subarray(0, 30));
    expect(() => cut.end()).toThrow(
      /ended after 30 bytes, before its header reached the 'data' chunk/,
    );
  });
});

describe('Pcm16FrameReader', () => {
  it('mixes stereo frames to mono and keeps a partial frame for the next chunk', () => {
    const frames = new Pcm16FrameReader(2);
    expect(frames.push(new Uint8Array([10, 0, 30]))).toEqual(new Int16Array(0));
    expect(frames.pendingBytes).toBe(3);
    expect(frames.push(new Uint8Array([0, 1, 0]))).toEqual(Int16Array.from([20]));
    expect(frames.pendingBytes).toBe(2);
  });
});
