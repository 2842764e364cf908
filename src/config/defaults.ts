/** Every default that changes behaviour, in one place. */

/** The characters directory, relative to the working directory. */
export const DEFAULT_CHARACTERS_DIR = 'characters';
/** Characters' MCP servers are connected at load. */
export const DEFAULT_CHARACTERS_MCP = true;
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
/** Send window of text deltas, ms (0 = every delta at once); see docs/performance.md. */
export const DEFAULT_DELTA_BATCH_MS = 0;
/** A session with no client frame for this long is closed with 4000 (0 = never). */
export const DEFAULT_SESSION_IDLE_TIMEOUT_S = 900;
/** A session open this long is closed with 4001 (OpenAI Realtime ends sessions at 60 minutes; 0 = never). */
export const DEFAULT_SESSION_MAX_DURATION_S = 3600;
/**
 * Seconds a connection has to send its whole request (a WebSocket upgrade or
 * an HTTP request) before it gets 408 and is closed: a client that connects
 * and sends nothing, or half a request, holds a socket no longer than this.
 */
export const DEFAULT_HANDSHAKE_TIMEOUT_S = 10;
/** WebSocket ping interval; a peer that misses a whole interval is cut off (0 = no pings). */
export const DEFAULT_WS_PING_INTERVAL_S = 30;
/** Client frames a session may have waiting to be handled; past it they are refused. */
export const DEFAULT_MAX_PENDING_FRAMES = 256;
/** Time running turns get to finish on a stop signal (SIGTERM, SIGINT, SIGHUP) before sockets close with 1001. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
/** How long `GET /health` reuses its last LLM probe. */
export const DEFAULT_HEALTH_CACHE_MS = 5_000;
/** Timeout of one LLM health probe. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 2_000;

/** Longest silence of the LLM (no chunk) before a request fails; SSE comments do not count. */
export const DEFAULT_LLM_IDLE_TIMEOUT_MS = 60_000;
/** Longest one LLM request may stream in all (0 = no limit). */
export const DEFAULT_LLM_TOTAL_TIMEOUT_MS = 300_000;
/** Silence of the LLM after which the client is told the model is slow (0 = never). */
export const DEFAULT_LLM_SLOW_NOTICE_MS = 5_000;
/** Longest line of the LLM's event stream; longer ones fail the request. */
export const DEFAULT_LLM_MAX_LINE_BYTES = 4 * 1024 * 1024;

/**
 * Which `input_image` URLs are passed to the LLM: `data` (only inline data
 * URLs — the LLM server never fetches a URL a client chose), or a list of
 * host names whose https URLs may also go.
 */
export const DEFAULT_IMAGE_URL_HOSTS: readonly string[] = [];

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

/** Speech to text: Debian's pocketsphinx runs offline, in-process. */
export const DEFAULT_STT_PROVIDER = 'pocketsphinx';
/** Text to speech: CMU Flite in WASI, shipped in the npm package (clearer than espeak). */
export const DEFAULT_TTS_PROVIDER = 'flite';
/** Where Kyutai's moshi-server listens for STT in Unmute's compose files. */
export const DEFAULT_KYUTAI_STT_URL = 'ws://127.0.0.1:8090';
/** Where Kyutai's moshi-server listens for TTS in Unmute's compose files. */
export const DEFAULT_KYUTAI_TTS_URL = 'ws://127.0.0.1:8089';
/** Server VAD: the Realtime API's defaults. */
export const DEFAULT_VAD_THRESHOLD = 0.5;
export const DEFAULT_VAD_PREFIX_PADDING_MS = 300;
export const DEFAULT_VAD_SILENCE_MS = 500;
/**
 * User speech shorter than this while the character speaks is a false start
 * (a cough, a "mm"): it does not interrupt.
 */
export const DEFAULT_BARGE_IN_MIN_MS = 300;
/**
 * pocketsphinx: a partial hypothesis every this many ms of speech, so the
 * user's words go out while they speak. Measured at no CPU cost above the
 * noise (process CPU per second of audio 0.27 off, 0.24 at 300 ms; load 7–10;
 * docs/voice.md).
 */
export const DEFAULT_STT_PARTIAL_MS = 300;
/** Kyutai STT: the turn ends when its pause prediction passes this (Unmute's value). */
export const DEFAULT_STT_PAUSE_THRESHOLD = 0.6;
/**
 * Audio is sent this far ahead of the playback clock: enough to ride out
 * network jitter, little enough that a barge-in cuts speech off quickly.
 */
export const DEFAULT_AUDIO_LEAD_MS = 300;
/** Longest utterance held for STT (manual commit or endless speech); older audio is dropped with a warning. */
export const DEFAULT_MAX_UTTERANCE_MS = 60_000;

/**
 * Worker processes of `npm start`: one per core this process may use (`usableCores()`: the container's CPU limit included);
 * `WORKERS=1` runs a single process.
 */
export const DEFAULT_WORKERS: number | 'auto' = 'auto';
/** A dropped conversation can be resumed for 15 minutes. */
export const DEFAULT_RESUME_TTL_S = 900;
/** Room for the in-memory resume store's records, MiB: thousands of conversations, far from a heap's limit. */
export const DEFAULT_RESUME_MEMORY_MB = 256;
/**
 * A reply under way is written to a store outside the process at most this
 * often, from its first text: a killed process loses at most this much of a
 * reply (a spoken one: of what had played), and a reply shorter than this
 * costs no write of its own.
 */
export const DEFAULT_RESUME_REPLY_SAVE_MS = 1_000;
/** Changes that matter are written to the resume store at most this often per session. */
export const DEFAULT_RESUME_SAVE_DELAY_MS = 50;
/** How long a connection with `?resume=` waits for the store before starting fresh. */
export const DEFAULT_RESUME_LOAD_TIMEOUT_MS = 2_000;
/**
 * New sessions are refused (1013) while the event loop lags more than this
 * on average over the last second: far above a healthy server's few ms
 * (under 1 ms at 200 sessions on a 2-core machine, 12–60 ms when saturated
 * at 1000), and above what a busy machine does to an idle process.
 */
export const DEFAULT_OVERLOAD_LAG_MS = 100;
/**
 * New sessions are refused (1013) while the event loop was busy more than
 * this share of the last second: a loop with no idle time left delays every
 * delta of the sessions it holds.
 */
export const DEFAULT_OVERLOAD_BUSY = 0.9;
/**
 * New sessions are refused (1013) while the heap uses more than this share
 * of V8's limit: far above a server's working set (a few hundred MiB), close
 * enough to the limit that taking more sessions would risk a crash.
 */
export const DEFAULT_OVERLOAD_HEAP = 0.85;
/**
 * New sessions are refused (1013) while the container uses more than this
 * share of its memory limit (every process in it, as the kernel counts): the
 * kernel kills at the limit, whatever V8's heap limit says.
 */
export const DEFAULT_OVERLOAD_MEMORY = 0.85;
/** The retry hint given with an overload refusal, and with a full or draining server's 503 to a load balancer. */
export const DEFAULT_OVERLOAD_RETRY_MS = 2_000;
