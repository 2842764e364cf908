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

/**
 * The LLM endpoint failed: HTTP error, broken stream, error event mid-stream.
 * The message is short and fixed (clients see it); what the server said, and
 * where, is in `detail`, with credentials removed, for logs only.
 */
export class LlmStreamError extends TroupeError {
  override name = 'LlmStreamError';
  /** HTTP status when the server answered with one. */
  readonly status: number | undefined;
  /** The upstream detail (URL, error body), credentials redacted: for logs, never for clients. */
  readonly detail: string | undefined;
  constructor(
    message: string,
    options: TroupeErrorOptions & { status?: number; detail?: string } = {},
  ) {
    super('E_LLM_STREAM', message, options);
    this.status = options.status;
    this.detail = options.detail === undefined ? undefined : redactSecrets(options.detail);
  }
}

/**
 * The LLM's stream ended with neither `[DONE]` nor a `finish_reason`: the
 * reply is cut short (a proxy or server that dropped the connection cleanly).
 */
export class LlmTruncatedError extends LlmStreamError {
  override name = 'LlmTruncatedError';
  constructor(message = 'The LLM stream ended before the reply was complete.') {
    super(message, { retryable: true });
  }
}

/** A turn was stopped by its AbortSignal (cancel, barge-in, shutdown). */
export class TurnAbortedError extends TroupeError {
  override name = 'TurnAbortedError';
  constructor(message = 'The turn was cancelled.', options: TroupeErrorOptions = {}) {
    super('E_ABORTED', message, options);
  }
}

/** Audio the client sent cannot be read: bad base64, an odd byte count, a broken Ogg page or Opus packet. */
export class AudioFormatError extends TroupeError {
  override name = 'AudioFormatError';
  constructor(message: string, options: TroupeErrorOptions = {}) {
    super('E_AUDIO_FORMAT', message, options);
  }
}

/** A speech engine failed (STT or TTS): it is unreachable, refused the request or broke mid-stream. */
export class SpeechProviderError extends TroupeError {
  override name = 'SpeechProviderError';
  /** The provider's name (`pocketsphinx`, `openai`, `kyutai`, `espeak`, …). */
  readonly provider: string;
  readonly kind: 'stt' | 'tts';
  constructor(
    kind: 'stt' | 'tts',
    provider: string,
    message: string,
    options: TroupeErrorOptions = {},
  ) {
    super(kind === 'stt' ? 'E_STT' : 'E_TTS', message, options);
    this.kind = kind;
    this.provider = provider;
  }
}

/** The classes of character errors; each is counted in metrics by this label. */
export type CharacterErrorKind =
  | 'import'
  | 'shape'
  | 'file_name'
  | 'duplicate_id'
  | 'duplicate_tool'
  | 'tool_name'
  | 'missing_handler'
  | 'handler_type'
  | 'json_schema'
  | 'binding'
  | 'system_prompt'
  | 'mcp'
  | 'handoff';

/** Every kind, for metrics that want each label present from the start. */
export const CHARACTER_ERROR_KINDS: readonly CharacterErrorKind[] = [
  'import',
  'shape',
  'file_name',
  'duplicate_id',
  'duplicate_tool',
  'tool_name',
  'missing_handler',
  'handler_type',
  'json_schema',
  'binding',
  'system_prompt',
  'mcp',
  'handoff',
];

/**
 * A character file is wrong. The message reads
 * `characters/narrator.ts: tools[0].name: what is wrong; what to write instead`.
 */
export class CharacterError extends TroupeError {
  override name = 'CharacterError';
  readonly kind: CharacterErrorKind;
  /** The file as shown to people (relative to the working directory when inside it). */
  readonly file: string;
  /** The field path inside the character (`tools[0].function.name`), `''` for the whole file. */
  readonly path: string;
  /** What is wrong, without the file and path. */
  readonly detail: string;

  constructor(
    kind: CharacterErrorKind,
    file: string,
    path: string,
    detail: string,
    options: TroupeErrorOptions = {},
  ) {
    super('E_CHARACTER', `${file}: ${path ? `${path}: ` : ''}${detail}`, options);
    this.kind = kind;
    this.file = file;
    this.path = path;
    this.detail = detail;
  }
}

/** Strict loading found errors: all of them, in file order. */
export class CharacterCheckError extends TroupeError {
  override name = 'CharacterCheckError';
  readonly errors: readonly CharacterError[];
  constructor(errors: readonly CharacterError[]) {
    super(
      'E_CHARACTER',
      `${errors.length} character error${errors.length === 1 ? '' : 's'}:\n` +
        errors.map((e) => `  ${e.message.replaceAll('\n', '\n    ')}`).join('\n'),
    );
    this.errors = errors;
  }
}

