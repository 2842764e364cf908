/**
 * The terminal chat client: talks to one character over the realtime
 * WebSocket, streaming replies and showing every tool call. Interactive on a
 * terminal (a `you: ` prompt, Ctrl+C to stop a reply); with stdin piped it
 * sends one turn per line, waiting for each reply, and exits after the last.
 *
 * With the voice flags it also speaks and listens (chat-voice.ts): `--voice`
 * plays spoken replies, `--voice-out` keeps them in a WAV file, `--wav` says a
 * file and waits for the answer, `--mic` streams the microphone with barge-in.
 *
 * @example npm run chat -- --character weather --url ws://127.0.0.1:8080/v1/realtime
 */
import { clearLine, createInterface, cursorTo, type Interface } from 'node:readline';
import WebSocket from 'ws';
import { handsOff } from '../characters/handoffs.js';
import {
  AUDIO_EVENT_ID_PREFIX,
  AudioPlayer,
  choosePlayer,
  chooseRecorder,
  loadSpeechFile,
  MicRecorder,
  NO_PLAYER_MESSAGE,
  NO_RECORDER_MESSAGE,
  sendInRealTime,
  speechChunks,
  VoiceOutFile,
  VoiceSession,
  type AudioCommand,
  type SpeechFile,
} from './chat-voice.js';
import { checkPlayer } from './player-check.js';
import {
  CHAT_USAGE,
  ChatUsageError,
  EXIT_USAGE,
  parseChatArgs,
  type ChatOptions,
} from './chat-options.js';
import {
  announcesGreeting,
  createChatRenderer,
  describeClose,
  describeConnectError,
  describeRejectedUpgrade,
  formatDuration,
  isAssistantMessage,
  parseServerEvent,
  type ChatRenderer,
  type Output,
  type ServerEvent,
} from './chat-render.js';

/** How long a clean close may take before the socket is dropped; ws would wait 30 s. */
const CLOSE_GRACE_MS = 2_000;
/** Most of an HTTP error body kept for the message when the upgrade is refused. */
const MAX_REJECTION_BODY_CHARS = 2_000;

const COMMANDS_HELP = `Commands: /cancel stops the reply, /quit quits, /help shows this list.
Keys: Ctrl+C stops a reply (or quits when idle), Ctrl+D quits.`;

/** Exit code after Ctrl+C stopped a `--wav` run (128 + SIGINT, as shells report it). */
const EXIT_INTERRUPTED = 130;

/** How a turn ended, for the piped mode's bookkeeping. */
type TurnEnd = 'done' | 'rejected' | 'closed';

/** The socket plus what the rest of the client needs to know about it. */
interface Connection {
  ws: WebSocket;
  renderer: ChatRenderer;
  /** Resolves when the socket is open; rejects with the one line to print when it never opens. */
  opened: Promise<void>;
  /**
   * Resolves once `session.created` (and the greeting it announces) arrived;
   * rejects if the socket closes first.
   */
  ready: Promise<void>;
  /** Sends one user line and asks for a response; resolves when the turn is over. */
  turn(text: string): Promise<TurnEnd>;
  /** Asks the server to stop the response in flight. */
  cancel(): void;
  /** Sends a client event with a fresh `event_id` (ids start with `prefix`); returns the id. */
  send(event: Record<string, unknown>, prefix?: string): string;
  /** Sends audio as `input_audio_buffer.append` (ids start with {@link AUDIO_EVENT_ID_PREFIX}). */
  sendAudio(base64: string): void;
  /**
   * Sends `session.update`; resolves true on `session.updated`, false when the
   * server refused it (the error is on screen) or the socket closed. The server
   * handles frames in order, so an empty update is also a round trip after
   * everything sent before it.
   */
  update(session: Record<string, unknown>): Promise<boolean>;
  /** Calls `listener` with every server event, after it is rendered; returns how to stop. */
  onEvent(listener: (event: ServerEvent) => void): () => void;
  /** Whether a turn is waiting for its `response.done`. */
  readonly busy: boolean;
  /** Whether the server sent an `error` or a failed response (piped mode exits 1). */
  readonly troubled: boolean;
  /** Closes with 1000 and waits for the socket to be gone. */
  quit(): Promise<void>;
  /** Resolves when the socket closes, with whether we asked for it. */
  closed: Promise<{ code: number; reason: string; byUs: boolean }>;
}

