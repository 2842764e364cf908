/**
 * The chat client's voice: finding a player and a recorder on PATH, playing
 * the character's speech as it arrives (and knowing how much of it was heard),
 * writing it to a WAV file, saying a WAV file in real time, streaming the
 * microphone, and the bookkeeping of a voice session (barge-in, when a spoken
 * turn is over).
 *
 * Audio on the wire is base64 PCM16 LE mono at 24 kHz both ways, so players
 * and recorders are asked for exactly that and no conversion happens here
 * except resampling a `--wav` file (src/voice/audio/resample.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { AudioFormatError } from '../errors.js';
import {
  encodePcm16Base64,
  PCM16_SAMPLE_RATE,
  Pcm16Decoder,
  readWav,
  writeWav,
  type WavAudio,
} from '../voice/audio/pcm.js';
import { createResampler } from '../voice/audio/resample.js';
import { AUDIO_EVENT_ID_PREFIX, type ServerEvent } from './chat-render.js';

export { AUDIO_EVENT_ID_PREFIX };
import { collectStderr, describeExit } from './player-check.js';

/** The wire's sample rate, in Hz: what players play and recorders record. */
export const VOICE_SAMPLE_RATE_HZ = PCM16_SAMPLE_RATE;
/** Audio per `input_audio_buffer.append`, in ms (the Realtime API's usual frame). */
export const AUDIO_CHUNK_MS = 40;
/** Silence sent after a `--wav` file, in ms: longer than the server's VAD pause (500 ms by default), so it ends the turn. */
export const TRAILING_SILENCE_MS = 1_000;
/** How long a player may take to exit after the last audio has played, in ms, before it is killed. */
export const PLAYER_DRAIN_GRACE_MS = 3_000;

const BYTES_PER_SAMPLE = 2;
const SAMPLES_PER_CHUNK = (VOICE_SAMPLE_RATE_HZ * AUDIO_CHUNK_MS) / 1000;
const BYTES_PER_CHUNK = SAMPLES_PER_CHUNK * BYTES_PER_SAMPLE;
const RATE = String(VOICE_SAMPLE_RATE_HZ);

/** A program that may be on PATH and how to call it for raw PCM16 mono 24 kHz. */
export interface AudioCommandSpec {
  /** The executable's file name. */
  name: string;
  /** Its arguments. */
  args: readonly string[];
}

/** A player or recorder found on PATH. */
export interface AudioCommand extends AudioCommandSpec {
  /** The executable's full path. */
  path: string;
}

/** Players that take raw PCM on stdin, in order of preference. */
export const PLAYERS: readonly AudioCommandSpec[] = [
  { name: 'aplay', args: ['-q', '-f', 'S16_LE', '-r', RATE, '-c', '1', '-t', 'raw'] },
  { name: 'paplay', args: ['--raw', '--format=s16le', `--rate=${RATE}`, '--channels=1'] },
  { name: 'pw-play', args: ['--raw', '--format=s16', `--rate=${RATE}`, '--channels=1', '-'] },
  {
    name: 'pw-cat',
    args: ['--playback', '--raw', '--format=s16', `--rate=${RATE}`, '--channels=1', '-'],
  },
  {
    name: 'ffplay',
    args: [
      '-nodisp',
      '-autoexit',
      '-loglevel',
      'error',
      '-f',
      's16le',
      '-ar',
      RATE,
      '-ac',
      '1',
      '-',
    ],
  },
  {
    name: 'play',
    args: ['-q', '-t', 'raw', '-r', RATE, '-e', 'signed', '-b', '16', '-c', '1', '-'],
  },
];

/** Recorders that write raw PCM to stdout, in order of preference. */
export const RECORDERS: readonly AudioCommandSpec[] = [
  { name: 'arecord', args: ['-q', '-f', 'S16_LE', '-r', RATE, '-c', '1', '-t', 'raw'] },
  { name: 'parec', args: ['--raw', '--format=s16le', `--rate=${RATE}`, '--channels=1'] },
  { name: 'pw-record', args: ['--raw', '--format=s16', `--rate=${RATE}`, '--channels=1', '-'] },
  {
    name: 'rec',
    args: ['-q', '-t', 'raw', '-r', RATE, '-e', 'signed', '-b', '16', '-c', '1', '-'],
  },
];

