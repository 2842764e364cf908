/**
 * Pieces every STT provider shares: the logger shape, input checks and the
 * way engine failures are reported exactly once.
 */
import { AudioFormatError, SpeechProviderError } from '../../errors.js';
import type { SttEvent } from '../types.js';

/** The pino-shaped logger providers write to (a pino `Logger` fits). */
export interface SttLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything: the default when none is given. */
export const SILENT_LOGGER: SttLogger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};

/**
 * Checks what a session passes to `write()`: anything but an `Int16Array` is
 * a programming error upstream (a Buffer, a Float32Array), reported clearly.
 */
export function assertPcm16(pcm: unknown, provider: string): asserts pcm is Int16Array {
  if (!(pcm instanceof Int16Array)) {
    const got =
      pcm === null ? 'null' : typeof pcm === 'object' ? pcm.constructor?.name : typeof pcm;
    throw new AudioFormatError(
      `${provider} STT: write() takes mono PCM16 as an Int16Array, got ${got}; ` +
        'decode and resample the audio first (see src/voice/).',
    );
  }
}

/**
 * Calls a session's event handler without letting its exceptions escape
 * into socket or worker callbacks, where they would crash the process.
 */
export function emitSafely(
  onEvent: (event: SttEvent) => void,
  event: SttEvent,
  log: SttLogger,
  provider: string,
): void {
  try {
    onEvent(event);
  } catch (err) {
    log.error({ err, provider, event: event.type }, 'stt event handler threw');
  }
}

/** A promise with its settle functions, for replies matched to requests. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: Error): void;
}

/** Creates a {@link Deferred}. Its promise never counts as unhandled: callers may drop it. */
export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A commit whose caller went away (stream closed) must not become an unhandled rejection.
  promise.catch(() => {});
  return { promise, resolve, reject };
}

/** Wraps any failure as the provider's {@link SpeechProviderError}, keeping one that already is. */
export function sttError(
  provider: string,
  message: string,
  cause?: unknown,
  retryable = false,
): SpeechProviderError {
  return new SpeechProviderError('stt', provider, message, {
    ...(cause === undefined ? {} : { cause }),
    retryable,
  });
}

/** The message of anything thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
