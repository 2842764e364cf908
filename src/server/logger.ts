/**
 * The server's pino logger. Messages are fixed strings; data goes in fields.
 * User and model text only appears when `LOG_CONTENT` is on (sessions check it).
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import * as sonicBoom from 'sonic-boom';
import type { LogConfig } from '../config/index.js';
import { createPrettyStream, type PrettyLogOptions } from './pretty-log.js';

/** How the log reads: JSON lines (pipes, production) or human lines (a terminal). */
export interface LoggerFormat {
  /** Human lines instead of JSON (see pretty-log.ts). @defaultValue false */
  pretty?: boolean | PrettyLogOptions;
}

/** Log bytes held for a stdout reader that stopped reading; past it, lines are dropped. */
export const LOG_BUFFER_MAX_BYTES = 8 * 1024 * 1024;
/** How long exit waits to write the last held lines to a stalled reader. */
export const LOG_EXIT_FLUSH_MS = 500;

/**
 * Creates the root logger (JSON lines on stdout, or `destination`).
 *
 * @example
 * const log = createLogger({ level: 'info', content: false });
 * log.child({ session: id, character: 'weather' }).info({ turn: 1 }, 'response done');
 */
export function createLogger(
  config: LogConfig,
  destination?: DestinationStream,
  format: LoggerFormat = {},
): Logger {
  const sink = destination ?? stdoutDestination();
  const out = format.pretty
    ? createPrettyStream(sink, format.pretty === true ? {} : format.pretty)
    : sink;
  return pino(
    {
      level: config.level,
      base: { service: 'troupe' },
      // Credentials never reach logs, whatever a caller puts in a field.
      redact: {
        paths: [
          'authorization',
          'token',
          'apiKey',
          'headers.authorization',
          'req.headers.authorization',
        ],
        censor: '[redacted]',
      },
    },
    out,
  );
}

/** sonic-boom is CommonJS: its class is the module's default export under ESM. */
const SonicBoom = (sonicBoom as unknown as { default: typeof sonicBoom.SonicBoom }).default;

let stdout: DestinationStream | undefined;
/** Whether a line handed to stdout may not be written yet; who waits for it. */
let pending = false;
const waiting: Array<() => void> = [];

/**
 * Stdout as a log destination that never holds the process: writes are
 * asynchronous, at most {@link LOG_BUFFER_MAX_BYTES} wait for a reader that
 * stopped reading (`npm start | slow-reader`; later lines are dropped), a
 * closed pipe ends logging, and at exit the held lines get
 * {@link LOG_EXIT_FLUSH_MS} to go out. One per process.
 */
export function stdoutDestination(): DestinationStream {
  if (stdout) return stdout;
  let exitDeadline: number | undefined;
  let gone = false;
  const stream = new SonicBoom({
    fd: process.stdout.fd ?? 1,
    sync: false,
    maxLength: LOG_BUFFER_MAX_BYTES,
    // A full pipe: retry later while running; at exit, only until the deadline.
    retryEAGAIN: () => exitDeadline === undefined || performance.now() < exitDeadline,
  });
  stream.on('error', () => {
    // EPIPE (the reader is gone) or worse: logging stops, the process does not.
    gone = true;
  });
  process.once('exit', () => {
    if (gone) return;
    exitDeadline = performance.now() + LOG_EXIT_FLUSH_MS;
    try {
      stream.flushSync();
    } catch {
      // The reader did not take the rest in time: it is dropped.
    }
  });
  // A line handed over is written by a thread of its own: the process must
  // not exit before 'drain' says every line so far is out (see logsWritten).
  stream.on('drain', () => {
    pending = false;
    for (const wake of waiting.splice(0)) wake();
  });
  stdout = {
    write(line: string) {
      if (gone) return;
      pending = true;
      stream.write(line);
    },
  };
  return stdout;
}

/**
 * Resolves once every log line so far is written to stdout, or after `ms`
 * (a reader that stopped reading does not hold the exit). Call it before
 * `process.exit`: an exit while a line's write is under way loses that line.
 *
 * @example await server.shutdown(); await logsWritten(); process.exit(0);
 */
export function logsWritten(ms = LOG_EXIT_FLUSH_MS): Promise<void> {
  if (!pending) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    waiting.push(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