/** What to install when no recorder is found. */
export const NO_RECORDER_MESSAGE =
  '--mic needs a recorder on PATH and none was found (looked for arecord, parec, pw-record, rec). ' +
  'Install one, e.g. apt-get install alsa-utils (arecord), or use --wav FILE.';

/** What the client says when replies cannot be heard. */
export const NO_PLAYER_MESSAGE =
  'no audio player found on PATH (looked for aplay, paplay, pw-play, pw-cat, ffplay, play; ' +
  'e.g. apt-get install alsa-utils); replies are shown as text only. ' +
  'Use --voice-out FILE.wav to keep the speech.';

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The first candidate found on the search path: candidates in order of
 * preference, each looked for in every PATH directory in turn.
 *
 * @example findCommand(PLAYERS, '/usr/local/bin:/usr/bin') // { name: 'aplay', path: '/usr/bin/aplay', args: [...] }
 */
export function findCommand(
  candidates: readonly AudioCommandSpec[],
  searchPath: string = process.env.PATH ?? '',
): AudioCommand | undefined {
  const dirs = searchPath.split(delimiter).filter((dir) => dir !== '');
  for (const candidate of candidates) {
    for (const dir of dirs) {
      const path = join(dir, candidate.name);
      if (isExecutableFile(path)) return { ...candidate, path };
    }
  }
  return undefined;
}

/**
 * The player to use: the first of {@link PLAYERS} on the search path.
 *
 * @example choosePlayer()?.name // 'aplay' on most Linux desktops
 */
export function choosePlayer(searchPath?: string): AudioCommand | undefined {
  return findCommand(PLAYERS, searchPath);
}

/**
 * The recorder to use: the first of {@link RECORDERS} on the search path.
 *
 * @example chooseRecorder() ?? fail(NO_RECORDER_MESSAGE)
 */
export function chooseRecorder(searchPath?: string): AudioCommand | undefined {
  return findCommand(RECORDERS, searchPath);
}

// ── playback ────────────────────────────────────────────────────────────────

/** How much of one item's audio was played when playback stopped. */
export interface PlayedItem {
  itemId: string;
  /** Audio of the item that had played, in ms. */
  playedMs: number;
  /** Audio of the item that had been written, in ms. */
  totalMs: number;
}

/** A stretch of one item's audio on the playback timeline, in ms of the clock. */
interface Segment {
  start: number;
  ms: number;
}

/**
 * Models a player that plays in real time what it is given: audio written
 * while it is idle starts now, audio written while it plays queues behind.
 * That is how the client knows how much of an item the user heard when it
 * stops the player (`conversation.item.truncate`). The device's own buffer
 * (tens of ms) is not counted.
 */
export class PlaybackClock {
  readonly #sampleRate: number;
  readonly #now: () => number;
  /** When everything written so far will have played. */
  #endsAt = 0;
  #items = new Map<string, Segment[]>();

  /** @param now a clock in ms (tests pass a fake one). */
  constructor(
    sampleRate: number = VOICE_SAMPLE_RATE_HZ,
    now: () => number = performance.now.bind(performance),
  ) {
    this.#sampleRate = sampleRate;
    this.#now = now;
  }

