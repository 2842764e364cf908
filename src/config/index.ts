/**
 * Settings, read from the environment and CLI flags and checked with zod.
 * Nothing else in Troupe reads `process.env`.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import * as D from './defaults.js';

export * from './defaults.js';

/** Where characters come from and how they are loaded. */
export interface CharactersConfig {
  /** The characters directory. @defaultValue `characters` */
  dir: string;
  /** Fail on any bad character instead of skipping it. @defaultValue false */
  strict: boolean;
  /** Reload characters when their files change. @defaultValue true unless NODE_ENV=production */
  watch: boolean;
  /**
   * Connect characters' MCP servers (start stdio ones) at load; off, characters
   * load without their MCP tools. @defaultValue true
   */
  mcp: boolean;
}

/** The HTTP/WebSocket server. */
export interface ServerConfig {
  /** @defaultValue 8080 (0 = any free port) */
  port: number;
  /** @defaultValue 127.0.0.1 */
  host: string;
  /** Clients must present it (Bearer, subprotocol or `?token=`); unset = no auth. */
  authToken?: string;
  /**
   * Browser origins allowed to connect: `'*'` for any, else a list. Clients
   * without an `Origin` header (not browsers) and same-origin pages always may.
   * @defaultValue []
   */
  allowedOrigins: '*' | string[];
  /**
   * Host names browsers may reach the server by (DNS-rebinding guard), beside
   * IP literals, `localhost`, this machine's name and `host`: `'*'` for any.
   * @defaultValue []
   */
  allowedHosts: '*' | string[];
  /** @defaultValue 1000 */
  maxSessions: number;
  /** Seconds without a client frame before a session is closed (4000); 0 = never. @defaultValue 900 */
  sessionIdleTimeoutS: number;
  /** Seconds a session may last (closed with 4001); 0 = no limit. @defaultValue 3600 */
  sessionMaxDurationS: number;
  /** Seconds a connection has to send its whole request (408 after). @defaultValue 10 */
  handshakeTimeoutS: number;
  /** Seconds between WebSocket pings; a peer that misses one is cut off. 0 = none. @defaultValue 30 */
  pingIntervalS: number;
  /** Client frames one socket may have waiting; more are refused. @defaultValue 256 */
  maxPendingFrames: number;
  /** @defaultValue 1 MiB */
  maxFrameBytes: number;
  /** @defaultValue 4 MiB */
  maxBufferedBytes: number;
  /**
   * Send window of text deltas, ms: a delta within this of the last delta
   * frame of its item waits, joined with the next ones (an item's first
   * delta never waits); 0 = every delta at once. @defaultValue 0
   */
  deltaBatchMs: number;
  /** @defaultValue 10000 */
  shutdownGraceMs: number;
  /** @defaultValue 5000 */
  healthCacheMs: number;
  /** Serve https/wss with these PEM files (both or neither). */
  tls?: { certFile: string; keyFile: string };
  /** A built Kyutai Unmute frontend (its checkout's `frontend/`) to serve at `/unmute`. */
  unmuteFrontendDir?: string;
}

/** The OpenAI-compatible LLM endpoint. */
export interface LlmConfig {
  /** @defaultValue vLLM on 127.0.0.1:8000, or OpenAI when only a key is set */
  baseURL: string;
  apiKey?: string;
  /** Unset: the only model the server lists. */
  model?: string;
  /** Longest silence (no chunk; comments do not count). @defaultValue 60000 */
  idleTimeoutMs: number;
  /** Longest request in all; 0 = none. @defaultValue 300000 */
  totalTimeoutMs: number;
  /** Silence after which the client is told the model is slow; 0 = never. @defaultValue 5000 */
  slowNoticeMs: number;
  /** Longest event-stream line. @defaultValue 4 MiB */
  maxLineBytes: number;
}

