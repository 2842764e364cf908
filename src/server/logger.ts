/**
 * The server's pino logger. Messages are fixed strings; data goes in fields.
 * User and model text only appears when `LOG_CONTENT` is on (sessions check it).
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogConfig } from '../config/index.js';
import { createPrettyStream, type PrettyLogOptions } from './pretty-log.js';

/** How the log reads: JSON lines (pipes, production) or human lines (a terminal). */
export interface LoggerFormat {
  /** Human lines instead of JSON (see pretty-log.ts). @defaultValue false */
  pretty?: boolean | PrettyLogOptions;
}

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
  const out = format.pretty
    ? createPrettyStream(destination ?? process.stdout, format.pretty === true ? {} : format.pretty)
    : destination;
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
