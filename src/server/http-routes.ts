/**
 * The HTTP side: `/health`, `/metrics`, `/v1/characters`, Unmute's
 * `/v1/health` and `/v1/voices`, and the web client's static files.
 * Everything else is a JSON 404 (or 405 for other methods). Pages of the
 * allowed origins may read every route (CORS), as Unmute's frontend, served
 * from its own origin, does.
 */
import { access, readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { CharacterRegistry } from '../characters/registry.js';
import {
  DEFAULT_HEALTH_CACHE_MS,
  DEFAULT_HEALTH_TIMEOUT_MS,
  type Config,
} from '../config/index.js';
import type { Metrics } from '../metrics/index.js';
import { unmuteVoiceList, type UnmuteVoice } from '../protocol/index.js';
import type { SttProvider, TtsProvider } from '../voice/types.js';
import type { ServerLlm } from './llm.js';
import { answerMint } from './client-secrets.js';
import { serveUnmuteFrontend } from './unmute-frontend.js';

/** The web client's folder (served at `/`). */
export const WEB_DIR = fileURLToPath(new URL('../web/', import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
};

/** A file name of the web folder: no slashes, no dot files. */
const STATIC_NAME = /^[a-zA-Z0-9_-][a-zA-Z0-9_.-]*$/;

/** How long browsers may reuse a CORS preflight answer. */
const PREFLIGHT_MAX_AGE_S = 600;

/** What the routes need from the server. */
export interface RouteContext {
  registry: CharacterRegistry;
  metrics: Metrics;
  llm: ServerLlm;
  sessions: () => { active: number; max: number };
  startedAt: number;
  shuttingDown: () => boolean;
  /**
   * The speech engines, probed for `/health` and `/v1/health`; a null one is
   * not configured (`null` in `/health`, down in `/v1/health`).
   * @defaultValue neither configured
   */
  speech?: { stt: SttProvider | null; tts: TtsProvider | null };
  /**
   * Browser origins whose pages may read the routes (CORS), as
   * `config.server.allowedOrigins`: `'*'` for any, else a list; same-origin
   * pages always may.
   * @defaultValue [] (same-origin pages only)
   */
  allowedOrigins?: '*' | string[];
  /**
   * A built Unmute frontend to serve at `/unmute` (`config.server.unmuteFrontendDir`).
   * @defaultValue none
   */
  unmuteFrontendDir?: string;
  /**
   * Host names same-origin pages may use (`config.server.allowedHosts` and
   * the listening host); see {@link hostAllowed}.
   * @defaultValue IP literals, localhost and this machine's name only
   */
  hosts?: HostPolicy;
  /**
   * How long a speech engine's health answer is reused (`config.server.healthCacheMs`).
   * @defaultValue DEFAULT_HEALTH_CACHE_MS (5000)
   */
  healthCacheMs?: number;
  /**
   * More of `/health`: the resume store and the workers. `degraded` makes
   * the status `degraded` (the server still takes sessions).
   */
  healthExtras?: () => Promise<{ degraded: boolean; fields: Record<string, unknown> }>;
  /** The `/metrics` text, when it is not this registry's alone (every worker's, aggregated). */
  metricsText?: (waitMs?: number) => Promise<string>;
  /**
   * `AUTH_TOKEN`: it mints client secrets (`POST /v1/realtime/client_secrets`),
   * and their signing key is made from it.
   * @defaultValue unset: no keys are checked, and none are minted
   */
  authToken?: string;
  /**
   * `/health/ready`: whether the instance takes a new session now, and if
   * not why (full, overloaded, shutting down).
   * @defaultValue always ready
   */
  ready?: () => Promise<Readiness>;
}

/** What the routes take from the server's settings: origins, hosts, the token, caches, Unmute's build. */
export function routeSettings(
  server: Config['server'],
): Pick<
  RouteContext,
  'allowedOrigins' | 'authToken' | 'hosts' | 'healthCacheMs' | 'unmuteFrontendDir'
> {
  return {
    allowedOrigins: server.allowedOrigins,
    ...(server.authToken === undefined ? {} : { authToken: server.authToken }),
    hosts: { allowed: server.allowedHosts, listening: server.host },
    healthCacheMs: server.healthCacheMs,
    ...(server.unmuteFrontendDir ? { unmuteFrontendDir: server.unmuteFrontendDir } : {}),
  };
}

/** `GET /health/ready`'s answer (200 when ready, else 503). */
export interface Readiness {
  ready: boolean;
  /** Why not, when not ready. */
  reason?: string;
}

/** What `/health` says about a configured speech engine. */
export interface SpeechHealth {
  ok: boolean;
  /** The engine's name (`pocketsphinx`, `kyutai`, `espeak`, …). */
  provider: string;
  detail?: string;
}

/** `GET /v1/health` in Unmute's shape: its frontend connects only when `ok`. */
export interface UnmuteHealth {
  tts_up: boolean;
  stt_up: boolean;
  llm_up: boolean;
  /** Troupe does not clone voices: Unmute's frontend hides its upload button. */
  voice_cloning_up: false;
  /** tts_up && stt_up && llm_up (and the server is not shutting down). */
  ok: boolean;
}

/** Host names browsers may reach the server by (the DNS-rebinding guard). */
export interface HostPolicy {
  /** `ALLOWED_HOSTS`: names beside the built-in ones, or `'*'` for any. */
  allowed: '*' | readonly string[];
  /** `HOST`, the address the server listens on (a name counts as allowed). */
  listening?: string;
}

/**
 * Whether a `Host` header names this server as a browser may legitimately
 * reach it: an IP literal (a rebinding attack needs a name), `localhost` or a
 * `*.localhost` name, this machine's name, the listening host, or a name in
 * `ALLOWED_HOSTS`. A page of `evil.example` whose name was rebound to
 * 127.0.0.1 sends `Host: evil.example:PORT` and is refused.
 *
 * @example hostAllowed('127.0.0.1:8080', { allowed: [] }) // true
 */
export function hostAllowed(host: string | undefined, policy: HostPolicy): boolean {
  if (policy.allowed === '*') return true;
  if (host === undefined) return false;
  const name = hostName(host);
  if (name === '') return false;
  if (isIP(name) !== 0) return true;
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (name === hostname().toLowerCase()) return true;
  if (policy.listening !== undefined && name === policy.listening.toLowerCase()) return true;
  return policy.allowed.includes(name);
}

/** The name of a Host header: no port, no brackets, lower case, no trailing dot. */
function hostName(host: string): string {
  let name = host.trim().toLowerCase();
  if (name.startsWith('['))
    name = name.slice(1, name.indexOf(']') === -1 ? undefined : name.indexOf(']'));
  else if (name.lastIndexOf(':') !== -1 && name.indexOf(':') === name.lastIndexOf(':')) {
    name = name.slice(0, name.lastIndexOf(':'));
  }
  return name.replace(/\.$/, '');
}

/**
 * Whether a page of `origin` may use the server: others when listed (or
 * `*`), same-origin pages when their `Host` is one the server answers to
 * (see {@link hostAllowed}; otherwise DNS rebinding makes any page "same
 * origin"). The realtime endpoint and CORS share it.
 *
 * @example
 * originAllowed('http://localhost:3000', 'localhost:8000', ['http://localhost:3000']); // true
 */
export function originAllowed(
  origin: string,
  host: string | undefined,
  allowed: '*' | string[],
  hosts: HostPolicy = { allowed: [] },
): boolean {
  if (allowed === '*') return true;
  const normalized = origin.replace(/\/$/, '');
  if (allowed.includes(normalized)) return true;
  try {
    return host !== undefined && new URL(normalized).host === host && hostAllowed(host, hosts);
  } catch {
    return false;
  }
}

/**
 * The URL of a request target, or undefined when it is not one: Node's
 * parser lets absolute-form targets such as `http://[` through, and URL()
 * throws on them (in a handler, an uncaught throw stops the process).
 */
export function requestUrl(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? '/', 'http://localhost');
  } catch {
    return undefined;
  }
}

