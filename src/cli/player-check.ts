/**
 * Whether an audio player can play on this machine, asked before the first
 * reply: it plays a moment of silence. On a box without a sound card the
 * answer is one line at start ("aplay cannot play here: no sound card …"),
 * not the player's ALSA noise in the middle of a reply.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { AudioCommand } from './chat-voice.js';

/** Silence played to test the player: 20 ms of 24 kHz mono PCM16. */
const PROBE_BYTES = 960;
/** Longest a probe may take before the player counts as unable to play (a hung sound server). */
export const PLAYER_PROBE_TIMEOUT_MS = 5_000;

/**
 * The one line worth showing from a player's stderr: ALSA's library chatter
 * (`ALSA lib conf.c:5180:(…) …`) is dropped, and the player's own last word
 * kept, e.g. `aplay: main:831: audio open error: No such file or directory`
 * becomes `audio open error: No such file or directory`.
 *
 * @example summarizePlayerStderr("ALSA lib confmisc.c:855:(parse_card) cannot find card '0'\naplay: main:831: audio open error: No such file or directory") // "audio open error: No such file or directory (ALSA: cannot find card '0')"
 */
export function summarizePlayerStderr(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const alsa = lines.filter((l) => l.startsWith('ALSA lib '));
  const own = lines.filter((l) => !l.startsWith('ALSA lib '));
  const last = own.at(-1)?.replace(/^[\w.-]+: (?:[\w.]+:\d+: )?/, '');
  const firstAlsa = alsa[0]?.replace(/^ALSA lib [^ ]+ /, '');
  if (last && firstAlsa) return `${last} (ALSA: ${firstAlsa})`;
  return last ?? (firstAlsa ? `ALSA: ${firstAlsa}` : '');
}

/**
 * Plays a moment of silence through `command`; resolves `undefined` when it
 * played, else why not (one line). Never rejects.
 *
 * @example const problem = await checkPlayer(choosePlayer()!); if (problem) warn(problem);
 */
export function checkPlayer(
  command: AudioCommand,
  signal?: AbortSignal,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    let stderr = '';
    let settled = false;
    const settle = (why: string | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(why);
    };
    const child = spawn(command.path, [...command.args], {
      stdio: ['pipe', 'ignore', 'pipe'],
      ...(signal ? { signal } : {}),
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settle(
        `${command.name} did not finish playing 20 ms of silence within ${PLAYER_PROBE_TIMEOUT_MS / 1000} s`,
      );
    }, PLAYER_PROBE_TIMEOUT_MS);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-MAX_STDERR_CHARS);
    });
    child.stdin.on('error', () => undefined);
    child.once('error', (err) => settle(`could not start ${command.path}: ${err.message}`));
    child.once('close', (code, sig) => {
      if (code === 0) return settle(undefined);
      const said = summarizePlayerStderr(stderr);
      const how = sig !== null ? `was stopped by ${sig}` : `exited with code ${String(code)}`;
      settle(`${command.name} cannot play here (${how}${said ? `: ${said}` : ''})`);
    });
    child.stdin.end(Buffer.alloc(PROBE_BYTES));
  });
}

/**
 * Most player or recorder stderr kept for an error message, in characters
 * (enough for ALSA's chatter and the player's own last line after it).
 */
export const MAX_STDERR_CHARS = 4000;

/** The tail of a child's stderr, kept for error messages. */
export function collectStderr(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    text = (text + chunk).slice(-MAX_STDERR_CHARS);
  });
  return () => text;
}

/**
 * Says how a child process that was meant to keep running ended, with the
 * one line of its stderr worth reading (ALSA's chatter dropped).
 */
export function describeExit(
  code: number | null,
  signal: NodeJS.Signals | null,
  stderr: string,
): string {
  const how =
    signal !== null
      ? `was stopped by ${signal}`
      : code === 0
        ? 'ended by itself'
        : `exited with code ${String(code)}`;
  const said = summarizePlayerStderr(stderr);
  return said === '' ? how : `${how}: ${said}`;
}
