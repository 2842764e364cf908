/**
 * Speech in: a `--wav` file said in real time (resampled to 24 kHz), or the
 * microphone streamed through a recorder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { AudioFormatError } from '../errors.js';
import { encodePcm16Base64, readWav, type WavAudio } from '../voice/audio/pcm.js';
import { createResampler } from '../voice/audio/resample.js';
import {
  AUDIO_CHUNK_MS,
  BYTES_PER_CHUNK,
  SAMPLES_PER_CHUNK,
  TRAILING_SILENCE_MS,
  VOICE_SAMPLE_RATE_HZ,
} from './voice-format.js';
import type { AudioCommand } from './voice-commands.js';
import { collectStderr, describeExit } from './player-check.js';

/** A `--wav` file, read and checked. */
export interface SpeechFile extends WavAudio {
  path: string;
  /** Its length, in ms. */
  durationMs: number;
}

/**
 * Reads a WAV file of 16-bit PCM (any rate from 8 to 192 kHz, mono or
 * stereo) for `--wav`, checking up front that it can be resampled.
 *
 * @example const speech = await loadSpeechFile('question.wav', signal);
 * @throws AudioFormatError naming the file when it is missing or not usable.
 */
export async function loadSpeechFile(path: string, signal?: AbortSignal): Promise<SpeechFile> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path, { signal });
  } catch (err) {
    throw new AudioFormatError(`--wav ${path}: cannot read the file (${(err as Error).message}).`, {
      cause: err,
    });
  }
  try {
    const wav = readWav(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    createResampler(wav.sampleRate, VOICE_SAMPLE_RATE_HZ); // throws for rates it cannot take
    if (wav.pcm.length === 0) {
      throw new AudioFormatError('the file holds no audio samples; record some speech first.');
    }
    return { ...wav, path, durationMs: (wav.pcm.length * 1000) / wav.sampleRate };
  } catch (err) {
    throw new AudioFormatError(`--wav ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The file's audio at 24 kHz in chunks of {@link AUDIO_CHUNK_MS}, then
 * `silenceMs` of silence. Resampled lazily, a chunk at a time, so a long file
 * never blocks the event loop.
 *
 * @example for (const chunk of speechChunks(wav)) send(encodePcm16Base64(chunk));
 */
export function* speechChunks(
  wav: WavAudio,
  silenceMs: number = TRAILING_SILENCE_MS,
): Generator<Int16Array> {
  const resampler = createResampler(wav.sampleRate, VOICE_SAMPLE_RATE_HZ);
  const inputPerChunk = Math.max(1, Math.ceil((wav.sampleRate * AUDIO_CHUNK_MS) / 1000));
  let pending = new Int16Array(0);
  let read = 0;
  let flushed = false;
  const append = (more: Int16Array): void => {
    if (more.length === 0) return;
    const joined = new Int16Array(pending.length + more.length);
    joined.set(pending);
    joined.set(more, pending.length);
    pending = joined;
  };
  while (!flushed || pending.length > 0) {
    while (pending.length < SAMPLES_PER_CHUNK && !flushed) {
      if (read < wav.pcm.length) {
        append(resampler.push(wav.pcm.subarray(read, read + inputPerChunk)));
        read += inputPerChunk;
      } else {
        append(resampler.flush());
        flushed = true;
      }
    }
    const take = Math.min(SAMPLES_PER_CHUNK, pending.length);
    if (take === 0) break;
    yield pending.slice(0, take);
    pending = pending.slice(take);
  }
  for (let ms = 0; ms < silenceMs; ms += AUDIO_CHUNK_MS) {
    yield new Int16Array((Math.min(AUDIO_CHUNK_MS, silenceMs - ms) * VOICE_SAMPLE_RATE_HZ) / 1000);
  }
}

/**
 * Sends chunks in real time: chunk n goes out n × {@link AUDIO_CHUNK_MS}
 * after the first, on the clock (not after the previous send), so timer
 * jitter does not add up. Resolves when the last is sent; rejects with the
 * signal's reason when aborted.
 *
 * @example await sendInRealTime(speechChunks(wav), (b64) => conn.sendAudio(b64), signal);
 */
export async function sendInRealTime(
  chunks: Iterable<Int16Array>,
  send: (base64: string) => void,
  signal: AbortSignal,
  now: () => number = performance.now.bind(performance),
): Promise<void> {
  const start = now();
  let n = 0;
  for (const chunk of chunks) {
    signal.throwIfAborted();
    // Timers may fire a fraction of a millisecond early: wait until the chunk is due.
    for (let wait = start + n * AUDIO_CHUNK_MS - now(); wait > 0;) {
      await delay(wait, undefined, { signal });
      wait = start + n * AUDIO_CHUNK_MS - now();
    }
    send(encodePcm16Base64(chunk));
    n++;
  }
}

// ── speech in: the microphone ───────────────────────────────────────────────

/** Options of {@link MicRecorder}. */
export interface MicRecorderOptions {
  /** Each {@link AUDIO_CHUNK_MS} of audio, as base64 PCM16 LE for `input_audio_buffer.append`. */
  onAudio: (base64: string) => void;
  /** The recorder would not start or stopped by itself. */
  onFailure: (message: string) => void;
}

/**
 * A recorder process (`arecord` …) whose stdout is cut into 40 ms frames.
 *
 * @example
 * ```ts
 * const mic = new MicRecorder(chooseRecorder()!, { onAudio: (b64) => conn.sendAudio(b64), onFailure });
 * mic.start();
 * // … Ctrl+C
 * mic.stop();
 * ```
 */
export class MicRecorder {
  readonly #command: AudioCommand;
  readonly #options: MicRecorderOptions;
  #child: ChildProcess | undefined;
  #stopped = false;

  constructor(command: AudioCommand, options: MicRecorderOptions) {
    this.#command = command;
    this.#options = options;
  }

  /** The recorder's name (`arecord`, …). */
  get name(): string {
    return this.#command.name;
  }

  /** Starts recording; audio flows to `onAudio`. */
  start(): void {
    if (this.#child || this.#stopped) return;
    const fail = (why: string): void => {
      if (this.#stopped) return;
      this.#stopped = true;
      this.#options.onFailure(`the recorder ${why}`);
    };
    let child: ChildProcess;
    try {
      child = spawn(this.#command.path, [...this.#command.args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        // Ctrl+C is the client's: it stops the recorder itself, after the last frame.
        detached: true,
      });
    } catch (err) {
      fail(`${this.#command.path} could not start: ${(err as Error).message}`);
      return;
    }
    this.#child = child;
    const stderr = collectStderr(child);
    let held: Buffer = Buffer.alloc(0);
    child.stdout?.on('data', (data: Buffer) => {
      if (this.#stopped) return;
      held = held.length === 0 ? data : Buffer.concat([held, data]);
      let at = 0;
      // Whole frames only: a frame never splits a sample, and the server gets steady 40 ms appends.
      for (; at + BYTES_PER_CHUNK <= held.length; at += BYTES_PER_CHUNK) {
        this.#options.onAudio(held.subarray(at, at + BYTES_PER_CHUNK).toString('base64'));
      }
      held = held.subarray(at);
    });
    child.once('error', (err) => fail(`${this.#command.path} could not start: ${err.message}`));
    child.once('exit', (code, signal) =>
      fail(`${this.#command.name} ${describeExit(code, signal, stderr())}`),
    );
  }

  /** Stops recording; later audio is dropped. */
  stop(): void {
    this.#stopped = true;
    this.#child?.kill('SIGTERM');
    this.#child = undefined;
  }
}
