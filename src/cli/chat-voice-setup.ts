/**
 * The chat client's voice flags at work: checked before connecting (a
 * recorder on PATH, a readable `--wav`, a writable `--voice-out`, a player
 * that makes sound), then, once the session is ready, spoken replies asked
 * for and the session's audio followed.
 */
import WebSocket from 'ws';
import type { ChatOptions } from './chat-options.js';
import type { Connection, Sink } from './chat-connection.js';
import {
  AudioPlayer,
  choosePlayer,
  chooseRecorder,
  loadSpeechFile,
  NO_PLAYER_MESSAGE,
  NO_RECORDER_MESSAGE,
  VoiceOutFile,
  VoiceSession,
  type AudioCommand,
  type SpeechFile,
} from './chat-voice.js';
import { checkPlayer } from './player-check.js';

/** What the voice flags prepared before connecting. */
export interface VoiceSetup {
  /** Ask the server for spoken replies (`--voice` or `--voice-out`). */
  spoken: boolean;
  /** The player to play them with (`--voice` and one was found). */
  player: AudioCommand | undefined;
  /** `--voice-out`, already checked to be writable. */
  out: VoiceOutFile | undefined;
  /** `--wav`, read and checked. */
  speech: SpeechFile | undefined;
  /** `--mic`: the recorder found on PATH. */
  recorder: AudioCommand | undefined;
}

/** A voice flag that cannot work (no recorder, an unreadable file): exit {@link EXIT_USAGE}. */
export class VoiceSetupError extends Error {
  override name = 'VoiceSetupError';
}

/**
 * Checks the voice flags before connecting, so a missing file or recorder
 * fails at once rather than after the handshake.
 */
export async function prepareVoice(options: ChatOptions): Promise<VoiceSetup | undefined> {
  const spoken = options.voice || options.voiceOut !== undefined;
  if (!spoken && options.wav === undefined && !options.mic) return undefined;
  let recorder: AudioCommand | undefined;
  if (options.mic) {
    recorder = chooseRecorder();
    if (recorder === undefined) throw new VoiceSetupError(NO_RECORDER_MESSAGE);
  }
  let speech: SpeechFile | undefined;
  let out: VoiceOutFile | undefined;
  try {
    if (options.wav !== undefined) speech = await loadSpeechFile(options.wav);
    if (options.voiceOut !== undefined) out = await VoiceOutFile.open(options.voiceOut);
  } catch (err) {
    throw new VoiceSetupError((err as Error).message);
  }
  // --voice-out alone writes the file only; with --voice the speech plays as well.
  let player = options.voice ? choosePlayer() : undefined;
  if (options.voice && player === undefined && out === undefined) {
    process.stderr.write(`chat: ${NO_PLAYER_MESSAGE}\n`);
  }
  // Asked now, so a box without sound says so once, before the conversation.
  const problem = player === undefined ? undefined : await checkPlayer(player);
  if (problem !== undefined) {
    const keep = out === undefined ? '; --voice-out FILE keeps the speech in a file' : '';
    process.stderr.write(`chat: --voice: ${problem}; replies are text only${keep}.\n`);
    player = undefined;
  }
  // Nothing to play the speech on and no file to keep it: ask for text replies.
  const speaks = spoken && (player !== undefined || out !== undefined);
  return { spoken: speaks, player, out, speech, recorder };
}

/** The voice half of a running session. */
export interface Voice {
  session: VoiceSession;
  player: AudioPlayer | undefined;
}

/**
 * Asks for spoken replies (when wanted) and starts following the session's
 * audio. The listener and the player exist before the `session.update` goes
 * out: the server may speak the greeting right after `session.updated`, in
 * the same read as that event.
 */
export async function startVoice(
  conn: Connection,
  setup: VoiceSetup,
  sink: () => Sink,
  onAudioRefused?: () => void,
): Promise<Voice> {
  const warn = (text: string): void =>
    sink()([...conn.renderer.endLine(), { stream: 'stderr', text: `chat: ${text}\n` }]);
  let player =
    setup.spoken && setup.player !== undefined
      ? new AudioPlayer(setup.player, { onFailure: warn })
      : undefined;
  const session = new VoiceSession({
    send: (event) => void conn.send(event),
    get player() {
      return player;
    },
    out: setup.out,
    onAudioRefused,
  });
  conn.onEvent((event) => session.handle(event));
  if (setup.spoken && !(await conn.update({ output_modalities: ['audio'] }))) {
    player?.close();
    player = undefined;
    if (conn.ws.readyState === WebSocket.OPEN) {
      sink()(conn.renderer.note('(the server does not speak: replies are shown as text only)'));
    }
  }
  return { session, player };
}