/**
 * Unmute's production frontend calls its backend under `/api/` on its own
 * origin (`/api/v1/health`, `/api/v1/voices`, `/api/v1/realtime`): those
 * paths are answered as their `/v1/` twins, so no proxy has to strip the prefix.
 */
export const UNMUTE_API_PREFIX = '/api';

/** The route of a path: Unmute's `/api/v1/…` as `/v1/…`, any other path as it is. */
export function unmuteRoute(path: string): string {
  return path.startsWith(`${UNMUTE_API_PREFIX}/v1/`) ? path.slice(UNMUTE_API_PREFIX.length) : path;
}

/**
 * Creates the request handler.
 *
 * @example
 * http.createServer(createHttpHandler(ctx));
 */
export function createHttpHandler(ctx: RouteContext) {
  const speechHealth = createSpeechHealth(ctx);
  const allowedOrigins = ctx.allowedOrigins ?? [];
  const hosts = ctx.hosts ?? { allowed: [] };
  return async function handleHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const head = req.method === 'HEAD';
    const origin = req.headers.origin;
    const crossOrigin =
      origin !== undefined && originAllowed(origin, req.headers.host, allowedOrigins, hosts);
    // Answers differ by Origin: caches must keep them apart.
    const cors: Record<string, string> = crossOrigin
      ? { 'access-control-allow-origin': origin, vary: 'Origin' }
      : origin !== undefined
        ? { vary: 'Origin' }
        : {};
    const url = requestUrl(req.url);
    if (url === undefined) {
      return json(
        res,
        400,
        { error: { message: 'The request target is not a valid URL.' } },
        head,
        cors,
      );
    }
    const path = url.pathname;
    const openaiOnly = openaiHttpOnly(path);
    const minting = isMintPath(path);
    if (req.method === 'OPTIONS') {
      return preflight(req, res, origin, crossOrigin, openaiOnly !== undefined || minting);
    }
    if (minting && req.method === 'POST') {
      const answer = await answerMint(req, ctx.authToken);
      return json(res, answer.status, answer.body, false, { ...cors, 'cache-control': 'no-store' });
    }
    // OpenAI's HTTP side of the Realtime API (WebRTC calls, sessions): told, not a bare 405.
    if (openaiOnly !== undefined && req.method === 'POST') {
      return json(res, 501, { error: { message: openaiOnly } }, false, cors);
    }
    if (req.method !== 'GET' && !head) {
      return json(
        res,
        405,
        { error: { message: `${req.method} is not allowed; use GET.` } },
        head,
        { ...cors, allow: 'GET, HEAD' },
      );
    }
    try {
      switch (unmuteRoute(path)) {
        case '/health':
          return json(res, 200, await health(ctx, speechHealth), head, cors);
        case '/health/live':
          // Nothing awaited (no LLM probe, no other worker): a liveness probe's answer.
          return json(res, 200, { live: true }, head, { ...cors, 'cache-control': 'no-store' });
        case '/health/ready': {
          const ready = (await ctx.ready?.()) ?? { ready: true };
          return json(res, ready.ready ? 200 : 503, ready, head, {
            ...cors,
            'cache-control': 'no-store',
          });
        }
        case '/metrics': {
          const body = await (ctx.metricsText?.(scrapeWait(req)) ?? ctx.metrics.registry.metrics());
          res.writeHead(200, { ...cors, 'content-type': ctx.metrics.registry.contentType });
          return void res.end(head ? undefined : body);
        }
        case '/v1/characters':
          return json(res, 200, characters(ctx.registry), head, cors);
        case '/v1/health':
          return json(res, 200, await unmuteHealth(ctx, speechHealth), head, {
            ...cors,
            // Unmute's frontend polls it while waiting for the server to come up.
            'cache-control': 'no-store',
          });
        case '/v1/voices':
          return json(res, 200, voices(ctx.registry), head, cors);
        case '/':
          return await serveStatic(res, 'index.html', head, cors);
        default: {
          const name = path.slice(1);
          const ours = STATIC_NAME.test(name) && extension(name) in CONTENT_TYPES;
          const dir = ctx.unmuteFrontendDir;
          // The web client's own files first; then Unmute's page and assets, when served.
          if (ours && (!dir || (await webFileExists(name)))) {
            return await serveStatic(res, name, head, cors);
          }
          if (dir && (await serveUnmuteFrontend(res, dir, path, head, cors))) return;
          return notFound(res, path, head, cors);
        }
      }
    } catch (err) {
      if (!res.headersSent) {
        json(
          res,
          500,
          { error: { message: `GET ${path} failed: ${(err as Error).message}` } },
          head,
          cors,
        );
      } else res.destroy();
    }
  };
}