/** Writes renderer output; the interactive mode swaps it for one that keeps the prompt intact. */
type Sink = (outputs: Output[]) => void;

function writePlain(outputs: Output[]): void {
  for (const { stream, text } of outputs) {
    (stream === 'stdout' ? process.stdout : process.stderr).write(text);
  }
}

/**
 * Opens the socket and wires it to the renderer and the turn bookkeeping.
 * Every listener is attached before the socket can open: a server sends
 * `session.created` and the greeting right after the upgrade, often in the
 * same TCP read as the 101 answer, so ws emits them in the same tick as
 * 'open' — a listener added after awaiting 'open' would miss them.
 */
function connect(options: ChatOptions, renderer: ChatRenderer, sink: () => Sink): Connection {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const ws = new WebSocket(options.url, { headers });
  let nextId = 0;
  let closingByUs = false;
  let troubled = false;
  /** The turn waiting for its response: the id of its `response.create`, and how to end it. */
  let pending: { createId: string; end: (how: TurnEnd) => void } | undefined;

  let settleOpen: (failure?: string) => void = () => undefined;
  const opened = new Promise<void>((resolve, reject) => {
    let settled = false;
    settleOpen = (failure) => {
      if (settled) return;
      settled = true;
      if (failure === undefined) resolve();
      else {
        reject(new Error(failure));
        ws.terminate();
      }
    };
  });
  // Kept for the socket's whole life: an 'error' without a listener would crash
  // the process. After the open, the 'close' that follows an error reports it.
  ws.on('error', (err) => settleOpen(describeConnectError(options.url, err)));
  ws.once('unexpected-response', (_req, res) => {
    // The server answered the upgrade with plain HTTP (401, 404, 503…): its body says why.
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (body.length < MAX_REJECTION_BODY_CHARS) body += chunk;
    });
    const done = (): void =>
      settleOpen(
        describeRejectedUpgrade(
          options.url,
          res.statusCode ?? 0,
          res.statusMessage ?? '',
          body.slice(0, MAX_REJECTION_BODY_CHARS),
        ),
      );
    res.once('end', done);
    res.once('error', done);
    res.once('close', done);
  });
  ws.once('open', () => settleOpen());

  const closed = new Promise<{ code: number; reason: string; byUs: boolean }>((resolve) => {
    ws.once('close', (code, reason) => {
      pending?.end('closed');
      resolve({ code, reason: reason.toString('utf8'), byUs: closingByUs });
    });
  });
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    void closed.then(() => reject(new Error('the connection closed before the session started')));
  });
  /** `session.created` announced a greeting that has not arrived yet. */
  let greetingDue = false;
  // Nobody may be awaiting `ready` when the socket closes (the close is reported on its own).
  ready.catch(() => undefined);
  opened.catch(() => undefined);

  const listeners = new Set<(event: ServerEvent) => void>();
  function listen(listener: (event: ServerEvent) => void): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  function send(event: Record<string, unknown>, prefix = 'evt_chat'): string {
    const eventId = `${prefix}_${++nextId}`;
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ event_id: eventId, ...event }));
    return eventId;
  }

  function onEvent(event: ServerEvent): void {
    sink()(renderer.render(event));
    // Ready once the greeting is on screen too. The server sends it right
    // after session.created, but often in a later TCP read: a piped first line
    // echoed in between would print "you: …" above the greeting.
    if (event.type === 'session.created') {
      greetingDue = announcesGreeting(event);
      if (!greetingDue) markReady();
    } else if (greetingDue && (isAssistantMessage(event) || event.type.startsWith('response.'))) {
      greetingDue = false;
      markReady();
    }
    if (event.type === 'error') {
      troubled = true;
      // A `response.create` the server refused never gets a `response.done`: the
      // error's event_id names it, so the turn ends here instead of hanging.
      const causedBy = (event.error as { event_id?: unknown } | undefined)?.event_id;
      if (pending !== undefined && causedBy === pending.createId) pending.end('rejected');
    } else if (event.type === 'response.done') {
      const status = (event.response as { status?: unknown } | undefined)?.status;
      if (status === 'failed') troubled = true;
      // A handoff: the new character's reply to the same line follows.
      if (!handsOff(event.response)) pending?.end('done');
    }
    for (const listener of [...listeners]) listener(event);
  }

  ws.on('message', (data, isBinary) => {
    if (isBinary) return; // audio frames of other dialects; this client is text only
    const event = parseServerEvent(String(data));
    if (event === undefined) {
      sink()(renderer.note('(ignored a frame that is not a JSON event)'));
      return;
    }
    onEvent(event);
  });

  return {
    ws,
    renderer,
    opened,
    ready,
    closed,
    get busy() {
      return pending !== undefined;
    },
    get troubled() {
      return troubled;
    },
    turn(text) {
      return new Promise<TurnEnd>((resolve) => {
        if (ws.readyState !== WebSocket.OPEN) {
          resolve('closed');
          return;
        }
        send({
          type: 'conversation.item.create',
          item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
        });
        const createId = send({ type: 'response.create' });
        pending = {
          createId,
          end: (how) => {
            pending = undefined;
            resolve(how);
          },
        };
      });
    },
    cancel() {
      send({ type: 'response.cancel' });
    },
    send,
    sendAudio(base64) {
      send({ type: 'input_audio_buffer.append', audio: base64 }, AUDIO_EVENT_ID_PREFIX);
    },
    onEvent: listen,
    update(session) {
      return new Promise<boolean>((resolve) => {
        if (ws.readyState !== WebSocket.OPEN) {
          resolve(false);
          return;
        }
        const id = send({ type: 'session.update', session });
        const stop = listen((event) => {
          if (event.type === 'session.updated') finish(true);
          else if (event.type === 'error' && errorEventId(event) === id) finish(false);
        });
        const finish = (ok: boolean): void => {
          stop();
          resolve(ok);
        };
        void closed.then(() => finish(false));
      });
    },
    async quit() {
      if (ws.readyState === WebSocket.CLOSED) return;
      closingByUs = true;
      // A server that never answers the close frame must not keep the user waiting.
      const timer = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
      timer.unref();
      ws.close(1000, 'bye');
      await closed;
      clearTimeout(timer);
    },
  };
}

