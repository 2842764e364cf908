/**
 * Real speech for tests: utterances spoken by Debian's `flite -voice kal16`
 * (pocketsphinx hears it well, see VOICE-STACK.md), at 24 kHz as the
 * Realtime protocol takes it, plus silence and a way to send audio.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { concatPcm, encodePcm16Base64, readWav } from '../../src/voice/audio/pcm.js';
import { resample } from '../../src/voice/audio/resample.js';
import type { TestClient } from './realtime-client.js';

const run = promisify(execFile);
const cache = new Map<string, Promise<Int16Array>>();
let dir: Promise<string> | undefined;

/** `text` spoken by flite (kal16), as 24 kHz PCM16. Cached per process. */
export function speech(text: string): Promise<Int16Array> {
  let pcm = cache.get(text);
  if (!pcm) {
    pcm = (async () => {
      dir ??= mkdtemp(join(tmpdir(), 'troupe-speech-'));
      const file = join(await dir, `${cache.size}.wav`);
      await run('flite', ['-voice', 'kal16', '-t', text, '-o', file]);
      const wav = readWav(new Uint8Array(await readFile(file)));
      return resample(wav.pcm, wav.sampleRate, 24000);
    })();
    cache.set(text, pcm);
  }
  return pcm;
}

/** `ms` of silence at 24 kHz. */
export function silence(ms: number): Int16Array {
  return new Int16Array(Math.round(ms * 24));
}

/** Joins pieces of audio. */
export function concat(...parts: Int16Array[]): Int16Array {
  return concatPcm(parts);
}

/**
 * Sends audio as `input_audio_buffer.append` events of `chunkMs` each, as
 * fast as the socket takes them (faster than real time: the server must cope).
 */
export function sendAudio(client: TestClient, pcm: Int16Array, chunkMs = 40): void {
  const step = chunkMs * 24;
  for (let at = 0; at < pcm.length; at += step) {
    client.send({
      type: 'input_audio_buffer.append',
      audio: encodePcm16Base64(pcm.subarray(at, at + step)),
    });
  }
}

/** Where sound begins and ends in 24 kHz audio, in ms: the first and last sample louder than `level`. */
export function soundBounds(pcm: Int16Array, level = 500): { startMs: number; endMs: number } {
  let first = 0;
  while (first < pcm.length && Math.abs(pcm[first]!) < level) first++;
  let last = pcm.length - 1;
  while (last > first && Math.abs(pcm[last]!) < level) last--;
  return { startMs: first / 24, endMs: (last + 1) / 24 };
}

/** The audio from `fromMs` to `toMs` (24 kHz), as a standalone copy. */
export function slice(pcm: Int16Array, fromMs: number, toMs: number): Int16Array {
  return pcm.slice(Math.round(fromMs * 24), Math.round(toMs * 24));
}

/**
 * Where two pieces of audio first differ: -1 when they are equal, else the
 * sample index (the shorter one's length when one is a prefix of the other).
 * Cheaper to report than a diff of two long arrays.
 */
export function firstDifference(a: Int16Array, b: Int16Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