/** Where a client with OpenAI's defaults looks for the Realtime API over WebSocket. */
const WEBSOCKET_HINT =
  "connect a WebSocket to /v1/realtime instead (the Agents SDK in a browser: transport 'websocket' with a client secret from POST /v1/realtime/client_secrets as its key; see docs/protocol.md, 'Browsers')";

/**
 * Why a POST to one of OpenAI's HTTP paths of the Realtime API is not
 * served, or undefined for any other path: WebRTC calls (the Agents SDK's
 * default transport in browsers posts its SDP offer there) and the
 * ephemeral keys and sessions a backend mints for browsers.
 */
export function openaiHttpOnly(path: string): string | undefined {
  const route = path.replace(/^\/openai(?=\/v1\/)/, '');
  switch (route) {
    case '/v1/realtime':
    case '/v1/realtime/calls':
      return `Troupe speaks the Realtime API over WebSocket only; WebRTC calls (POST ${path}) are not served: ${WEBSOCKET_HINT}.`;
    case '/v1/realtime/sessions':
    case '/v1/realtime/transcription_sessions':
      return `Troupe makes no sessions over HTTP (POST ${path}): mint a client secret (POST /v1/realtime/client_secrets) for a browser, and ${WEBSOCKET_HINT}.`;
    default:
      return undefined;
  }
}

