/**
 * The server's pino logger. Messages are fixed strings; data goes in fields.
 * User and model text only appears when `LOG_CONTENT` is on (sessions check it).
 */
import { writeSync } from 'node:fs';
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
 * How long a line may wait for others to leave with it: each write to stdout
 * costs a hand-over to a writer thread and a wake-up of the reader, and
 * lines leave in one write per batch (at most this late) rather than one each.
 */
export const LOG_BATCH_MS = 20;
/** A batch this large leaves at once. */
export const LOG_BATCH_BYTES = 16 * 1024;

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
/** Hands the lines of the batch under way to the writer at once. */
let sendBatch = (): void => {};

/**
 * Stdout as a log destination that never holds the process: writes are
 * asynchronous, at most {@link LOG_BUFFER_MAX_BYTES} wait for a reader that
 * stopped reading (`npm start | slow-reader`; later lines are dropped), a
 * closed pipe ends logging, and at exit the held lines get
 * {@link LOG_EXIT_FLUSH_MS} to go out. Lines leave in batches (at most
 * {@link LOG_BATCH_MS} late): one write for a busy server's many lines. One
 * per process.
 */
export function stdoutDestination(): DestinationStream {
  if (stdout) return stdout;
  let exitDeadline: number | undefined;
  let gone = false;
  const fd = process.stdout.fd ?? 1;
  const stream = new SonicBoom({
    fd,
    sync: false,
    maxLength: LOG_BUFFER_MAX_BYTES,
    // A full pipe: retry later while running; at exit, only until the deadline.
    retryEAGAIN: () => exitDeadline === undefined || performance.now() < exitDeadline,
  });
  stream.on('error', () => {
    // EPIPE (the reader is gone) or worse: logging stops, the process does not.
    gone = true;
  });
  let batch = '';
  let batchTimer: NodeJS.Timeout | undefined;
  sendBatch = () => {
    clearTimeout(batchTimer);
    batchTimer = undefined;
    const lines = batch;
    batch = '';
    if (lines !== '' && !gone) stream.write(lines);
  };
  process.once('exit', () => {
    clearTimeout(batchTimer);
    if (gone) return;
    exitDeadline = performance.now() + LOG_EXIT_FLUSH_MS;
    try {
      stream.flushSync();
      // Not through the stream: an exit does not wait for its writer thread.
      if (batch !== '') writeAllSync(fd, batch, exitDeadline);
    } catch {
      // The reader did not take the rest in time: it is dropped.
    }
  });
  // A line handed over is written by a thread of its own: the process must
  // not exit before 'drain' says every line so far is out (see logsWritten).
  stream.on('drain', () => {
    if (batch !== '') return;
    pending = false;
    for (const wake of waiting.splice(0)) wake();
  });
  stdout = {
    write(line: string) {
      if (gone) return;
      pending = true;
      batch += line;
      if (batch.length >= LOG_BATCH_BYTES) sendBatch();
      // Unref'd: a batch does not keep the process alive; exit sends it.
      else batchTimer ??= setTimeout(sendBatch, LOG_BATCH_MS).unref();
    },
  };
  return stdout;
}

/** Writes all of `text` now, a full pipe tried again until `until` (`performance.now()` time). */
function writeAllSync(fd: number, text: string, until: number): void {
  let rest = Buffer.from(text);
  while (rest.length > 0) {
    try {
      rest = rest.subarray(writeSync(fd, rest));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || performance.now() >= until) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

/**
 * Resolves once every log line so far is written to stdout, or after `ms`
 * (a reader that stopped reading does not hold the exit). Call it before
 * `process.exit`: an exit while a line's write is under way loses that line.
 *
 * @example await server.shutdown(); await logsWritten(); process.exit(0);
 */
export function logsWritten(ms = LOG_EXIT_FLUSH_MS): Promise<void> {
  sendBatch();
  if (!pending) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    waiting.push(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * A line that sums up events of a kind rather than one line each: call the
 * returned function at each event, and `say(count)` is called with the
 * events since the last line at most once per `everyMs`. With `firstAtOnce`
 * the first event is said at once (then the rest of its window at the
 * window's end); without, the first line waits for the end of the window,
 * so a burst is one line.
 *
 * @example const evicted = summedLog(60_000, true, (n) => log.warn({ evicted: n }, 'let go'));
 */
export function summedLog(
  everyMs: number,
  firstAtOnce: boolean,
  say: (count: number) => void,
): () => void {
  let unsaid = 0;
  let saidAt = -Infinity;
  const flush = (): void => {
    saidAt = performance.now();
    const count = unsaid;
    unsaid = 0;
    say(count);
  };
  return () => {
    if (unsaid++ > 0) return;
    const wait = firstAtOnce ? saidAt + everyMs - performance.now() : everyMs;
    if (wait <= 0) flush();
    else setTimeout(flush, wait).unref();
  };
}