/** How sessions run turns. */
export interface SessionsConfig {
  /** The character of sessions that name none; unset = the first loaded (alphabetical). */
  defaultCharacter?: string;
  /** @defaultValue 100 */
  toolTimeoutMs: number;
  /** @defaultValue 10 */
  maxToolRounds: number;
  /** History budget in estimated tokens. @defaultValue 6000 */
  contextTokens: number;
  /** How a session's tool variant is chosen when the client names none. @defaultValue 'first' */
  variantAssignment: 'first' | 'random';
  /**
   * How closely a connection follows OpenAI's API unless it asks
   * (`/openai/v1/realtime`, `?compat=`): see `CompatMode`. @defaultValue 'troupe'
   */
  compat: 'troupe' | 'openai';
  /**
   * `input_image` URLs passed to the LLM beside data URLs: https URLs of these
   * hosts, `'*'` for any public https URL. Private and link-local addresses
   * are always refused. @defaultValue [] (data URLs only)
   */
  imageUrlHosts: '*' | string[];
}

/** Logging. */
export interface LogConfig {
  /** @defaultValue info */
  level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Log user and model text; otherwise it is redacted. @defaultValue false */
  content: boolean;
}

/** A speech engine: which one and where. */
export interface SpeechEngineConfig<P extends string> {
  provider: P;
  /** HTTP base URL (`openai`) or WebSocket URL (`kyutai`); unset = the provider's default. */
  baseURL?: string;
  apiKey?: string;
  model?: string;
}

/** Speech: engines, turn detection and barge-in. */
export interface VoiceConfig {
  /** @defaultValue pocketsphinx */
  stt: SpeechEngineConfig<'pocketsphinx' | 'openai' | 'kyutai' | 'none'> & {
    language?: string;
    /** pocketsphinx worker threads at most. @defaultValue one per core */
    workers?: number;
    /** pocketsphinx: partial hypotheses every this many ms of speech; 0 = off. @defaultValue 300 */
    partialEveryMs?: number;
  };
  /** @defaultValue flite */
  tts: SpeechEngineConfig<'flite' | 'espeak' | 'openai' | 'kyutai' | 'none'> & {
    /** The voice when the character names none for this provider. */
    voice?: string;
    /** flite / espeak worker threads. @defaultValue one per core */
    workers?: number;
    /** openai: the rate of the server's PCM. @defaultValue 24000 */
    sampleRate?: number;
    /** openai: whose voice names the server takes. @defaultValue openai */
    voiceSet?: 'openai' | 'kokoro' | 'piper';
    /** openai: ask for raw `pcm` or `wav`. @defaultValue pcm */
    responseFormat?: 'pcm' | 'wav';
  };
  /** Server VAD defaults (a session's `turn_detection` overrides them). */
  vad: { threshold: number; prefixPaddingMs: number; silenceDurationMs: number };
  /** @defaultValue 300 */
  bargeInMinMs: number;
  /** @defaultValue 0.6 */
  pauseThreshold: number;
  /** @defaultValue 300 */
  audioLeadMs: number;
  /** @defaultValue 60000 */
  maxUtteranceMs: number;
}

/** Running on many cores and machines: workers, the resume store, overload refusal. */
export interface ScaleConfig {
  /** Worker processes of `npm start`: `auto` = one per core; 1 = one process. @defaultValue 1 */
  workers: number | 'auto';
  /** Keep resume state in this Redis (`redis://…`, `rediss://…`); unset = in memory, one process. */
  redisUrl?: string;
  /** How long a disconnected conversation can be resumed, in seconds. @defaultValue 900 */
  resumeTtlS: number;
  /**
   * Room for the in-memory resume store's records (this process's, or the
   * primary's with workers), in MiB; past it the oldest written are let go. @defaultValue 256
   */
  resumeMemoryMb: number;
  /**
   * How often a reply under way is written to a store outside the process
   * (the primary's, Redis), at most, from its first text, so a killed
   * process leaves what it had said; 0 = only when it ends. @defaultValue 1000
   */
  resumeReplySaveMs: number;
  /**
   * New sessions are refused with 1013 while the event loop's lag, averaged
   * over the last second, is above this; 0 = never. @defaultValue 100
   */
  overloadLagMs: number;
  /** Event-loop utilisation (0–1) above which new sessions are refused; 0 = never. @defaultValue 0.9 */
  overloadBusy: number;
  /**
   * New sessions are refused with 1013 while the process's CPU use over the
   * last second is above this fraction of one core; unset = never.
   */
  overloadCpu?: number;
  /** Share of V8's heap limit (0–1) above which new sessions are refused; 0 = never. @defaultValue 0.85 */
  overloadHeap: number;
  /**
   * Share of the container's memory limit (0–1) above which new sessions
   * are refused; 0 = never, and never without a limit. @defaultValue 0.85
   */
  overloadMemory: number;
}