/** `POST /v1/realtime/client_secrets` (or under `/openai`): a key for a browser. */
function isMintPath(path: string): boolean {
  return path === '/v1/realtime/client_secrets' || path === '/openai/v1/realtime/client_secrets';
}

/**
 * `OPTIONS`: a CORS preflight (Origin and Access-Control-Request-Method)
 * is granted to allowed origins and refused with 403 to others; a plain
 * OPTIONS learns the methods.
 */
function preflight(
  req: IncomingMessage,
  res: ServerResponse,
  origin: string | undefined,
  allowed: boolean,
  posts: boolean,
): void {
  const method = req.headers['access-control-request-method'];
  if (origin === undefined || method === undefined) {
    res.writeHead(204, { allow: 'GET, HEAD, OPTIONS' });
    return void res.end();
  }
  if (!allowed) {
    return json(
      res,
      403,
      {
        error: {
          message: `Pages of origin ${origin.slice(0, 200)} may not read this server; add the origin to ALLOWED_ORIGINS (or serve the page from this server).`,
        },
      },
      false,
      { vary: 'Origin' },
    );
  }
  const headers: Record<string, string> = {
    'access-control-allow-origin': origin,
    // OpenAI's HTTP paths take a POST (a client secret), or answer it with why they do not.
    'access-control-allow-methods': posts ? 'GET, HEAD, POST' : 'GET, HEAD',
    'access-control-max-age': String(PREFLIGHT_MAX_AGE_S),
    vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
  };
  const wanted = req.headers['access-control-request-headers'];
  if (wanted) headers['access-control-allow-headers'] = wanted;
  // Chrome asks before a public page may reach a private address (Private Network Access).
  if (req.headers['access-control-request-private-network'] === 'true') {
    headers['access-control-allow-private-network'] = 'true';
  }
  res.writeHead(204, headers);
  res.end();
}

type SpeechKind = 'stt' | 'tts';

/** Probes the configured speech engines, each answer reused for `healthCacheMs`. */
function createSpeechHealth(ctx: RouteContext): (kind: SpeechKind) => Promise<SpeechHealth | null> {
  const cacheMs = ctx.healthCacheMs ?? DEFAULT_HEALTH_CACHE_MS;
  const cached = new Map<SpeechKind, { at: number; value: Promise<SpeechHealth> }>();
  return function speechHealth(kind) {
    const provider = ctx.speech?.[kind] ?? null;
    if (provider === null) return Promise.resolve(null);
    const now = performance.now();
    let entry = cached.get(kind);
    if (!entry || now - entry.at > cacheMs) {
      entry = { at: now, value: probeSpeech(provider) };
      cached.set(kind, entry);
    }
    return entry.value;
  };
}

