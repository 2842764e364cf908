/**
 * Finding an audio player and a recorder on PATH, asked for raw PCM16 mono
 * at 24 kHz.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { RATE } from './voice-format.js';

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