/** The `event_id` an `error` event names as its cause, if any. */
function errorEventId(event: ServerEvent): string | undefined {
  const id = (event.error as { event_id?: unknown } | undefined)?.event_id;
  return typeof id === 'string' ? id : undefined;
}

/** What the voice flags prepared before connecting. */
interface VoiceSetup {
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
class VoiceSetupError extends Error {
  override name = 'VoiceSetupError';
}

/**
 * Checks the voice flags before connecting, so a missing file or recorder
 * fails at once rather than after the handshake.
 */
async function prepareVoice(options: ChatOptions): Promise<VoiceSetup | undefined> {
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
interface Voice {
  session: VoiceSession;
  player: AudioPlayer | undefined;
}

/**
 * Asks for spoken replies (when wanted) and starts following the session's
 * audio. The listener and the player exist before the `session.update` goes
 * out: the server may speak the greeting right after `session.updated`, in
 * the same read as that event.
 */
async function startVoice(
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

/** Piped stdin: one turn per line, each after the previous reply; exit code out. */
async function runPiped(conn: Connection, sink: Sink, setup?: VoiceSetup): Promise<number> {
  const lost = async (): Promise<number> => {
    const { code, reason } = await conn.closed;
    sink([
      ...conn.renderer.endLine(),
      { stream: 'stderr', text: `${describeClose(code, reason)}\n` },
    ]);
    return 1;
  };
  try {
    await conn.ready;
  } catch {
    return lost(); // the socket closed before the session began
  }
  const voice = setup === undefined ? undefined : await startVoice(conn, setup, () => sink);
  // Made only now and iterated in the same tick: readline emits lines as soon
  // as it reads them, and drops those that come before an iterator listens.
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  void conn.closed.then(({ byUs }) => {
    // The socket went away under us while we wait for input: stop reading.
    if (!byUs) lines.close();
  });
  try {
    for await (const raw of lines) {
      const text = raw.trim();
      if (text === '') continue;
      if (text === '/quit') break;
      if (text === '/help') {
        sink(conn.renderer.note(COMMANDS_HELP));
        continue;
      }
      if (text === '/cancel') continue; // nothing is in flight between piped lines
      sink(conn.renderer.user(text));
      if ((await conn.turn(text)) === 'closed') break;
    }
  } finally {
    lines.close();
  }
  if (conn.ws.readyState !== WebSocket.OPEN) {
    voice?.player?.close();
    return lost();
  }
  // The last reply may still be playing: let it finish before leaving.
  await voice?.player?.finish();
  await conn.quit();
  return conn.troubled ? 1 : 0;
}

/**
 * `--wav FILE`: says the file in real time, then a second of silence so the
 * server's VAD ends the turn, waits until every utterance is transcribed and
 * answered (and the answer has played), and exits: 0, or 1 on an error.
 */
async function runWav(
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
async function runMic(
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

/** A terminal: prompt, streamed replies, Ctrl+C to cancel; exit code out. */
async function runInteractive(
  conn: Connection,
  rl: Interface,
  setSink: (sink: Sink) => void,
  setup?: VoiceSetup,
): Promise<number> {
  const { renderer } = conn;
  /** Spoken replies, once the session is ready. */
  let voice: Voice | undefined;
  let promptShown = false;
  let cancelSent = false;
  const queued: string[] = [];

  // Output that arrives while the prompt is on screen (the greeting, an error)
  // goes above it: clear the prompt line, print, then redraw the prompt with
  // whatever the user had typed so far.
  const sink: Sink = (outputs) => {
    if (outputs.length === 0) return;
    if (promptShown) {
      cursorTo(process.stdout, 0);
      clearLine(process.stdout, 0);
    }
    writePlain(outputs);
    if (promptShown) {
      writePlain(renderer.endLine());
      rl.prompt(true);
    }
  };
  setSink(sink);

  function prompt(): void {
    writePlain(renderer.endLine());
    promptShown = true;
    rl.prompt();
  }

  async function converse(text: string): Promise<void> {
    promptShown = false;
    cancelSent = false;
    const how = await conn.turn(text);
    if (how === 'closed') return;
    const next = queued.shift();
    if (next !== undefined) {
      sink(renderer.user(next));
      void converse(next);
    } else prompt();
  }

  function cancel(): void {
    if (!conn.busy) return;
    cancelSent = true;
    conn.cancel();
    // What was already sent to the player would go on talking: cut it, and say how much was heard.
    voice?.session.stopPlayback();
  }

  const finished = new Promise<number>((resolve) => {
    let quitting = false;
    const quit = (): void => {
      if (quitting) return;
      quitting = true;
      // Leave the terminal on a fresh line, not after a dangling "you: ".
      if (promptShown) process.stdout.write('\n');
      promptShown = false;
      writePlain(renderer.endLine());
      voice?.player?.close();
      void conn.quit().then(() => resolve(0));
    };
    rl.on('line', (raw) => {
      // Enter moved the cursor past the prompt: output may now go straight out.
      promptShown = false;
      const text = raw.trim();
      if (text === '/quit') return quit();
      if (text === '/help') {
        sink(renderer.note(COMMANDS_HELP));
        if (!conn.busy) prompt();
        return;
      }
      if (text === '/cancel') {
        if (conn.busy) cancel();
        else {
          if (voice?.session.playing) voice.session.stopPlayback();
          prompt();
        }
        return;
      }
      if (text.startsWith('/')) {
        sink(renderer.note(`unknown command ${text.split(/\s/)[0]}; /help lists them`));
        if (!conn.busy) prompt();
        return;
      }
      if (text === '') {
        if (!conn.busy) prompt();
        return;
      }
      // Typed while a reply streams: sent once that reply is done.
      if (conn.busy) queued.push(text);
      else void converse(text);
    });
    rl.on('SIGINT', () => {
      // Ctrl+C stops the reply; a second one while the cancel is pending, or
      // one at the prompt, quits.
      if (conn.busy && !cancelSent) {
        queued.length = 0;
        cancel();
      } else if (voice?.session.playing) {
        // The reply is done but still being spoken: the first Ctrl+C silences it.
        voice.session.stopPlayback();
      } else quit();
    });
    rl.on('close', quit); // Ctrl+D
    void conn.closed.then(({ code, reason, byUs }) => {
      if (byUs) return;
      if (promptShown) {
        cursorTo(process.stdout, 0);
        clearLine(process.stdout, 0);
      }
      promptShown = false;
      voice?.player?.close();
      writePlain([
        ...renderer.endLine(),
        { stream: 'stderr', text: `${describeClose(code, reason)}\n` },
      ]);
      resolve(1);
    });
  });

  try {
    await conn.ready;
    if (setup !== undefined) voice = await startVoice(conn, setup, () => sink);
    prompt();
  } catch {
    // Closed before the session began: `finished` reports it.
  }
  const code = await finished;
  rl.close();
  return code;
}

/** Parses flags, connects, runs the right mode; resolves with the exit code. */
async function main(argv: string[]): Promise<number> {
  let options: ChatOptions;
  try {
    options = parseChatArgs(argv);
  } catch (err) {
    if (!(err instanceof ChatUsageError)) throw err;
    process.stderr.write(`chat: ${err.message}\nRun npm run chat -- --help for the options.\n`);
    return EXIT_USAGE;
  }
  if (options.help) {
    process.stdout.write(`${CHAT_USAGE}\n`);
    return 0;
  }
  let setup: VoiceSetup | undefined;
  try {
    setup = await prepareVoice(options);
  } catch (err) {
    if (!(err instanceof VoiceSetupError)) throw err;
    process.stderr.write(`chat: ${err.message}\n`);
    return EXIT_USAGE;
  }
  const code = await converse(options, setup);
  if (setup?.out !== undefined) {
    try {
      await setup.out.save();
    } catch (err) {
      process.stderr.write(`chat: --voice-out ${setup.out.path}: ${(err as Error).message}\n`);
      return 1;
    }
  }
  return code;
}

/** Connects and runs the mode the flags ask for; resolves with the exit code. */
async function converse(options: ChatOptions, setup: VoiceSetup | undefined): Promise<number> {
  const speaks = setup?.speech !== undefined || setup?.recorder !== undefined;
  // --wav and --mic take no typed lines, whatever stdin is.
  const interactive = process.stdin.isTTY === true && !speaks;
  const color = process.stdout.isTTY === true && !options.noColor;
  // Piped output keeps tool arguments and outputs whole; a terminal gets one short line.
  const renderer = createChatRenderer({ color, cutPreviews: process.stdout.isTTY === true });
  if (process.stdin.isTTY === true) writePlain(renderer.note(`connecting to ${options.url}…`));

  let sink: Sink = writePlain;
  const conn = connect(options, renderer, () => sink);
  try {
    await conn.opened;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 1;
  }
  if (setup?.speech !== undefined) return runWav(conn, writePlain, setup, setup.speech);
  if (setup?.recorder !== undefined) return runMic(conn, writePlain, setup, setup.recorder);
  if (!interactive) return runPiped(conn, writePlain, setup);

  const rl = createInterface({
    input: process.stdin,
    output: process.stdout,
    prompt: color ? '\x1b[1myou:\x1b[0m ' : 'you: ',
    terminal: true,
  });
  return runInteractive(
    conn,
    rl,
    (next) => {
      sink = next;
    },
    setup,
  );
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Piped stdin may still be open (a /quit line, a lost connection): let go of it.
    if (!process.stdin.readableEnded) process.stdin.destroy();
  },
  (err: unknown) => {
    process.stderr.write(
      `chat: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  },
);
