import { describe, expect, it } from 'vitest';
import { AudioFormatError } from '../../../src/errors.js';
import { writeWav } from '../../../src/voice/audio/pcm.js';
import { SpeechBody, pcmParameters } from '../../../src/voice/tts/speech-body.js';

const PCM = Int16Array.from({ length: 2_205 }, (_, i) => Math.round(8_000 * Math.sin(i / 7)));

function decode(body: SpeechBody, bytes: Uint8Array, size: number): Int16Array {
  const out: number[] = [];
  for (let at = 0; at < bytes.length; at += size)
    out.push(...body.push(bytes.subarray(at, at + size)));
  out.push(...body.end());
  return Int16Array.from(out);
}

describe('SpeechBody', () => {
  it('resamples a WAV to the output rate: 2,205 samples at 22.05 kHz are 2,400 at 24 kHz', () => {
    const body = new SpeechBody({
      contentType: 'audio/wav',
      requestedRate: 24_000,
      outputRate: 24_000,
    });
    expect(decode(body, writeWav(PCM, 22_050), 3)).toHaveLength(2_400);
    expect(body.format).toEqual({ container: 'wav', sampleRate: 22_050, channels: 1 });
  });

  it('passes raw PCM at the requested rate through untouched, even a body shorter than a WAV header', () => {
    const bytes = new Uint8Array(PCM.buffer.slice(0, 10));
    const body = new SpeechBody({
      contentType: 'audio/pcm',
      requestedRate: 24_000,
      outputRate: 24_000,
    });
    expect(decode(body, bytes, 4)).toEqual(PCM.subarray(0, 5));
  });

  it('reads rate and channels from a content type, and refuses ones it cannot use', () => {
    expect(pcmParameters('audio/pcm;rate=22050')).toEqual({ rate: 22_050, channels: 1 });
    expect(pcmParameters('audio/L16; rate="16000"; channels=2')).toEqual({
      rate: 16_000,
      channels: 2,
    });
    expect(() => pcmParameters('audio/pcm;rate=fast')).toThrow(/rate=fast, not a whole number/);
    const body = new SpeechBody({
      contentType: 'audio/pcm;rate=4000',
      requestedRate: 24_000,
      outputRate: 24_000,
    });
    expect(() => body.push(new Uint8Array(64))).toThrow(AudioFormatError);
  });
});