  /** Audio of `itemId` handed to the player now. */
  add(itemId: string, samples: number): void {
    if (samples <= 0) return;
    const now = this.#now();
    // Items that have finished playing are no longer needed for truncation.
    for (const [id, segments] of this.#items) {
      const last = segments[segments.length - 1]!;
      if (id !== itemId && last.start + last.ms <= now) this.#items.delete(id);
    }
    const start = Math.max(now, this.#endsAt);
    const ms = (samples * 1000) / this.#sampleRate;
    this.#endsAt = start + ms;
    const segments = this.#items.get(itemId) ?? [];
    const last = segments[segments.length - 1];
    if (last !== undefined && last.start + last.ms === start) last.ms += ms;
    else segments.push({ start, ms });
    this.#items.set(itemId, segments);
  }

  /** Audio still to play, in ms. */
  remainingMs(): number {
    return Math.max(0, this.#endsAt - this.#now());
  }

  /** Whether audio is playing (written and not yet played). */
  get playing(): boolean {
    return this.remainingMs() > 0;
  }

  /**
   * Playback stops now: how much each item with unplayed audio had played.
   * Forgets everything, as the player's buffer is dropped.
   */
  stop(): PlayedItem[] {
    const now = this.#now();
    const cut: PlayedItem[] = [];
    for (const [itemId, segments] of this.#items) {
      let playedMs = 0;
      let totalMs = 0;
      for (const { start, ms } of segments) {
        playedMs += Math.min(ms, Math.max(0, now - start));
        totalMs += ms;
      }
      if (playedMs < totalMs) cut.push({ itemId, playedMs, totalMs });
    }
    this.#items.clear();
    this.#endsAt = 0;
    return cut;
  }
}

/** Options of {@link AudioPlayer}. */
export interface AudioPlayerOptions {
  /** Called once when the player cannot play (it would not start, or died); playback stops for good. */
  onFailure: (message: string) => void;
  /** A clock in ms. @defaultValue performance.now */
  now?: () => number;
}

/**
 * One player process fed raw PCM16 through stdin as audio arrives. Stopping
 * kills it, which drops whatever it had buffered, and starts a fresh one.
 *
 * @example
 * ```ts
 * const player = new AudioPlayer(choosePlayer()!, { onFailure: (m) => console.error(m) });
 * player.write(pcm, itemId);
 * const cut = player.interrupt(); // the user spoke: what each item had played
 * await player.finish(signal);    // let it play to the end
 * ```
 */
export class AudioPlayer {
  readonly #command: AudioCommand;
  readonly #onFailure: (message: string) => void;
  readonly #clock: PlaybackClock;
  #child: ChildProcess | undefined;
  #failed = false;
  #spawned = 0;

  constructor(command: AudioCommand, options: AudioPlayerOptions) {
    this.#command = command;
    this.#onFailure = options.onFailure;
    this.#clock = new PlaybackClock(VOICE_SAMPLE_RATE_HZ, options.now);
    this.#child = this.#spawn();
  }

  /** The player's name (`aplay`, …). */
  get name(): string {
    return this.#command.name;
  }

  /** Whether audio written is still playing. */
  get playing(): boolean {
    return !this.#failed && this.#clock.playing;
  }

  /** Audio written and not yet played, in ms. */
  get remainingMs(): number {
    return this.#failed ? 0 : this.#clock.remainingMs();
  }

  /** Whether the player gave up (see `onFailure`). */
  get failed(): boolean {
    return this.#failed;
  }

  /** Processes started so far (one, plus one per interruption). */
  get spawnCount(): number {
    return this.#spawned;
  }

  #spawn(): ChildProcess | undefined {
    if (this.#failed) return undefined;
    let child: ChildProcess;
    try {
      child = spawn(this.#command.path, [...this.#command.args], {
        stdio: ['pipe', 'ignore', 'pipe'],
        // Its own process group: Ctrl+C on the terminal is the client's to handle
        // (stop a reply), not a signal that kills the player under it.
        detached: true,
      });
    } catch (err) {
      this.#fail(`could not start ${this.#command.path}: ${(err as Error).message}`);
      return undefined;
    }
    this.#spawned++;
    const stderr = collectStderr(child);
    // A write after the player died fails with EPIPE; 'exit' reports why it died.
    child.stdin?.on('error', () => undefined);
    child.once('error', (err) => {
      if (this.#child === child)
        this.#fail(`could not start ${this.#command.path}: ${err.message}`);
    });
    child.once('exit', (code, signal) => {
      // Exits we asked for (interrupt, finish, close) are not failures; a
      // player that ends by itself while its stdin is open has failed (no
      // sound device, a server it cannot reach).
      if (this.#child !== child) return;
      this.#fail(`${this.#command.name} ${describeExit(code, signal, stderr())}`);
    });
    return child;
  }

  #fail(why: string): void {
    if (this.#failed) return;
    this.#failed = true;
    const child = this.#child;
    this.#child = undefined;
    child?.kill('SIGKILL');
    this.#clock.stop();
    this.#onFailure(`audio player ${why}; replies are shown as text only from now on`);
  }

  /** Queues audio of `itemId` (mono PCM16 at 24 kHz); ignored once the player failed. */
  write(pcm: Int16Array, itemId: string): void {
    if (this.#failed || pcm.length === 0) return;
    this.#child ??= this.#spawn();
    const stdin = this.#child?.stdin;
    if (!stdin || !stdin.writable) return;
    // The wire's little-endian PCM16, as the player was told (encode handles a big-endian host).
    stdin.write(Buffer.from(encodePcm16Base64(pcm), 'base64'));
    this.#clock.add(itemId, pcm.length);
  }

  /**
   * Stops playback at once: kills the player (dropping its buffer), starts a
   * new one for later audio, and says how much of each cut item had played.
   */
  interrupt(): PlayedItem[] {
    const cut = this.#clock.stop();
    if (this.#failed) return cut;
    const old = this.#child;
    this.#child = undefined;
    old?.kill('SIGKILL');
    this.#child = this.#spawn();
    return cut;
  }

  /**
   * No more audio: lets the player finish what it holds, then resolves.
   * Bounded by the audio left plus {@link PLAYER_DRAIN_GRACE_MS}; the signal
   * (Ctrl+C) kills it at once.
   */
  async finish(signal?: AbortSignal): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const limitMs = this.#clock.remainingMs() + PLAYER_DRAIN_GRACE_MS;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', kill);
        resolve();
      };
      const kill = (): void => {
        child.kill('SIGKILL');
      };
      const timer = setTimeout(kill, limitMs);
      signal?.addEventListener('abort', kill, { once: true });
      if (signal?.aborted) kill();
      child.once('close', done);
      child.stdin?.end();
    });
  }

  /** Stops at once, dropping what was not played (quitting). */
  close(): void {
    const child = this.#child;
    this.#child = undefined;
    child?.kill('SIGKILL');
    this.#clock.stop();
  }
}

// ── the character's speech to a file ───────────────────────────────────────

/**
 * Collects the character's speech and writes it as one WAV file at the end
 * (`--voice-out`). Kept in memory: 24 kHz PCM16 is 2.9 MB a minute.
 *
 * @example
 * ```ts
 * const out = await VoiceOutFile.open('reply.wav', signal); // fails early when not writable
 * out.push(pcm);
 * await out.save(signal);
 * ```
 */
export class VoiceOutFile {
  readonly path: string;
  #chunks: Int16Array[] = [];
  #samples = 0;