/** One engine's `health()`, bounded in time; a throw or a hang is "not ok", never a 500. */
async function probeSpeech(provider: SttProvider | TtsProvider): Promise<SpeechHealth> {
  const signal = AbortSignal.timeout(DEFAULT_HEALTH_TIMEOUT_MS);
  // An engine that ignores the signal must not hold the route.
  const timedOut = new Promise<never>((_, reject) => {
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
  try {
    const answer = await Promise.race([provider.health(signal), timedOut]);
    return {
      ok: answer.ok === true,
      provider: provider.name,
      ...(answer.detail ? { detail: answer.detail } : {}),
    };
  } catch (err) {
    const e = err as { name?: string; message?: string };
    return {
      ok: false,
      provider: provider.name,
      detail:
        e.name === 'TimeoutError'
          ? `no answer within ${DEFAULT_HEALTH_TIMEOUT_MS} ms`
          : `health check failed: ${e.message ?? String(err)}`,
    };
  }
}

async function health(
  ctx: RouteContext,
  speechHealth: (kind: SpeechKind) => Promise<SpeechHealth | null>,
): Promise<object> {
  const [llm, stt, tts, extras] = await Promise.all([
    ctx.llm.health(),
    speechHealth('stt'),
    speechHealth('tts'),
    ctx.healthExtras?.(),
  ]);
  const errors = ctx.registry.errors().length;
  // A speech engine that is configured but down degrades the server; one not configured does not.
  const healthy = llm.ok && stt?.ok !== false && tts?.ok !== false && !extras?.degraded;
  return {
    status: ctx.shuttingDown() ? 'shutting_down' : healthy ? 'ok' : 'degraded',
    uptime_s: Math.round((performance.now() - ctx.startedAt) / 1000),
    sessions: ctx.sessions(),
    characters: { loaded: ctx.registry.list().length, errors },
    llm,
    stt,
    tts,
    ...extras?.fields,
  };
}

async function unmuteHealth(
  ctx: RouteContext,
  speechHealth: (kind: SpeechKind) => Promise<SpeechHealth | null>,
): Promise<UnmuteHealth> {
  const [llm, stt, tts] = await Promise.all([
    ctx.llm.health(),
    speechHealth('stt'),
    speechHealth('tts'),
  ]);
  const up = { tts_up: tts?.ok === true, stt_up: stt?.ok === true, llm_up: llm.ok };
  return {
    ...up,
    voice_cloning_up: false,
    // A server that is shutting down takes no sessions: the frontend should not connect.
    ok: up.tts_up && up.stt_up && up.llm_up && !ctx.shuttingDown(),
  };
}

/** The characters as Unmute's voice list: what its configurator offers. */
function voices(registry: CharacterRegistry): UnmuteVoice[] {
  return unmuteVoiceList(
    registry.list().map((c) => {
      const instructions = registry.get(c.id)?.instructions;
      const language =
        instructions !== null && typeof instructions === 'object'
          ? (instructions as { language?: unknown }).language
          : undefined;
      return {
        id: c.id,
        name: c.name,
        description: c.description,
        voice: c.voice,
        language: typeof language === 'string' ? language : undefined,
      };
    }),
  );
}

function characters(registry: CharacterRegistry): object {
  return {
    characters: registry.list().map((c) => ({
      id: c.id,
      name: c.name,
      description: c.description ?? '',
      voice: c.voice,
      tools: c.tools,
      variants: c.variants,
      greeting: c.greeting ?? null,
      version: c.version,
    })),
    errors: registry.errors().length,
  };
}

async function webFileExists(name: string): Promise<boolean> {
  try {
    await access(`${WEB_DIR}${name}`);
    return true;
  } catch {
    return false;
  }
}

async function serveStatic(
  res: ServerResponse,
  name: string,
  head: boolean,
  cors: Record<string, string>,
): Promise<void> {
  let body: Buffer;
  try {
    body = await readFile(`${WEB_DIR}${name}`);
  } catch {
    return notFound(res, `/${name}`, head, cors);
  }
  res.writeHead(200, {
    ...cors,
    'content-type': CONTENT_TYPES[extension(name)]!,
    'content-length': body.length,
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
  });
  res.end(head ? undefined : body);
}

function extension(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot === -1 ? '' : name.slice(dot);
}

function notFound(
  res: ServerResponse,
  path: string,
  head: boolean,
  cors: Record<string, string>,
): void {
  json(
    res,
    404,
    {
      error: {
        message: `No route ${path}. Routes: GET /, /health, /health/live, /health/ready, /metrics, /v1/characters, /v1/health, /v1/voices; POST /v1/realtime/client_secrets; WebSocket /v1/realtime, /openai/v1/realtime.`,
      },
    },
    head,
    cors,
  );
}

function json(
  res: ServerResponse,
  status: number,
  body: object,
  head: boolean,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(head ? undefined : text);
}

/**
 * How long `/metrics` may wait for each worker: half the scraper's own
 * timeout, which Prometheus sends in `X-Prometheus-Scrape-Timeout-Seconds`,
 * so a stuck worker does not make the scrape itself time out.
 */
function scrapeWait(req: IncomingMessage): number | undefined {
  const timeoutS = Number(req.headers['x-prometheus-scrape-timeout-seconds']);
  return Number.isFinite(timeoutS) && timeoutS > 0 ? (timeoutS * 1000) / 2 : undefined;
}
