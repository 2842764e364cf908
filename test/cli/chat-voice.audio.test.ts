/**
 * The chat client's voice parts on their own: player and recorder choice on a
 * fake PATH, playback through a fake `aplay` (a shell script that writes its
 * stdin to a file), the playback clock behind truncation, barge-in, the
 * `--wav` chunking and pacing, and the `--voice-out` file.
 */
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AUDIO_CHUNK_MS,
  AUDIO_EVENT_ID_PREFIX,
  AudioPlayer,
  choosePlayer,
  chooseRecorder,
  loadSpeechFile,
  MicRecorder,
  PlaybackClock,
  PLAYERS,
  sendInRealTime,
  speechChunks,
  VoiceOutFile,
  VoiceSession,
  type AudioCommand,
} from '../../src/cli/chat-voice.js';
import { AudioFormatError } from '../../src/errors.js';
import { encodePcm16Base64, Pcm16Decoder, readWav, writeWav } from '../../src/voice/audio/pcm.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-chat-voice-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes an executable shell script named `name` in `folder`. */
async function script(folder: string, name: string, body: string): Promise<string> {
  await mkdir(folder, { recursive: true });
  const path = join(folder, name);
  await writeFile(path, `#!/bin/sh\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

/**
 * A fake `aplay` in its own folder: logs each start (with its arguments) to
 * `log` and appends what it is fed to `out`, as a real player would play it.
 */
async function fakeAplay(
  name: string,
): Promise<{ command: AudioCommand; log: string; out: string }> {
  const folder = join(dir, name);
  const log = join(folder, 'starts.log');
  const out = join(folder, 'played.raw');
  const path = await script(folder, 'aplay', `echo "$*" >> '${log}'\nexec /bin/cat >> '${out}'`);
  return { command: { ...PLAYERS[0]!, path }, log, out };
}

/** A ramp of `n` samples, so misplaced bytes show. */
function ramp(n: number, from = 0): Int16Array {
  return Int16Array.from({ length: n }, (_, i) => ((from + i) % 2000) - 1000);
}

/** Little-endian bytes of samples, as the wire and players carry them. */
function le(pcm: Int16Array): Buffer {
  return Buffer.from(encodePcm16Base64(pcm), 'base64');
}

describe('choosing a player and a recorder on PATH', () => {
  it('takes the most preferred player anywhere on PATH, not the first folder’s', async () => {
    const first = join(dir, 'path-a');
    const second = join(dir, 'path-b');
    await script(first, 'paplay', 'exit 0');
    const aplay = await script(second, 'aplay', 'exit 0');
    const player = choosePlayer([first, second].join(delimiter));
    expect(player).toEqual({
      name: 'aplay',
      path: aplay,
      args: ['-q', '-f', 'S16_LE', '-r', '24000', '-c', '1', '-t', 'raw'],
    });
  });

  it('skips files that are not executable and folders with a player’s name', async () => {
    const folder = join(dir, 'path-c');
    await mkdir(join(folder, 'aplay'), { recursive: true });
    await writeFile(join(folder, 'paplay'), '#!/bin/sh\n'); // not executable
    const ffplay = await script(folder, 'ffplay', 'exit 0');
    expect(choosePlayer(folder)).toMatchObject({ name: 'ffplay', path: ffplay });
    expect(choosePlayer(folder)!.args).toEqual(
      expect.arrayContaining(['-nodisp', '-autoexit', '-f', 's16le', '-ar', '24000', '-ac', '1']),
    );
  });

  it('finds nothing on an empty PATH or one without players', () => {
    expect(choosePlayer('')).toBeUndefined();
    expect(choosePlayer(join(dir, 'nowhere'))).toBeUndefined();
    expect(chooseRecorder('')).toBeUndefined();
  });

  it('finds sox’s rec as a recorder with raw 24 kHz mono arguments', async () => {
    const folder = join(dir, 'path-d');
    const rec = await script(folder, 'rec', 'exit 0');
    expect(chooseRecorder(folder)).toEqual({
      name: 'rec',
      path: rec,
      args: ['-q', '-t', 'raw', '-r', '24000', '-e', 'signed', '-b', '16', '-c', '1', '-'],
    });
  });
});

describe('PlaybackClock', () => {
  it('queues audio behind what is playing and starts afresh after a gap', () => {
    let now = 0;
    const clock = new PlaybackClock(24_000, () => now);
    clock.add('a', 24_000); // 0–1000 ms
    now = 500;
    clock.add('a', 12_000); // queued: 1000–1500 ms
    expect(clock.remainingMs()).toBe(1_000);
    now = 2_000; // the player ran dry
    clock.add('b', 24_000); // 2000–3000 ms
    now = 2_250;
    expect(clock.playing).toBe(true);
    // 'a' has played out and is forgotten; 'b' was cut a quarter of the way in.
    expect(clock.stop()).toEqual([{ itemId: 'b', playedMs: 250, totalMs: 1_000 }]);
    expect(clock.playing).toBe(false);
  });

  it('reports every item still queued when playback stops, the unstarted ones at 0 ms', () => {
    let now = 0;
    const clock = new PlaybackClock(24_000, () => now);
    clock.add('a', 2_400); // 100 ms
    clock.add('b', 2_400);
    now = 40;
    expect(clock.stop()).toEqual([
      { itemId: 'a', playedMs: 40, totalMs: 100 },
      { itemId: 'b', playedMs: 0, totalMs: 100 },
    ]);
  });
});

describe('AudioPlayer', () => {
  it('feeds the player raw little-endian PCM as it arrives and lets it finish', async () => {
    const { command, log, out } = await fakeAplay('play-all');
    const failures: string[] = [];
    const player = new AudioPlayer(command, { onFailure: (m) => failures.push(m) });
    const first = ramp(4_800);
    const second = ramp(2_400, 4_800);
    player.write(first, 'item_1');
    player.write(second, 'item_1');
    expect(player.playing).toBe(true);
    await player.finish();
    expect(await readFile(out)).toEqual(Buffer.concat([le(first), le(second)]));
    expect(await readFile(log, 'utf8')).toBe('-q -f S16_LE -r 24000 -c 1 -t raw\n');
    expect(failures).toEqual([]);
  });

  it('kills and restarts the player on interrupt, saying how much of the item played', async () => {
    // (The killed player may die before its script logs anything, so only the output is checked.)
    const { command, out } = await fakeAplay('interrupt');
    let now = 0;
    const player = new AudioPlayer(command, { onFailure: () => undefined, now: () => now });
    player.write(ramp(24_000), 'item_1'); // 1 s
    now = 250;
    expect(player.interrupt()).toEqual([{ itemId: 'item_1', playedMs: 250, totalMs: 1_000 }]);
    expect(player.playing).toBe(false);
    expect(player.spawnCount).toBe(2);
    const after = ramp(480, 7);
    player.write(after, 'item_2');
    await player.finish();
    // The new player got only the audio written after the interruption.
    const played = await readFile(out);
    expect(played.subarray(played.length - after.length * 2)).toEqual(le(after));
  });

  it('reports a player that dies (no sound card) once, with what it printed, and goes quiet', async () => {
    const path = await script(
      join(dir, 'broken'),
      'aplay',
      'echo "aplay: main:831: audio open error: No such file or directory" >&2\nexit 1',
    );
    const failed = new Promise<string>((resolve) => {
      const player = new AudioPlayer(
        { ...PLAYERS[0]!, path },
        {
          onFailure: (message) => {
            resolve(message);
            player.write(ramp(10), 'item_1'); // ignored from now on
            expect(player.playing).toBe(false);
            expect(player.failed).toBe(true);
          },
        },
      );
    });
    expect(await failed).toBe(
      // The player's own prefix (aplay: main:831:) is dropped; its message is kept.
      'audio player aplay exited with code 1: audio open error: No such file ' +
        'or directory; replies are shown as text only from now on',
    );
  });

  it('reports a player that cannot be started at all', async () => {
    const message = await new Promise<string>((resolve) => {
      new AudioPlayer(
        { ...PLAYERS[0]!, path: join(dir, 'missing', 'aplay') },
        { onFailure: resolve },
      );
    });
    expect(message).toMatch(/^audio player could not start .*missing\/aplay: .*ENOENT/);
  });
});

describe('MicRecorder', () => {
  it('cuts the recorder’s output into whole 40 ms frames and reports when it stops by itself', async () => {
    // 2.5 frames of audio, then the recorder exits (as a real one does when the device goes away).
    const raw = join(dir, 'mic.raw');
    const pcm = ramp(2_400);
    await writeFile(raw, le(pcm));
    const path = await script(
      join(dir, 'mic'),
      'arecord',
      `/bin/cat '${raw}'\necho "device gone" >&2\nexit 1`,
    );
    const frames: string[] = [];
    const failure = await new Promise<string>((resolve) => {
      const mic = new MicRecorder(
        { name: 'arecord', path, args: [] },
        { onAudio: (b64) => frames.push(b64), onFailure: resolve },
      );
      mic.start();
    });
    expect(failure).toBe('the recorder arecord exited with code 1: device gone');
    expect(frames).toHaveLength(2);
    const decoder = new Pcm16Decoder();
    expect(frames.map((f) => decoder.push(f).length)).toEqual([960, 960]);
    expect(Buffer.concat(frames.map((f) => Buffer.from(f, 'base64')))).toEqual(
      le(pcm.subarray(0, 1_920)),
    );
  });
});

describe('VoiceSession', () => {
  function session(player?: AudioPlayer) {
    const sent: Array<Record<string, unknown>> = [];
    let refused = 0;
    const voice = new VoiceSession({
      send: (event) => sent.push(event),
      player,
      onAudioRefused: () => refused++,
    });
    return { voice, sent, refused: () => refused };
  }
  const audio = (pcm: Int16Array, item = 'item_a1') => ({
    type: 'response.output_audio.delta',
    item_id: item,
    delta: encodePcm16Base64(pcm),
  });

  it('stops playback on speech_started, truncates what was heard and drops the rest of that reply', async () => {
    const { command, out } = await fakeAplay('barge-in');
    let now = 0;
    const player = new AudioPlayer(command, { onFailure: () => undefined, now: () => now });
    const { voice, sent } = session(player);
    voice.handle({ type: 'response.created', response: { id: 'resp_1' } });
    voice.handle(audio(ramp(48_000))); // 2 s
    now = 1_234.5;
    voice.handle({ type: 'input_audio_buffer.speech_started', item_id: 'item_u2' });
    expect(sent).toEqual([
      {
        type: 'conversation.item.truncate',
        item_id: 'item_a1',
        content_index: 0,
        audio_end_ms: 1_234,
      },
    ]);
    expect(player.spawnCount).toBe(2);
    // Audio of the interrupted response still in flight is not played...
    voice.handle(audio(ramp(2_400, 3)));
    expect(player.playing).toBe(false);
    // ...but the next response's is.
    voice.handle({ type: 'response.done', response: { status: 'cancelled' } });
    voice.handle({ type: 'response.created', response: { id: 'resp_2' } });
    const next = ramp(960, 11);
    voice.handle(audio(next, 'item_a2'));
    expect(player.playing).toBe(true);
    await player.finish();
    const played = await readFile(out);
    expect(played.subarray(played.length - next.length * 2)).toEqual(le(next));
  });

  it('sends no truncate when nothing is playing', () => {
    const { voice, sent } = session();
    voice.handle({ type: 'input_audio_buffer.speech_started', item_id: 'item_u1' });
    expect(sent).toEqual([]);
    expect(voice.speaking).toBe(true);
  });

  it('is settled only once every utterance is transcribed and answered', async () => {
    const { voice } = session();
    expect(voice.idle).toBe(true); // nothing heard yet: nothing to wait for
    voice.handle({ type: 'input_audio_buffer.speech_started', item_id: 'u1' });
    let settled = false;
    const done = voice.settled(new AbortController().signal).then(() => (settled = true));
    const steps = [
      { type: 'input_audio_buffer.speech_stopped', item_id: 'u1' },
      { type: 'input_audio_buffer.committed', item_id: 'u1' },
      {
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: 'u1',
        transcript: 'hi',
      },
      { type: 'response.created', response: {} },
    ];
    for (const step of steps) {
      voice.handle(step);
      await Promise.resolve();
      expect(settled, step.type).toBe(false);
    }
    voice.handle({ type: 'response.done', response: { status: 'completed' } });
    await done;
    expect(voice.utterancesWithWords).toBe(1);
  });

  it('counts an utterance without words as settled without an answer', async () => {
    const { voice } = session();
    voice.handle({ type: 'input_audio_buffer.speech_started', item_id: 'u1' });
    voice.handle({ type: 'input_audio_buffer.committed', item_id: 'u1' });
    voice.handle({
      type: 'conversation.item.input_audio_transcription.completed',
      item_id: 'u1',
      transcript: '',
    });
    await voice.settled(new AbortController().signal);
    expect(voice.heardSpeech).toBe(true);
    expect(voice.utterancesWithWords).toBe(0);
  });

  it('says once that the server refused the client’s audio', () => {
    const { voice, refused } = session();
    const error = (eventId: string) => ({
      type: 'error',
      error: { code: 'audio_not_supported', event_id: eventId },
    });
    voice.handle(error('evt_chat_1'));
    expect(refused()).toBe(0);
    voice.handle(error(`${AUDIO_EVENT_ID_PREFIX}_2`));
    voice.handle(error(`${AUDIO_EVENT_ID_PREFIX}_3`));
    expect(refused()).toBe(1);
    expect(voice.audioRefused).toBe(true);
  });

  it('stops waiting when its signal fires', async () => {
    const { voice } = session();
    voice.handle({ type: 'input_audio_buffer.speech_started', item_id: 'u1' });
    const stop = new AbortController();
    const waiting = voice.settled(stop.signal);
    stop.abort(new Error('the connection closed'));
    await expect(waiting).rejects.toThrow('the connection closed');
  });
});

describe('saying a WAV file', () => {
  it('resamples to 24 kHz in 40 ms chunks and ends with the trailing silence', () => {
    const wav = { sampleRate: 16_000, channels: 1, pcm: ramp(16_000) }; // 1 s
    const chunks = [...speechChunks(wav, 1_000)];
    const speech = chunks.slice(0, 25);
    const silence = chunks.slice(25);
    expect(speech.map((c) => c.length)).toEqual(Array(25).fill(960));
    expect(silence).toHaveLength(25);
    expect(silence.every((c) => c.length === 960 && c.every((s) => s === 0))).toBe(true);
  });

  it('keeps the last short chunk of an odd length', () => {
    const wav = { sampleRate: 24_000, channels: 1, pcm: ramp(1_000) };
    expect([...speechChunks(wav, 0)].map((c) => c.length)).toEqual([960, 40]);
  });

  it('paces chunks on the clock, AUDIO_CHUNK_MS apart', async () => {
    const sentAt: number[] = [];
    const start = performance.now();
    const chunks = Array.from({ length: 6 }, () => new Int16Array(960));
    await sendInRealTime(
      chunks,
      () => sentAt.push(performance.now() - start),
      new AbortController().signal,
    );
    expect(sentAt).toHaveLength(6);
    expect(sentAt[0]!).toBeLessThan(AUDIO_CHUNK_MS);
    expect(sentAt[5]!).toBeGreaterThanOrEqual(5 * AUDIO_CHUNK_MS - 1);
    expect(sentAt[5]!).toBeLessThan(5 * AUDIO_CHUNK_MS + 150);
  });

  it('stops sending when aborted', async () => {
    const stop = new AbortController();
    let sent = 0;
    const chunks = Array.from({ length: 50 }, () => new Int16Array(960));
    const sending = sendInRealTime(
      chunks,
      () => {
        if (++sent === 2) stop.abort(new Error('interrupted'));
      },
      stop.signal,
    );
    await expect(sending).rejects.toThrow('interrupted');
    expect(sent).toBe(2);
  });

  it('reads a WAV file at any rate and refuses what it cannot say, naming the file', async () => {
    const good = join(dir, 'q.wav');
    await writeFile(good, writeWav(ramp(11_025), 22_050));
    expect(await loadSpeechFile(good)).toMatchObject({
      path: good,
      sampleRate: 22_050,
      channels: 1,
      durationMs: 500,
    });

    const missing = join(dir, 'nope.wav');
    await expect(loadSpeechFile(missing)).rejects.toThrow(AudioFormatError);
    await expect(loadSpeechFile(missing)).rejects.toThrow(`--wav ${missing}: cannot read the file`);
    const text = join(dir, 'notes.txt');
    await writeFile(text, 'not audio at all');
    await expect(loadSpeechFile(text)).rejects.toThrow(/^--wav .*notes\.txt: Not a WAV file/);
    const empty = join(dir, 'empty.wav');
    await writeFile(empty, writeWav(new Int16Array(0), 16_000));
    await expect(loadSpeechFile(empty)).rejects.toThrow(/holds no audio samples/);
    const slow = join(dir, 'slow.wav');
    await writeFile(slow, writeWav(ramp(100), 4_000));
    await expect(loadSpeechFile(slow)).rejects.toThrow(/rate 4000 Hz is not supported/);
  });
});

describe('VoiceOutFile', () => {
  it('writes everything pushed as one 24 kHz WAV file', async () => {
    const path = join(dir, 'reply.wav');
    const out = await VoiceOutFile.open(path);
    // Opening already left a valid, empty WAV file behind.
    expect(readWav(new Uint8Array(await readFile(path))).pcm).toHaveLength(0);
    out.push(ramp(24_000));
    out.push(ramp(12_000, 5));
    expect(out.durationMs).toBe(1_500);
    await out.save();
    const wav = readWav(new Uint8Array(await readFile(path)));
    expect(wav.sampleRate).toBe(24_000);
    expect(wav.pcm).toEqual(Int16Array.from([...ramp(24_000), ...ramp(12_000, 5)]));
  });

  it('fails at once, naming the file, when it cannot be written', async () => {
    const path = join(dir, 'no-such-folder', 'reply.wav');
    await expect(VoiceOutFile.open(path)).rejects.toThrow(
      `--voice-out ${path}: cannot write the file (ENOENT`,
    );
  });
});