/** The `error.type` of an `error` event: whose fault it was. */
export type WireErrorType = 'invalid_request_error' | 'server_error' | 'llm_error';

/**
 * Something to tell a client through an `error` event, and, when the socket
 * must go, the close code. Carries everything the wire needs, the way an HTTP
 * exception carries its status.
 */
export class ProtocolError extends TroupeError {
  override name = 'ProtocolError';
  readonly type: WireErrorType;
  /** The wire `error.code`, e.g. `unknown_parameter`. */
  readonly wireCode: string;
  /** The offending field, e.g. `session.tools[0].name`. */
  readonly param: string | null;
  /** The client's `event_id` of the offending event. */
  readonly eventId: string | null;
  /** Close the socket with this code after sending the error. */
  readonly closeCode: number | undefined;

  constructor(
    wireCode: string,
    message: string,
    options: TroupeErrorOptions & {
      type?: WireErrorType;
      param?: string | null;
      eventId?: string | null;
      closeCode?: number;
    } = {},
  ) {
    super('E_PROTOCOL', message, options);
    this.type = options.type ?? 'invalid_request_error';
    this.wireCode = wireCode;
    this.param = options.param ?? null;
    this.eventId = options.eventId ?? null;
    this.closeCode = options.closeCode;
  }

  /** The `error` field of the wire's `error` event. */
  get payload(): {
    type: WireErrorType;
    code: string;
    message: string;
    param: string | null;
    event_id: string | null;
  } {
    return {
      type: this.type,
      code: this.wireCode,
      message: this.message,
      param: this.param,
      event_id: this.eventId,
    };
  }
}

/** `scheme://user:pass@` in a URL. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@'"]+@/gi;
/**
 * Bearer tokens and API-key-looking words: `sk-…`, and the value after a
 * key, token, password or secret (`access_token=…`, `"token": "…"`,
 * `Password: …`).
 */
const SECRET_WORDS =
  /\b(bearer\s+)[\w.~+/=-]{8,}|\bsk-[\w-]{8,}|\b(\w*(?:api[_-]?key|token|password|passwd|secret)["']?\s*[=:]\s*["']?)[^\s&'",}]+/gi;

/**
 * Removes credentials from text bound for logs or people: `user:pass@` in
 * URLs, bearer tokens, `sk-…` keys and `key=`/`token=`/`password=` values.
 *
 * @example redactSecrets('http://u:p@host/v1') // 'http://[redacted]@host/v1'
 */
export function redactSecrets(text: string): string {
  return text
    .replace(URL_CREDENTIALS, '$1[redacted]@')
    .replace(SECRET_WORDS, (match, bearer?: string, key?: string) =>
      bearer ? `${bearer}[redacted]` : key ? `${key}[redacted]` : '[redacted]',
    );
}

/**
 * A URL without its `user:pass@` (or `user@`): for logs, `/health` and errors.
 * Text that is not a URL gets {@link redactSecrets}.
 *
 * @example redactUrl('https://me:pw@llm.example/v1') // 'https://llm.example/v1'
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username === '' && u.password === '') return url;
    u.username = '';
    u.password = '';
    return u.href;
  } catch {
    return redactSecrets(url);
  }
}

/** Absolute file paths (POSIX, `file://`, Windows), with the file's own name kept. */
const FILE_PATHS =
  /(?:file:\/\/|(?<![\w.:/\\-]))(?:[a-zA-Z]:[\\/]|\/)(?:[^\s'"`:;,()<>[\]{}\\/]+[\\/])+([^\s'"`:;,()<>[\]{}\\/]*)/g;

/**
 * Replaces absolute file paths by their last part (`/srv/app/data/x.json` →
 * `…/x.json`): an error still says which file, not where the server keeps it.
 *
 * @example redactPaths("ENOENT: open '/srv/a/x.json'") // "ENOENT: open '…/x.json'"
 */
export function redactPaths(text: string): string {
  return text.replace(FILE_PATHS, (_m, last: string) => `…/${last}`);
}

/**
 * The first line of a thrown error, for people outside the server (a client,
 * the model): credentials removed, file paths cut to their last part, at most
 * `max` characters. Logs keep the error whole.
 *
 * @example errorLine(new Error('no route to postgres://u:pw@db/x\nat …')) // 'no route to postgres://[redacted]@db/x'
 */
export function errorLine(error: unknown, max = 200): string {
  const raw = redactPaths(redactSecrets(thrownText(error)));
  const line = raw.split('\n', 1)[0] ?? '';
  return line.length > max ? `${line.slice(0, max - 3)}...` : line || 'unknown error';
}

/** What was thrown, as text: an Error's message, an object's JSON (not `[object Object]`). */
function thrownText(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (error === null || typeof error !== 'object') return String(error);
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