/** Troupe's settings. */
export interface Config {
  characters: CharactersConfig;
  server: ServerConfig;
  llm: LlmConfig;
  sessions: SessionsConfig;
  voice: VoiceConfig;
  log: LogConfig;
  scale: ScaleConfig;
}

const flag = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no', 'on', 'off'], {
    error: 'expected true or false (or 1/0, yes/no, on/off)',
  })
  .transform((v) => ['1', 'true', 'yes', 'on'].includes(v));

const text = (what: string) =>
  z
    .string()
    .trim()
    .min(1, { error: `expected ${what}` });

const integer = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, { error: `expected a whole number from ${min} to ${max}` })
    .transform(Number)
    .pipe(
      z
        .number()
        .min(min, { error: `expected a whole number from ${min} to ${max}` })
        .max(max, { error: `expected a whole number from ${min} to ${max}` }),
    );

/** A share from 0 to 1 (`0.85`, `1`, `0`), with the error naming what it is a share of. */
function share(expected: string) {
  return z
    .string()
    .trim()
    .regex(/^(0(\.\d+)?|1(\.0+)?)$/, { error: `expected ${expected}` })
    .transform(Number)
    .optional();
}

const url = z
  .string()
  .trim()
  .refine((v) => /^https?:\/\/[^/]/.test(v) && URL.canParse(v), {
    error: 'expected an http(s) URL such as http://127.0.0.1:8000/v1',
  });

/**
 * What is wrong with a `REDIS_URL`, if anything: one Redis by host and port,
 * and its database by number. ioredis reads any path as the database: one
 * that is not a number (a typo, a Unix socket's path) was database NaN, and
 * the store wrote into database 0 without a word. It reads a query string as
 * options of its own, over the store's (`?keyPrefix=` moved the keys).
 */
function redisUrlProblem(v: string): string | undefined {
  if (!/^rediss?:\/\/[^/]/.test(v) || !URL.canParse(v)) {
    return 'expected a redis:// or rediss:// URL such as redis://127.0.0.1:6379';
  }
  const { pathname, search, hash } = new URL(v);
  if (!/^(\/\d*)?$/.test(pathname) || search !== '' || hash !== '') {
    return 'expected nothing after the port but a database number, such as redis://127.0.0.1:6379/2';
  }
  return undefined;
}

/** A speech engine's address: http(s) for OpenAI-compatible servers, ws(s) for Kyutai's. */
const speechUrl = z
  .string()
  .trim()
  .refine((v) => /^(https?|wss?):\/\/[^/]/.test(v) && URL.canParse(v), {
    error:
      'expected an http(s) or ws(s) URL such as http://127.0.0.1:8000/v1 or ws://127.0.0.1:8090',
  });

