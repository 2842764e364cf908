/**
 * The error family of Troupe. Every error carries a stable `code` that logs,
 * metrics and the wire can rely on, and says whether retrying may help.
 */

/** Options shared by every Troupe error. */
export interface TroupeErrorOptions {
  /** The error that caused this one, kept for logs. */
  cause?: unknown;
  /** Whether the same call may succeed if tried again. @defaultValue false */
  retryable?: boolean;
}

/** Base class: a message that says what failed, why, and what to do. */
export class TroupeError extends Error {
  override name = 'TroupeError';
  readonly code: string;
  readonly retryable: boolean;

  constructor(code: string, message: string, options: TroupeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/** Misconfiguration by whoever runs the server or writes a character. */
export class ConfigError extends TroupeError {
  override name = 'ConfigError';
  constructor(message: string, options: TroupeErrorOptions = {}) {
    super('E_CONFIG', message, options);
  }
}

/** A tool library cannot serve a character's tool descriptions. */
export class ToolBindingError extends TroupeError {
  override name = 'ToolBindingError';
  constructor(message: string, options: TroupeErrorOptions = {}) {
    super('E_TOOL_BINDING', message, options);
  }
}

/** The LLM endpoint failed: HTTP error, broken stream, error event mid-stream. */
export class LlmStreamError extends TroupeError {
  override name = 'LlmStreamError';
  /** HTTP status when the server answered with one. */
  readonly status: number | undefined;
  constructor(message: string, options: TroupeErrorOptions & { status?: number } = {}) {
    super('E_LLM_STREAM', message, options);
    this.status = options.status;
  }
}

/** A turn was stopped by its AbortSignal (cancel, barge-in, shutdown). */
export class TurnAbortedError extends TroupeError {
  override name = 'TurnAbortedError';
  constructor(message = 'The turn was cancelled.', options: TroupeErrorOptions = {}) {
    super('E_ABORTED', message, options);
  }
}
