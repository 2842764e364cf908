/**
 * The terminal chat client: talks to one character over the realtime
 * WebSocket, streaming replies and showing every tool call. Interactive on a
 * terminal (a `you: ` prompt, Ctrl+C to stop a reply); with stdin piped it
 * sends one turn per line, waiting for each reply, and exits after the last.
 *
 * This file parses the flags and picks the mode; the connection is in
 * chat-connection.ts, the modes in chat-text-modes.ts and chat-voice-modes.ts.
 *
 * With the voice flags it also speaks and listens (chat-voice.ts): `--voice`
 * plays spoken replies, `--voice-out` keeps them in a WAV file, `--wav` says a
 * file and waits for the answer, `--mic` streams the microphone with barge-in.
 *
 * @example npm run chat -- --character weather --url ws://127.0.0.1:8080/v1/realtime
 */
import { createInterface } from 'node:readline';
import { connect, writePlain, type Sink } from './chat-connection.js';
import {
  CHAT_USAGE,
  ChatUsageError,
  EXIT_USAGE,
  parseChatArgs,
  type ChatOptions,
} from './chat-options.js';
import { createChatRenderer } from './chat-render.js';
import { runInteractive, runPiped } from './chat-text-modes.js';
import { prepareVoice, VoiceSetupError, type VoiceSetup } from './chat-voice-setup.js';
import { runMic, runWav } from './chat-voice-modes.js';

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
