/**
 * Real speech for tests: utterances spoken by Debian's `flite -voice kal16`
 * (pocketsphinx hears it well, see VOICE-STACK.md), at 24 kHz as the
 * Realtime protocol takes it, plus silence and a way to send audio.
 */
import { concatPcm, encodePcm16Base64 } from '../../src/voice/audio/pcm.js';
import { fliteSpeech, soundBounds } from '../../src/testing/flite-speech.js';
import type { TestClient } from './realtime-client.js';

/** `text` spoken by flite (kal16), as 24 kHz PCM16. Cached per process. */
export const speech = fliteSpeech;
export { soundBounds };

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