  private constructor(path: string) {
    this.path = path;
  }

  /**
   * Checks that `path` can be written by writing an empty WAV file there now,
   * so a typo fails before the conversation rather than after it.
   *
   * @throws Error saying which file and why when it cannot be written.
   */
  static async open(path: string, signal?: AbortSignal): Promise<VoiceOutFile> {
    try {
      await writeFile(path, writeWav(new Int16Array(0), VOICE_SAMPLE_RATE_HZ), { signal });
    } catch (err) {
      throw new Error(`--voice-out ${path}: cannot write the file (${(err as Error).message}).`, {
        cause: err,
      });
    }
    return new VoiceOutFile(path);
  }

  /** Speech collected so far, in ms. */
  get durationMs(): number {
    return (this.#samples * 1000) / VOICE_SAMPLE_RATE_HZ;
  }

  /** Adds speech (mono PCM16 at 24 kHz). */
  push(pcm: Int16Array): void {
    if (pcm.length === 0) return;
    this.#chunks.push(pcm);
    this.#samples += pcm.length;
  }

  /** Writes everything collected as a WAV file. */
  async save(signal?: AbortSignal): Promise<void> {
    const all = new Int16Array(this.#samples);
    let at = 0;
    for (const chunk of this.#chunks) {
      all.set(chunk, at);
      at += chunk.length;
    }
    this.#chunks = all.length === 0 ? [] : [all];
    await writeFile(this.path, writeWav(all, VOICE_SAMPLE_RATE_HZ), { signal });
  }
}

// ── speech in: a WAV file ───────────────────────────────────────────────────

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

// ── the voice session's bookkeeping ─────────────────────────────────────────

/** Options of {@link VoiceSession}. */
export interface VoiceSessionOptions {
  /** Sends a client event (the connection adds the `event_id`). */
  send: (event: Record<string, unknown>) => void;
  /** Plays the character's speech; none when nothing can play. */
  player?: AudioPlayer;
  /** Keeps the character's speech (`--voice-out`). */
  out?: VoiceOutFile;
  /** The server refused the client's audio (`audio_not_supported`, bad audio): stop sending it. */
  onAudioRefused?: () => void;
}

/** Server events that carry the character's audio (GA and beta names). */
const AUDIO_DELTA_TYPES = new Set(['response.output_audio.delta', 'response.audio.delta']);

/**
 * Follows a voice conversation from the server's events: plays and keeps the
 * character's audio, stops it when the user barges in (or cancels) and tells
 * the server how much was heard, and knows when a spoken turn is fully
 * answered (for `--wav`).
 *
 * @example
 * ```ts
 * const voice = new VoiceSession({ send: conn.send, player, out });
 * conn.onEvent((event) => voice.handle(event));
 * await voice.settled(signal); // every utterance heard, transcribed and answered
 * ```
 */
export class VoiceSession {
  readonly #options: VoiceSessionOptions;
  readonly #decoder = new Pcm16Decoder();
  #responding = false;
  /** Audio of the response in flight is dropped: the user interrupted it. */
  #dropping = false;
  #speaking = false;
  #utterances = 0;
  #withWords = 0;
  #responses = 0;
  /** Utterances ended (stopped or committed) whose transcript has not come yet. */
  #transcribing = new Set<string>();
  /** Utterances with words whose response has not started yet. */
  #answersDue = 0;
  #audioRefused = false;
  #waiters = new Set<() => void>();

  constructor(options: VoiceSessionOptions) {
    this.#options = options;
  }

  /** Whether the server has heard the user start speaking at least once. */
  get heardSpeech(): boolean {
    return this.#utterances > 0;
  }

  /** Utterances the server turned into words (each gets an answer). */
  get utterancesWithWords(): number {
    return this.#withWords;
  }

  /** Responses that finished since the session began. */
  get responses(): number {
    return this.#responses;
  }

  /** Whether the user is speaking, as far as the server's VAD knows. */
  get speaking(): boolean {
    return this.#speaking;
  }

  /** Whether a response is in flight (between `response.created` and `response.done`). */
  get responding(): boolean {
    return this.#responding;
  }

  /** Whether the server refused the client's audio. */
  get audioRefused(): boolean {
    return this.#audioRefused;
  }

  /** Whether the character's speech is still playing. */
  get playing(): boolean {
    return this.#options.player?.playing ?? false;
  }

  /**
   * Nothing is pending: the user is not speaking, every utterance is
   * transcribed, and every one with words has been answered.
   */
  get idle(): boolean {
    return (
      !this.#speaking &&
      this.#transcribing.size === 0 &&
      this.#answersDue === 0 &&
      !this.#responding
    );
  }

  /** Handles one server event (all of them pass through; most are ignored). */
  handle(event: ServerEvent): void {
    const type = event.type;
    if (AUDIO_DELTA_TYPES.has(type)) this.#audio(event);
    else if (type === 'response.created') {
      this.#responding = true;
      this.#dropping = false;
      if (this.#answersDue > 0) this.#answersDue--;
    } else if (type === 'response.done') {
      this.#responding = false;
      this.#dropping = false;
      this.#responses++;
      this.#decoder.reset();
    } else if (type === 'input_audio_buffer.speech_started') {
      this.#speaking = true;
      this.#utterances++;
      // The server interrupts its own response; the client stops what is still
      // playing, which may be a response the server finished long ago.
      if (this.playing || this.#responding) this.stopPlayback();
    } else if (type === 'input_audio_buffer.speech_stopped') {
      this.#speaking = false;
      // The server commits the utterance right after this, perhaps in a later
      // read: pending from now on, so the session never looks idle in between.
      if (typeof event.item_id === 'string') this.#transcribing.add(event.item_id);
    } else if (type === 'input_audio_buffer.committed') {
      this.#speaking = false;
      if (typeof event.item_id === 'string') this.#transcribing.add(event.item_id);
    } else if (
      type === 'conversation.item.input_audio_transcription.completed' ||
      type === 'conversation.item.input_audio_transcription.failed'
    ) {
      const known = typeof event.item_id === 'string' && this.#transcribing.delete(event.item_id);
      const words = typeof event.transcript === 'string' && event.transcript.trim() !== '';
      if (known && words && type.endsWith('.completed')) {
        this.#answersDue++;
        this.#withWords++;
      }
    } else if (type === 'error') {
      const error = (event.error ?? {}) as { event_id?: unknown };
      if (typeof error.event_id === 'string' && error.event_id.startsWith(AUDIO_EVENT_ID_PREFIX)) {
        if (!this.#audioRefused) {
          this.#audioRefused = true;
          this.#options.onAudioRefused?.();
        }
      }
    }
    this.#wake();
  }

  #audio(event: ServerEvent): void {
    if (this.#dropping || typeof event.delta !== 'string') return;
    let pcm: Int16Array;
    try {
      pcm = this.#decoder.push(event.delta);
    } catch {
      return; // a broken frame from the server: skip it rather than play noise
    }
    const itemId = typeof event.item_id === 'string' ? event.item_id : '';
    this.#options.player?.write(pcm, itemId);
    this.#options.out?.push(pcm);
  }

  /**
   * Stops the character's speech now (barge-in, Ctrl+C): the player drops
   * its buffer, the rest of the response's audio is ignored, and the server
   * is told how much of each cut item was heard.
   */
  stopPlayback(): void {
    if (this.#responding) this.#dropping = true;
    this.#decoder.reset();
    const cut = this.#options.player?.interrupt() ?? [];
    for (const { itemId, playedMs } of cut) {
      if (itemId === '') continue;
      this.#options.send({
        type: 'conversation.item.truncate',
        item_id: itemId,
        content_index: 0,
        audio_end_ms: Math.floor(playedMs),
      });
    }
  }

  #wake(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  /** Resolves once `ready()` holds after some event (or now); rejects when the signal fires. */
  #until(ready: () => boolean, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (signal.aborted) return finish(signal.reason);
        if (ready()) finish();
      };
      const finish = (reason?: unknown): void => {
        this.#waiters.delete(check);
        signal.removeEventListener('abort', check);
        if (reason === undefined) resolve();
        else reject(reason instanceof Error ? reason : new Error(String(reason)));
      };
      this.#waiters.add(check);
      signal.addEventListener('abort', check, { once: true });
      check();
    });
  }

  /**
   * Resolves when every utterance so far is transcribed and answered (see
   * {@link idle}); rejects when the signal fires (the socket closed, Ctrl+C).
   */
  settled(signal: AbortSignal): Promise<void> {
    return this.#until(() => this.idle, signal);
  }

  /**
   * Resolves when no response is in flight and its speech has played out,
   * e.g. before saying a `--wav` file after a spoken greeting.
   */
  async quiet(signal: AbortSignal): Promise<void> {
    for (;;) {
      await this.#until(() => !this.#responding, signal);
      const player = this.#options.player;
      if (!player?.playing) return;
      // Playback has no events of its own: wait out the audio the clock says is left.
      await delay(Math.max(1, player.remainingMs), undefined, { signal });
    }
  }
}