const fraction = z
  .string()
  .trim()
  .regex(/^(0(\.\d+)?|1(\.0+)?)$/, { error: 'expected a number from 0 to 1' })
  .transform(Number);

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const envSchema = z.object({
  CHARACTERS_DIR: text('a directory path').optional(),
  CHARACTERS_STRICT: flag.optional(),
  CHARACTERS_WATCH: flag.optional(),
  CHARACTERS_MCP: flag.optional(),
  NODE_ENV: z.string().optional(),
  PORT: integer(0, 65535).optional(),
  HOST: text('a host name or IP address').optional(),
  LLM_BASE_URL: url.optional(),
  LLM_API_KEY: z.string().optional(),
  OPENAI_API_KEY: z.string().optional(),
  LLM_MODEL: text('a model name').optional(),
  DEFAULT_CHARACTER: text('a character id').optional(),
  AUTH_TOKEN: z.string().optional(),
  ALLOWED_ORIGINS: z.string().optional(),
  ALLOWED_HOSTS: z.string().optional(),
  MAX_SESSIONS: integer(1, 1_000_000).optional(),
  SESSION_IDLE_TIMEOUT_S: integer(0, 7 * 24 * 3600).optional(),
  SESSION_MAX_DURATION_S: integer(0, 7 * 24 * 3600).optional(),
  WS_PING_INTERVAL_S: integer(0, 3600).optional(),
  HANDSHAKE_TIMEOUT_S: integer(1, 3600).optional(),
  MAX_PENDING_FRAMES: integer(1, 1_000_000).optional(),
  LLM_IDLE_TIMEOUT_MS: integer(100, 3_600_000).optional(),
  LLM_TOTAL_TIMEOUT_MS: integer(0, 24 * 3_600_000).optional(),
  LLM_SLOW_NOTICE_MS: integer(0, 3_600_000).optional(),
  LLM_MAX_LINE_BYTES: integer(1024, 256 * 1024 * 1024).optional(),
  IMAGE_URL_HOSTS: z.string().optional(),
  MAX_FRAME_BYTES: integer(1024, 64 * 1024 * 1024).optional(),
  MAX_BUFFERED_BYTES: integer(1024, 1024 * 1024 * 1024).optional(),
  DELTA_BATCH_MS: integer(0, 1000).optional(),
  SHUTDOWN_GRACE_MS: integer(0, 600_000).optional(),
  HEALTH_CACHE_MS: integer(0, 3_600_000).optional(),
  TOOL_TIMEOUT_MS: integer(1, 60_000).optional(),
  MAX_TOOL_ROUNDS: integer(0, 100).optional(),
  CONTEXT_TOKENS: integer(256, 10_000_000).optional(),
  TOOL_VARIANT: z.enum(['first', 'random'], { error: 'expected first or random' }).optional(),
  REALTIME_COMPAT: z.enum(['troupe', 'openai'], { error: 'expected troupe or openai' }).optional(),
  TLS_CERT: text('a PEM certificate file').optional(),
  TLS_KEY: text('a PEM key file').optional(),
  UNMUTE_FRONTEND_DIR: text('a directory path').optional(),
  LOG_LEVEL: z.enum(LOG_LEVELS, { error: `expected one of ${LOG_LEVELS.join(', ')}` }).optional(),
  LOG_CONTENT: flag.optional(),
  STT_PROVIDER: z
    .enum(['pocketsphinx', 'openai', 'kyutai', 'none'], {
      error: 'expected pocketsphinx, openai, kyutai or none',
    })
    .optional(),
  STT_URL: speechUrl.optional(),
  STT_API_KEY: z.string().optional(),
  STT_MODEL: text('a model name').optional(),
  STT_LANGUAGE: text('a language code such as en').optional(),
  STT_WORKERS: integer(1, 64).optional(),
  STT_PARTIAL_MS: integer(0, 10_000).optional(),
  TTS_PROVIDER: z
    .enum(['flite', 'espeak', 'openai', 'kyutai', 'none'], {
      error: 'expected flite, espeak, openai, kyutai or none',
    })
    .optional(),
  TTS_URL: speechUrl.optional(),
  TTS_API_KEY: z.string().optional(),
  TTS_MODEL: text('a model name').optional(),
  TTS_VOICE: text('a voice name').optional(),
  TTS_WORKERS: integer(1, 64).optional(),
  TTS_SAMPLE_RATE: z
    .enum(['8000', '16000', '22050', '24000', '44100', '48000'], {
      error: 'expected 8000, 16000, 22050, 24000, 44100 or 48000',
    })
    .transform(Number)
    .optional(),
  TTS_VOICE_SET: z
    .enum(['openai', 'kokoro', 'piper'], { error: 'expected openai, kokoro or piper' })
    .optional(),
  TTS_RESPONSE_FORMAT: z.enum(['pcm', 'wav'], { error: 'expected pcm or wav' }).optional(),
  VAD_THRESHOLD: fraction.optional(),
  VAD_PREFIX_PADDING_MS: integer(0, 5_000).optional(),
  VAD_SILENCE_MS: integer(50, 10_000).optional(),
  BARGE_IN_MIN_MS: integer(0, 5_000).optional(),
  STT_PAUSE_THRESHOLD: fraction.optional(),
  AUDIO_LEAD_MS: integer(0, 10_000).optional(),
  MAX_UTTERANCE_MS: integer(1_000, 3_600_000).optional(),
  WORKERS: z
    .string()
    .trim()
    .regex(/^(auto|[1-9]\d{0,2})$/, { error: 'expected auto or a whole number from 1 to 999' })
    .optional(),
  REDIS_URL: z
    .string()
    .trim()
    .superRefine((v, ctx) => {
      const problem = redisUrlProblem(v);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional(),
  RESUME_TTL_S: integer(10, 7 * 24 * 3600).optional(),
  RESUME_MEMORY_MB: integer(1, 1024 * 1024).optional(),
  RESUME_REPLY_SAVE_MS: integer(0, 60_000).optional(),
  OVERLOAD_LAG_MS: integer(0, 60_000).optional(),
  OVERLOAD_BUSY: share('a share of the time between 0 and 1 such as 0.9 (0 turns it off)'),
  OVERLOAD_HEAP: share("a share of the heap's limit between 0 and 1 such as 0.85 (0 turns it off)"),
  OVERLOAD_MEMORY: share(
    "a share of the container's memory limit between 0 and 1 such as 0.85 (0 turns it off)",
  ),
  OVERLOAD_CPU: z
    .string()
    .trim()
    .regex(/^(0(\.\d+)?|[1-9]\d*(\.\d+)?)$/, {
      error: 'expected a fraction of one core such as 0.95',
    })
    .transform(Number)
    .optional(),
});

/** A value as a configuration error repeats it: a URL's password left out. */
function shown(value: string | undefined): string | undefined {
  return value?.replace(/^([a-z][\w+.-]*:\/\/[^:@/]*:)[^/]*@/i, '$1***@');
}

/** CLI flags that override the environment. */
const FLAGS = {
  'characters-dir': { type: 'string' },
  strict: { type: 'boolean' },
  watch: { type: 'boolean' },
  'no-watch': { type: 'boolean' },
  port: { type: 'string' },
  host: { type: 'string' },
  workers: { type: 'string' },
  'llm-base-url': { type: 'string' },
  'llm-model': { type: 'string' },
  'default-character': { type: 'string' },
  'log-level': { type: 'string' },
  stt: { type: 'string' },
  tts: { type: 'string' },
} as const;

/** Which environment variable each value flag stands for (its value is checked the same way). */
const FLAG_ENV = {
  port: 'PORT',
  host: 'HOST',
  workers: 'WORKERS',
  'llm-base-url': 'LLM_BASE_URL',
  'llm-model': 'LLM_MODEL',
  'default-character': 'DEFAULT_CHARACTER',
  'log-level': 'LOG_LEVEL',
  stt: 'STT_PROVIDER',
  tts: 'TTS_PROVIDER',
} as const;

/**
 * Reads the settings: flags override the environment, which overrides the
 * defaults in `defaults.ts`. Throws one {@link ConfigError} listing every bad value.
 *
 * @example
 * const config = loadConfig(process.env, process.argv.slice(2));
 */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  argv: readonly string[] = [],
): Config {
  let values: Partial<Record<keyof typeof FLAGS, string | boolean>>;
  try {
    values = parseArgs({
      args: [...argv],
      options: FLAGS,
      allowPositionals: true,
      strict: true,
    }).values;
  } catch (err) {
    throw new ConfigError(`invalid command line: ${(err as Error).message}`, { cause: err });
  }
  // Value flags go through the same schema as their variables; errors name the flag.
  // An empty variable (`FOO=` in a .env file) means unset.
  const merged: Record<string, string | undefined> = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''),
  );
  const origin = new Map<string, string>();
  for (const [name, variable] of Object.entries(FLAG_ENV)) {
    const v = values[name as keyof typeof FLAG_ENV];
    if (typeof v === 'string') {
      merged[variable] = v;
      origin.set(variable, `--${name}`);
    }
  }
  const parsed = envSchema.safeParse(merged);
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((i) => {
        const key = String(i.path[0]);
        return `  ${origin.get(key) ?? key}: ${i.message}, got ${JSON.stringify(shown(merged[key]))}`;
      });
  const e = parsed.data ?? {};
  if (!merged.TLS_CERT?.trim() !== !merged.TLS_KEY?.trim()) {
    problems.push('  TLS_CERT and TLS_KEY: set both (to serve https/wss) or neither');
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.join('\n')}`);

  const watchFlag = values['no-watch'] ? false : (values.watch as boolean | undefined);
  const apiKey = e.LLM_API_KEY || e.OPENAI_API_KEY || undefined;
  const origins = (e.ALLOWED_ORIGINS ?? '')
    .split(',')
    .map((o) => o.trim().replace(/\/$/, ''))
    .filter(Boolean);
  const hosts = list(e.ALLOWED_HOSTS);
  const imageHosts = list(e.IMAGE_URL_HOSTS);
  return {
    characters: {
      dir:
        (values['characters-dir'] as string | undefined) ??
        e.CHARACTERS_DIR ??
        D.DEFAULT_CHARACTERS_DIR,
      strict:
        (values.strict as boolean | undefined) ??
        e.CHARACTERS_STRICT ??
        D.DEFAULT_CHARACTERS_STRICT,
      watch: watchFlag ?? e.CHARACTERS_WATCH ?? e.NODE_ENV !== 'production',
      mcp: e.CHARACTERS_MCP ?? D.DEFAULT_CHARACTERS_MCP,
    },
    server: {
      port: e.PORT ?? D.DEFAULT_PORT,
      host: e.HOST ?? D.DEFAULT_HOST,
      ...(e.AUTH_TOKEN ? { authToken: e.AUTH_TOKEN } : {}),
      allowedOrigins: origins.includes('*') ? '*' : origins,
      allowedHosts: hosts.includes('*') ? '*' : hosts,
      maxSessions: e.MAX_SESSIONS ?? D.DEFAULT_MAX_SESSIONS,
      sessionIdleTimeoutS: e.SESSION_IDLE_TIMEOUT_S ?? D.DEFAULT_SESSION_IDLE_TIMEOUT_S,
      sessionMaxDurationS: e.SESSION_MAX_DURATION_S ?? D.DEFAULT_SESSION_MAX_DURATION_S,
      pingIntervalS: e.WS_PING_INTERVAL_S ?? D.DEFAULT_WS_PING_INTERVAL_S,
      handshakeTimeoutS: e.HANDSHAKE_TIMEOUT_S ?? D.DEFAULT_HANDSHAKE_TIMEOUT_S,
      maxPendingFrames: e.MAX_PENDING_FRAMES ?? D.DEFAULT_MAX_PENDING_FRAMES,
      maxFrameBytes: e.MAX_FRAME_BYTES ?? D.DEFAULT_MAX_FRAME_BYTES,
      maxBufferedBytes: e.MAX_BUFFERED_BYTES ?? D.DEFAULT_MAX_BUFFERED_BYTES,
      deltaBatchMs: e.DELTA_BATCH_MS ?? D.DEFAULT_DELTA_BATCH_MS,
      shutdownGraceMs: e.SHUTDOWN_GRACE_MS ?? D.DEFAULT_SHUTDOWN_GRACE_MS,
      healthCacheMs: e.HEALTH_CACHE_MS ?? D.DEFAULT_HEALTH_CACHE_MS,
      ...(e.TLS_CERT && e.TLS_KEY ? { tls: { certFile: e.TLS_CERT, keyFile: e.TLS_KEY } } : {}),
      ...(e.UNMUTE_FRONTEND_DIR ? { unmuteFrontendDir: e.UNMUTE_FRONTEND_DIR } : {}),
    },
    llm: {
      baseURL: e.LLM_BASE_URL ?? (apiKey ? D.OPENAI_BASE_URL : D.DEFAULT_LLM_BASE_URL),
      ...(apiKey ? { apiKey } : {}),
      ...(e.LLM_MODEL ? { model: e.LLM_MODEL } : {}),
      idleTimeoutMs: e.LLM_IDLE_TIMEOUT_MS ?? D.DEFAULT_LLM_IDLE_TIMEOUT_MS,
      totalTimeoutMs: e.LLM_TOTAL_TIMEOUT_MS ?? D.DEFAULT_LLM_TOTAL_TIMEOUT_MS,
      slowNoticeMs: e.LLM_SLOW_NOTICE_MS ?? D.DEFAULT_LLM_SLOW_NOTICE_MS,
      maxLineBytes: e.LLM_MAX_LINE_BYTES ?? D.DEFAULT_LLM_MAX_LINE_BYTES,
    },
    sessions: {
      ...(e.DEFAULT_CHARACTER ? { defaultCharacter: e.DEFAULT_CHARACTER } : {}),
      toolTimeoutMs: e.TOOL_TIMEOUT_MS ?? D.DEFAULT_TOOL_TIMEOUT_MS,
      maxToolRounds: e.MAX_TOOL_ROUNDS ?? D.DEFAULT_MAX_TOOL_ROUNDS,
      contextTokens: e.CONTEXT_TOKENS ?? D.DEFAULT_CONTEXT_TOKENS,
      variantAssignment: e.TOOL_VARIANT ?? 'first',
      compat: e.REALTIME_COMPAT ?? 'troupe',
      imageUrlHosts: imageHosts.includes('*') ? '*' : [...D.DEFAULT_IMAGE_URL_HOSTS, ...imageHosts],
    },
    voice: {
      stt: {
        provider: e.STT_PROVIDER ?? D.DEFAULT_STT_PROVIDER,
        ...speechEngine(e.STT_PROVIDER, e.STT_URL, e.STT_API_KEY, D.DEFAULT_KYUTAI_STT_URL),
        ...(e.STT_MODEL ? { model: e.STT_MODEL } : {}),
        ...(e.STT_LANGUAGE ? { language: e.STT_LANGUAGE } : {}),
        ...(e.STT_WORKERS ? { workers: e.STT_WORKERS } : {}),
        // pocketsphinx's partials are on by default; other engines only carry a value given.
        ...(e.STT_PARTIAL_MS !== undefined ||
        (e.STT_PROVIDER ?? D.DEFAULT_STT_PROVIDER) === 'pocketsphinx'
          ? { partialEveryMs: e.STT_PARTIAL_MS ?? D.DEFAULT_STT_PARTIAL_MS }
          : {}),
      },
      tts: {
        provider: e.TTS_PROVIDER ?? D.DEFAULT_TTS_PROVIDER,
        ...speechEngine(e.TTS_PROVIDER, e.TTS_URL, e.TTS_API_KEY, D.DEFAULT_KYUTAI_TTS_URL),
        ...(e.TTS_MODEL ? { model: e.TTS_MODEL } : {}),
        ...(e.TTS_VOICE ? { voice: e.TTS_VOICE } : {}),
        ...(e.TTS_WORKERS ? { workers: e.TTS_WORKERS } : {}),
        ...(e.TTS_SAMPLE_RATE ? { sampleRate: e.TTS_SAMPLE_RATE } : {}),
        ...(e.TTS_VOICE_SET ? { voiceSet: e.TTS_VOICE_SET } : {}),
        ...(e.TTS_RESPONSE_FORMAT ? { responseFormat: e.TTS_RESPONSE_FORMAT } : {}),
      },
      vad: {
        threshold: e.VAD_THRESHOLD ?? D.DEFAULT_VAD_THRESHOLD,
        prefixPaddingMs: e.VAD_PREFIX_PADDING_MS ?? D.DEFAULT_VAD_PREFIX_PADDING_MS,
        silenceDurationMs: e.VAD_SILENCE_MS ?? D.DEFAULT_VAD_SILENCE_MS,
      },
      bargeInMinMs: e.BARGE_IN_MIN_MS ?? D.DEFAULT_BARGE_IN_MIN_MS,
      pauseThreshold: e.STT_PAUSE_THRESHOLD ?? D.DEFAULT_STT_PAUSE_THRESHOLD,
      audioLeadMs: e.AUDIO_LEAD_MS ?? D.DEFAULT_AUDIO_LEAD_MS,
      maxUtteranceMs: e.MAX_UTTERANCE_MS ?? D.DEFAULT_MAX_UTTERANCE_MS,
    },
    log: {
      level: e.LOG_LEVEL ?? D.DEFAULT_LOG_LEVEL,
      content: e.LOG_CONTENT ?? D.DEFAULT_LOG_CONTENT,
    },
    scale: scaleConfig(e),
  };
}

/** Workers, the resume store and overload refusal, from the checked variables. */
function scaleConfig(e: Partial<z.infer<typeof envSchema>>): ScaleConfig {
  return {
    workers:
      e.WORKERS === undefined
        ? D.DEFAULT_WORKERS
        : e.WORKERS === 'auto'
          ? 'auto'
          : Number(e.WORKERS),
    ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
    resumeTtlS: e.RESUME_TTL_S ?? D.DEFAULT_RESUME_TTL_S,
    resumeMemoryMb: e.RESUME_MEMORY_MB ?? D.DEFAULT_RESUME_MEMORY_MB,
    resumeReplySaveMs: e.RESUME_REPLY_SAVE_MS ?? D.DEFAULT_RESUME_REPLY_SAVE_MS,
    overloadLagMs: e.OVERLOAD_LAG_MS ?? D.DEFAULT_OVERLOAD_LAG_MS,
    overloadBusy: e.OVERLOAD_BUSY ?? D.DEFAULT_OVERLOAD_BUSY,
    overloadHeap: e.OVERLOAD_HEAP ?? D.DEFAULT_OVERLOAD_HEAP,
    overloadMemory: e.OVERLOAD_MEMORY ?? D.DEFAULT_OVERLOAD_MEMORY,
    ...(e.OVERLOAD_CPU !== undefined && e.OVERLOAD_CPU > 0 ? { overloadCpu: e.OVERLOAD_CPU } : {}),
  };
}

/** A comma-separated list, trimmed and lower-cased, empty entries dropped. */
function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter(Boolean);
}

/**
 * A speech engine's address and key: `openai` defaults to OpenAI's API,
 * `kyutai` to moshi-server on loopback; the embedded engines need neither.
 */
function speechEngine(
  provider: string | undefined,
  url: string | undefined,
  key: string | undefined,
  kyutaiUrl: string,
): { baseURL?: string; apiKey?: string } {
  const baseURL =
    url ??
    (provider === 'openai' ? D.OPENAI_BASE_URL : provider === 'kyutai' ? kyutaiUrl : undefined);
  return { ...(baseURL ? { baseURL } : {}), ...(key ? { apiKey: key } : {}) };
}
