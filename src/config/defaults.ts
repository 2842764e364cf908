/** Every default that changes behaviour, in one place. */

/** The characters directory, relative to the working directory. */
export const DEFAULT_CHARACTERS_DIR = 'characters';
/** Strict loading (any bad character stops the server) is for CI and `troupe check`. */
export const DEFAULT_CHARACTERS_STRICT = false;

/** HTTP/WebSocket port. */
export const DEFAULT_PORT = 8080;
/** Loopback only unless told otherwise: exposing the server is a decision. */
export const DEFAULT_HOST = '127.0.0.1';
/** vLLM's default address, used when neither a base URL nor an API key is set. */
export const DEFAULT_LLM_BASE_URL = 'http://127.0.0.1:8000/v1';
/** Where a bare `LLM_API_KEY`/`OPENAI_API_KEY` points. */
export const OPENAI_BASE_URL = 'https://api.openai.com/v1';

/** Concurrent sessions; the next connection is closed with 1013. */
export const DEFAULT_MAX_SESSIONS = 1000;
/** Largest client frame; larger ones close the socket with 1009. */
export const DEFAULT_MAX_FRAME_BYTES = 1024 * 1024;
/** Bytes a client may leave unread before it is closed with 1013 as a slow consumer. */
export const DEFAULT_MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** Time running turns get to finish on SIGTERM/SIGINT before sockets close with 1001. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
/** How long `GET /health` reuses its last LLM probe. */
export const DEFAULT_HEALTH_CACHE_MS = 5_000;
/** Timeout of one LLM health probe. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 2_000;

/** Handler timeout of tools that set none. */
export const DEFAULT_TOOL_TIMEOUT_MS = 100;
/** Tool rounds per turn before the model must answer without tools. */
export const DEFAULT_MAX_TOOL_ROUNDS = 10;
/**
 * History budget in estimated tokens (about 4 characters each): older turns are
 * dropped whole past it. Fits an 8k-context model with room for the reply.
 */
export const DEFAULT_CONTEXT_TOKENS = 6_000;

/** pino level. */
export const DEFAULT_LOG_LEVEL = 'info';
/** User and model text stay out of logs unless asked for. */
export const DEFAULT_LOG_CONTENT = false;
