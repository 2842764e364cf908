/**
 * Command-line options of the chat client (`npm run chat`), parsed without
 * side effects so they can be unit-tested. Only flags are read: environment
 * variables belong to the server's config (src/config/), not to this client.
 */
import { parseArgs } from 'node:util';
import { closest } from '../characters/closest.js';

/** Where the client connects when `--url` is not given. */
export const DEFAULT_CHAT_URL = 'ws://127.0.0.1:8080/v1/realtime';

/** The path of the realtime endpoint, added when a URL names only a host. */
export const REALTIME_PATH = '/v1/realtime';

/** Exit code for bad usage (unknown flag, missing value, bad URL). */
export const EXIT_USAGE = 2;

/** The `--help` text: every flag, the keys and commands, and a few examples. */
export const CHAT_USAGE = `Usage: npm run chat -- [options]

Talk to a Troupe character in the terminal. Type a line and press Enter;
the reply streams in, with a line for every tool the character uses.

  -c, --character ID   the character to talk to (default: the server's)
      --url URL        the server: ws(s)://, http(s):// or host:port
                       (default ${DEFAULT_CHAT_URL})
      --token T        sent as "Authorization: Bearer T" when the server needs one
      --no-color       plain output even on a terminal
  -h, --help           show this text

Voice (the server needs speech engines: STT_PROVIDER, TTS_PROVIDER):
      --voice          spoken replies, played through the first player on PATH
                       (aplay, paplay, pw-play, pw-cat, ffplay or play)
      --voice-out FILE also write everything the character says to FILE.wav;
                       without --voice, to the file only (nothing is played)
      --wav FILE       say FILE (a 16-bit PCM WAV, any rate) instead of typing:
                       sent in real time, then the client waits for the reply
                       and exits (0, or 1 on error)
      --mic            talk through the microphone (arecord, parec, pw-record or
                       rec) until Ctrl+C or Ctrl+D; speaking over a reply
                       interrupts it

Keys: Ctrl+C stops a reply (or quits when idle), Ctrl+D quits.
Commands: /cancel stops the reply, /quit quits, /help shows this list.
With stdin piped, every line is one turn; the client exits after the last reply
(exit 1 when the connection fails or the server reports an error).

Examples:
  npm run chat -- -c weather --voice
  npm run chat -- -c weather --voice --mic
  npm run chat -- -c weather --wav question.wav --voice-out reply.wav`;

/** What the chat client was asked to do. */
export interface ChatOptions {
  /** The WebSocket URL to connect to, `?character=` included. */
  url: string;
  /** The character asked for, if any. */
  character: string | undefined;
  /** Bearer token for the `Authorization` header, if any. */
  token: string | undefined;
  /** Whether `--no-color` was given. */
  noColor: boolean;
  /** Whether `--help` was given: print the usage and exit 0. */
  help: boolean;
  /** `--voice`: ask for spoken replies and play them through a player found on PATH. */
  voice: boolean;
  /** `--voice-out FILE`: write the character's speech to this WAV file (spoken replies implied). */
  voiceOut: string | undefined;
  /** `--wav FILE`: say this WAV file as the user's turn, wait for the reply, exit. */
  wav: string | undefined;
  /** `--mic`: stream the microphone until Ctrl+C or Ctrl+D. */
  mic: boolean;
}

/** Bad flags or values; the CLI prints the message and exits with {@link EXIT_USAGE}. */
export class ChatUsageError extends Error {
  override name = 'ChatUsageError';
  readonly code = 'E_USAGE';
}

/** The chat client's long flags, for "did you mean" and the list of flags. */
const CHAT_FLAGS = [
  'character',
  'url',
  'token',
  'no-color',
  'voice',
  'voice-out',
  'wav',
  'mic',
  'help',
] as const;

/** Adds the nearest flag and the list of flags to parseArgs's "Unknown option" message. */
function withFlagHint(message: string): string {
  const unknown = /^Unknown option '--?([^'=]+)'\.$/.exec(message);
  if (!unknown) return message;
  const guess = closest(unknown[1]!, CHAT_FLAGS);
  return (
    `${message.slice(0, -1)}${guess ? `; did you mean --${guess}?` : '.'}\n` +
    `Flags: ${CHAT_FLAGS.map((f) => `--${f}`).join(', ')}.`
  );
}

