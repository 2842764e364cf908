/**
 * The chat client's spoken modes: `--wav` says a file and waits for the
 * answer; `--mic` streams the microphone until the user stops, with
 * barge-in.
 */
import WebSocket from 'ws';
import type { Connection, Sink } from './chat-connection.js';
import { describeClose } from './chat-connect-errors.js';
import { formatDuration } from './chat-text.js';
import {
  AUDIO_EVENT_ID_PREFIX,
  MicRecorder,
  sendInRealTime,
  speechChunks,
  type AudioCommand,
  type SpeechFile,
} from './chat-voice.js';
import { startVoice, type VoiceSetup } from './chat-voice-setup.js';

/** Exit code after Ctrl+C stopped a `--wav` run (128 + SIGINT, as shells report it). */
const EXIT_INTERRUPTED = 130;

/**
 * `--wav FILE`: says the file in real time, then a second of silence so the
 * server's VAD ends the turn, waits until every utterance is transcribed and
 * answered (and the answer has played), and exits: 0, or 1 on an error.
 */
export async function runWav(
  conn: Connection,
  sink: Sink,
  setup: VoiceSetup,
  speech: SpeechFile,
): Promise<number> {
  const { renderer } = conn;
  const fail = (text: string): number => {
    sink([...renderer.endLine(), { stream: 'stderr', text: `chat: ${text}\n` }]);
    return 1;
  };
  const lost = async (): Promise<number> => {
    const { code, reason } = await conn.closed;
    sink([...renderer.endLine(), { stream: 'stderr', text: `${describeClose(code, reason)}\n` }]);
    return 1;
  };
  try {
    await conn.ready;
  } catch {
    return lost();
  }
  const stop = new AbortController();
  let interrupted = false;
  const onSigint = (): void => {
    interrupted = true;
    stop.abort(new Error('interrupted'));
  };
  process.once('SIGINT', onSigint);
  void conn.closed.then(() => stop.abort(new Error('the connection closed')));
  const voice = await startVoice(
    conn,
    setup,
    () => sink,
    () => stop.abort(new Error('the server refused the audio')),
  );
  try {
    // A spoken greeting plays first, as a person would wait for it. The server
    // starts it right after `session.updated`, possibly in a later read: one
    // more round trip makes sure its `response.created` is here.
    await conn.update({});
    await voice.session.quiet(stop.signal);
    sink(renderer.note(`(saying ${speech.path}, ${formatDuration(speech.durationMs)})`));
    await sendInRealTime(speechChunks(speech), (b64) => conn.sendAudio(b64), stop.signal);
    // The server handles frames in order: once this round trip is back, every
    // VAD event our audio caused is here too.
    await conn.update({});
    // Speech still open (a server VAD waiting longer than our silence): end the turn by hand.
    if (voice.session.speaking) {
      conn.send({ type: 'input_audio_buffer.commit' }, AUDIO_EVENT_ID_PREFIX);
    }
    await voice.session.settled(stop.signal);
    await voice.session.quiet(stop.signal);
  } catch {
    // Stopped: Ctrl+C, a closed socket, or refused audio (its error is on screen).
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
  if (interrupted) {
    voice.player?.close();
    if (conn.ws.readyState === WebSocket.OPEN) await conn.quit();
    sink(renderer.endLine());
    return EXIT_INTERRUPTED;
  }
  if (conn.ws.readyState !== WebSocket.OPEN) {
    voice.player?.close();
    return lost();
  }
  let code = conn.troubled ? 1 : 0;
  if (!voice.session.audioRefused) {
    if (!voice.session.heardSpeech) {
      code = fail(`the server heard no speech in ${speech.path}; is it speech, and loud enough?`);
    } else if (voice.session.utterancesWithWords === 0) {
      code = fail(`the server recognised no words in ${speech.path}, so nothing was answered.`);
    }
  }
  await voice.player?.finish();
  await conn.quit();
  return code;
}

/**
 * `--mic`: streams the recorder to the server until Ctrl+C or Ctrl+D (or
 * SIGTERM); speaking over a reply stops it (barge-in). Exit 0 when the user
 * stops, 1 when the recorder, the audio or the connection fails.
 */
export async function runMic(
  conn: Connection,
  sink: Sink,
  setup: VoiceSetup,
  command: AudioCommand,
): Promise<number> {
  const { renderer } = conn;
  const warn = (text: string): void =>
    sink([...renderer.endLine(), { stream: 'stderr', text: `${text}\n` }]);
  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });
  void conn.closed.then(({ code, reason, byUs }) => {
    if (byUs) return;
    warn(describeClose(code, reason));
    finish(1);
  });
  try {
    await conn.ready;
  } catch {
    return finished; // the close above reports it
  }
  const voice = await startVoice(
    conn,
    setup,
    () => sink,
    () => finish(1),
  );
  const recorder = new MicRecorder(command, {
    onAudio: (b64) => {
      if (!voice.session.audioRefused) conn.sendAudio(b64);
    },
    onFailure: (message) => {
      warn(`chat: ${message}`);
      finish(1);
    },
  });

  // Keys: on a terminal, raw mode turns Ctrl+C and Ctrl+D into bytes (no echo
  // of anything else); piped stdin is not read, so only signals stop it.
  const stdin = process.stdin;
  const keys = (data: Buffer): void => {
    if (data.includes(0x03) || data.includes(0x04)) finish(0);
  };
  const onSignal = (): void => finish(0);
  if (stdin.isTTY) {
    stdin.setRawMode(true);
    stdin.on('data', keys);
    stdin.resume();
  }
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  if (conn.ws.readyState === WebSocket.OPEN && !voice.session.audioRefused) {
    sink(
      renderer.note(
        `(listening through ${recorder.name}; speak, and press Ctrl+C or Ctrl+D to stop)`,
      ),
    );
    recorder.start();
  }
  const code = await finished;
  recorder.stop();
  voice.player?.close();
  process.removeListener('SIGINT', onSignal);
  process.removeListener('SIGTERM', onSignal);
  if (stdin.isTTY) {
    stdin.removeListener('data', keys);
    stdin.setRawMode(false);
    stdin.pause();
  }
  sink(renderer.endLine());
  await conn.quit();
  return code;
}
