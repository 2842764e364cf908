import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpeechProviderError } from '../../../src/errors.js';
import { createTtsRecorder } from '../../../src/testing/fake-tts.js';
import type { TtsRecorder } from '../../../src/testing/fake-tts.js';
import {
  DEFAULT_FLITE_VOICE,
  FLITE_SAMPLE_RATE_HZ,
  createFliteTts,
  fliteVoiceAt,
  parseFliteVoice,
} from '../../../src/voice/tts/flite.js';
import type { FliteTts } from '../../../src/voice/tts/flite.js';
import { within } from '../../helpers/wait.js';

let tts: FliteTts;
beforeAll(async () => {
  tts = createFliteTts({ workers: 1 });
  expect((await tts.health()).ok).toBe(true);
});
afterAll(async () => {
  await tts?.close();
});

async function speak(segments: string[], voice?: string, speed?: number): Promise<TtsRecorder> {
  const rec = createTtsRecorder();
  const stream = tts.open({
    signal: new AbortController().signal,
    voice,
    ...(speed !== undefined ? { speed } : {}),
    onEvent: rec.onEvent,
  });
  for (const segment of segments) stream.push(segment);
  await within(stream.end(), 'the end of the speech', 15_000);
  return rec;
}

function seconds(rec: TtsRecorder): number {
  return rec.pcm().length / FLITE_SAMPLE_RATE_HZ;
}

describe('parseFliteVoice', () => {
  it('reads a built-in voice with an optional speaking rate', () => {
    expect(parseFliteVoice('slt')).toEqual({ voice: 'slt', rate: 1 });
    expect(parseFliteVoice(' RMS:0.9 ')).toEqual({ voice: 'rms', rate: 0.9 });
    expect(parseFliteVoice('kal', 1.2)).toEqual({ voice: 'kal16', rate: 1.2 });
  });

  it('multiplies a voice rate by a speed, within the range Flite takes', () => {
    expect(fliteVoiceAt('rms:0.9', 1.2)).toBe('rms:1.08');
    expect(fliteVoiceAt('slt', 1.5)).toBe('slt:1.5');
    expect(fliteVoiceAt('kal', 0.25)).toBe('kal16:0.5');
    expect(fliteVoiceAt('rms', 1, 0.9)).toBe('rms');
    expect(fliteVoiceAt('nobody', 1.5)).toBe('nobody');
  });

  it('rejects voices it does not have and rates out of range', () => {
    for (const bad of ['nova', '', 'slt:fast', 'slt:0.1', 'slt:3', 'slt:1:2']) {
      expect(parseFliteVoice(bad)).toBeUndefined();
    }
  });
});

describe('Flite TTS', () => {
  it('reports its default voice healthy and speaks at 16 kHz', async () => {
    expect(await tts.health()).toEqual({
      ok: true,
      detail: `flite ready, voice ${DEFAULT_FLITE_VOICE}, 1 worker thread`,
    });
    expect(tts.sampleRate).toBe(FLITE_SAMPLE_RATE_HZ);
  });

  it('speaks each segment in order, labelling the audio where it starts', async () => {
    const rec = await speak(['Hello there.', 'How are you today?']);
    expect(rec.texts()).toEqual(['Hello there.', 'How are you today?']);
    expect(rec.error()).toBeUndefined();
    expect(seconds(rec)).toBeGreaterThan(1);
  });

  it('speaks more slowly when the voice asks for a lower rate', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.';
    const natural = seconds(await speak([text], 'slt'));
    const slow = seconds(await speak([text], 'slt:0.7'));
    expect(slow / natural).toBeGreaterThan(1.25);
  });

  it('speaks faster or slower at the speed the stream asks for', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.';
    const natural = seconds(await speak([text], 'slt'));
    expect(seconds(await speak([text], 'slt', 1.5)) / natural).toBeLessThan(0.8);
    expect(seconds(await speak([text], 'slt', 0.7)) / natural).toBeGreaterThan(1.25);
  });

  it('fails the stream with a clear error for a voice it does not have', async () => {
    const rec = await speak(['Hello.'], 'nova');
    const error = rec.error();
    expect(error).toBeInstanceOf(SpeechProviderError);
    expect(error?.message).toMatch(/Flite has no voice "nova"\. Its voices are slt, rms, awb/);
  });

  it('speaks text with markup characters and non-English letters without failing', async () => {
    const rec = await speak(['Ça coûte <5 €> & plus — “quoted”.']);
    expect(rec.error()).toBeUndefined();
  });

  it('stops at once when the signal fires and serves the next stream', async () => {
    const controller = new AbortController();
    const rec = createTtsRecorder();
    const stream = tts.open({ signal: controller.signal, onEvent: rec.onEvent });
    stream.push('This long sentence will never be heard because the turn is cancelled.');
    stream.push('Nor will this one.');
    controller.abort();
    await within(stream.end(), 'the aborted stream to end', 5_000);
    expect(rec.events).toEqual([]);
    const next = await speak(['Next.']);
    expect(next.texts()).toEqual(['Next.']);
  });
});