/**
 * Parses the chat client's flags.
 *
 * @example parseChatArgs(['-c', 'weather']).url // 'ws://127.0.0.1:8080/v1/realtime?character=weather'
 * @throws ChatUsageError for unknown flags, missing values, stray arguments or a bad URL.
 */
export function parseChatArgs(argv: readonly string[]): ChatOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        character: { type: 'string', short: 'c' },
        url: { type: 'string' },
        token: { type: 'string' },
        'no-color': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        voice: { type: 'boolean' },
        'voice-out': { type: 'string' },
        wav: { type: 'string' },
        mic: { type: 'boolean' },
      },
    }));
  } catch (err) {
    // parseArgs's messages already name the flag ("Unknown option '--x'"); drop its hint
    // about "--" since this client takes no positional arguments at all.
    const message = (err as Error).message.replace(/\. To specify a positional argument.*$/s, '');
    throw new ChatUsageError(withFlagHint(message.endsWith('.') ? message : `${message}.`));
  }
  const help = values.help === true;
  if (help) {
    return {
      url: DEFAULT_CHAT_URL,
      character: undefined,
      token: undefined,
      noColor: false,
      help,
      voice: false,
      voiceOut: undefined,
      wav: undefined,
      mic: false,
    };
  }
  const character = values.character?.trim();
  if (character !== undefined && character === '') {
    throw new ChatUsageError('--character needs a character id, e.g. --character narrator.');
  }
  const token = values.token;
  if (token !== undefined && token.trim() === '') {
    throw new ChatUsageError('--token needs a value.');
  }
  const voiceOut = filePath(values['voice-out'], '--voice-out', 'reply.wav');
  const wav = filePath(values.wav, '--wav', 'question.wav');
  const mic = values.mic === true;
  if (wav !== undefined && mic) {
    throw new ChatUsageError(
      "--wav and --mic both give the user's speech; use one (--wav FILE says a file, --mic listens).",
    );
  }
  return {
    url: resolveChatUrl(values.url ?? DEFAULT_CHAT_URL, character),
    character,
    token,
    noColor: values['no-color'] === true,
    help,
    voice: values.voice === true,
    voiceOut,
    wav,
    mic,
  };
}

/** A file flag's value: refused when blank, so `--wav ""` is not read as the current directory. */
function filePath(value: string | undefined, flag: string, example: string): string | undefined {
  if (value === undefined) return undefined;
  if (value.trim() === '')
    throw new ChatUsageError(`${flag} needs a file name, e.g. ${flag} ${example}.`);
  return value;
}

/**
 * Turns what the user typed for `--url` into the realtime WebSocket URL:
 * `http(s)` becomes `ws(s)`, a bare `host:port` gets `ws://`, a URL without a
 * path gets `/v1/realtime`, and `?character=ID` is added when given.
 *
 * @example resolveChatUrl('localhost:8080', 'narrator') // 'ws://localhost:8080/v1/realtime?character=narrator'
 * @throws ChatUsageError when the URL cannot be parsed or has another scheme.
 */
export function resolveChatUrl(input: string, character?: string): string {
  const text = input.trim();
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `ws://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new ChatUsageError(
      `--url "${input}" is not a URL; use e.g. ws://127.0.0.1:8080/v1/realtime or 127.0.0.1:8080.`,
    );
  }
  const scheme = { 'ws:': 'ws:', 'wss:': 'wss:', 'http:': 'ws:', 'https:': 'wss:' }[url.protocol];
  if (scheme === undefined || url.hostname === '') {
    throw new ChatUsageError(
      `--url "${input}" must be ws://, wss://, http://, https:// or host:port.`,
    );
  }
  if (url.username !== '' || url.password !== '') {
    throw new ChatUsageError('--url must not carry a user name or password; use --token.');
  }
  // http, https, ws and wss are all "special" schemes, so the URL class lets one become another.
  url.protocol = scheme;
  url.hash = '';
  if (url.pathname === '/' || url.pathname === '') url.pathname = REALTIME_PATH;
  if (character !== undefined) url.searchParams.set('character', character);
  return url.toString();
}
