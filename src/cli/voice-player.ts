/**
 * Playing the character's speech as it arrives, knowing how much of it was
 * heard (for barge-in), and writing it to a WAV file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { encodePcm16Base64, writeWav } from '../voice/audio/pcm.js';
import { PLAYER_DRAIN_GRACE_MS, VOICE_SAMPLE_RATE_HZ } from './voice-format.js';
import type { AudioCommand } from './voice-commands.js';
import { collectStderr, describeExit } from './player-check.js';

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
