/**
 * The Troupe server: one HTTP(S) server for the routes and the realtime
 * WebSocket endpoint, with graceful shutdown.
 */
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { loadCharacters, type CharacterRegistry } from '../characters/registry.js';
import {
  DEFAULT_OVERLOAD_RETRY_MS,
  DEFAULT_RESUME_LOAD_TIMEOUT_MS,
  DEFAULT_RESUME_SAVE_DELAY_MS,
  type Config,
} from '../config/index.js';
import { ConfigError, redactUrl } from '../errors.js';
import type { LlmClient } from '../llm/client.js';
import { createMetrics, type Metrics } from '../metrics/index.js';
import { createHttpHandler, type Readiness } from './http-routes.js';
import { createServerLlm, type ServerLlm } from './llm.js';
import { createLogger } from './logger.js';
import { createOverloadMonitor } from './overload.js';
import { createResumer } from './resume.js';
import {
  createMemoryResumeStore,
  createRedisResumeStore,
  type ResumeStore,
} from './resume-store.js';
import { createServerVoice, type ServerVoice } from './voice.js';
import { CLOSE, createRealtime, type RealtimeEndpoint } from './realtime.js';

export { CLOSE } from './realtime.js';
export { createLogger } from './logger.js';
export type { LlmHealth } from './llm.js';

/** Options of {@link startServer}. */
export interface ServerOptions {
  config: Config;
  /** Characters already loaded; otherwise loaded from `config.characters` (and closed with the server). */
  registry?: CharacterRegistry;
  /** A ready LLM client; otherwise one is made from `config.llm` on first use. */
  llm?: LlmClient;
  /** @defaultValue a new registry with process metrics */
  metrics?: Metrics;
  /** @defaultValue pino on stdout per `config.log` */
  logger?: Logger;
  /** Speech engines (tests hand in fakes); otherwise made from `config.voice` (and closed with the server). */
  voice?: ServerVoice;
  /**
   * Where resumable conversations are kept; otherwise Redis when
   * `config.scale.redisUrl` is set, else this process's memory (closed with the server).
   */
  resumeStore?: ResumeStore;
  /** In a worker of `npm start`: `/health` and `/metrics` cover every worker. */
  cluster?: ClusterView;
}

/** Every worker of this instance, as a worker's routes see them. */
export interface ClusterView {
  /** One entry per worker (pid, sessions, status). */
  workers(): Promise<WorkerState[]>;
  /**
   * Every worker's metrics, aggregated (Prometheus text), waiting at most
   * `waitMs` for each worker (a scraper's own timeout allows).
   */
  metrics(waitMs?: number): Promise<string>;
  /** The port the primary listens on: it hands this worker its connections. */
  readonly port: number;
  /** When the instance (the primary) started, epoch ms: `/health`'s `uptime_s` is the instance's. */
  readonly startedAt: number;
  /** Takes the connections the primary hands this worker. */
  onConnection(take: (socket: Socket) => void): void;
  /** A session opened or ended: the primary hears of this worker's room at once. */
  roomChanged(): void;
}

/** One worker as `/health` lists it. */
export interface WorkerState {
  id: number;
  pid: number | undefined;
  uptime_s: number;
  status: 'ok' | 'shutting_down' | 'starting' | 'unresponsive';
  /** Open sessions, when it has reported. */
  sessions?: number;
  /** Why it would refuse a new session now, if it would. */
  refusing?: 'full' | 'overloaded';
}

/** A running server. */
export interface TroupeServer {
  /** `http(s)://host:port` */
  readonly url: string;
  /** `ws(s)://host:port/v1/realtime` */
  readonly wsUrl: string;
  readonly port: number;
  readonly registry: CharacterRegistry;
  readonly metrics: Metrics;
  readonly llm: ServerLlm;
  readonly voice: ServerVoice;
  /** Open sessions. */
  readonly sessions: number;
  /** Why a new session would be refused now (full, overloaded, shutting down), if it would. */
  readonly refusing: ReturnType<RealtimeEndpoint['refusing']>;
  /** Where resumable conversations are kept. */
  readonly resumeStore: ResumeStore;
  /**
   * Stops taking sessions (new connections are closed with 1001 and `/health`
   * says `shutting_down`, so a load balancer can move clients elsewhere), lets
   * running responses finish until `graceMs` (config: `SHUTDOWN_GRACE_MS`),
   * cancels those still running (their clients get `response.done` with
   * status `cancelled`), then closes every socket with 1001 and stops
   * listening. Resolves true when every response finished in time.
   */
  shutdown(graceMs?: number): Promise<boolean>;
  /** Shuts down with no grace. */
  close(): Promise<void>;
}

/**
 * Starts the server.
 *
 * @example
 * const server = await startServer({ config: loadConfig(process.env) });
 * console.log(`web client: ${server.url}/`);
 */
export async function startServer(options: ServerOptions): Promise<TroupeServer> {
  const { config } = options;
  const log = options.logger ?? createLogger(config.log);
  const metrics = options.metrics ?? createMetrics();
  const ownRegistry = options.registry === undefined;
  const registry =
    options.registry ??
    (await loadCharacters({
      dir: config.characters.dir,
      strict: config.characters.strict,
      watch: config.characters.watch,
      mcp: config.characters.mcp,
      log: log.child({ part: 'characters' }),
      metrics: metrics.characters,
    }));
  const wanted = config.sessions.defaultCharacter;
  if (wanted !== undefined && registry.get(wanted) === undefined) {
    if (ownRegistry) await registry.close();
    throw new ConfigError(
      `DEFAULT_CHARACTER=${wanted}: no such character in ${registry.dir}; available: ${
        registry
          .list()
          .map((c) => c.id)
          .join(', ') || 'none'
      }.`,
    );
  }
  const llm = createServerLlm({
    config: config.llm,
    ...(options.llm ? { client: options.llm } : {}),
    log: log.child({ part: 'llm' }),
    cacheMs: config.server.healthCacheMs,
  });
  const ownVoice = options.voice === undefined;
  let voice: ServerVoice;
  try {
    voice = options.voice ?? (await createServerVoice(config.voice, log, metrics.registry));
  } catch (err) {
    if (ownRegistry) await registry.close();
    throw err;
  }
  const scale = createScaleParts(config, metrics, log, options.resumeStore);
  const realtime = createRealtime({
    config,
    registry,
    llm,
    metrics,
    log,
    ...(voice.session ? { voice: voice.session } : {}),
    overload: scale.overload,
    resume: scale.resume,
    ...(options.cluster ? { onSessionsChanged: options.cluster.roomChanged } : {}),
  });
  let shuttingDown = false;
  const handler = createHttpHandler({
    registry,
    metrics,
    llm,
    sessions: () => ({ active: realtime.active, max: config.server.maxSessions }),
    startedAt: performance.now(),
    shuttingDown: () => shuttingDown,
    speech: { stt: voice.stt, tts: voice.tts },
    allowedOrigins: config.server.allowedOrigins,
    hosts: { allowed: config.server.allowedHosts, listening: config.server.host },
    healthCacheMs: config.server.healthCacheMs,
    healthExtras: () => scale.health(options.cluster),
    ready: () => readiness(realtime, options.cluster),
    ...(options.cluster ? { metricsText: options.cluster.metrics } : {}),
    ...(config.server.unmuteFrontendDir
      ? { unmuteFrontendDir: config.server.unmuteFrontendDir }
      : {}),
  });
  const tls = config.server.tls;
  let server: Server;
  try {
    server = await listen(
      config,
      tls ? await readTls(tls) : undefined,
      handler,
      realtime.upgrade,
      options.cluster,
    );
  } catch (err) {
    // The registry's watcher (and engine workers) would keep the process alive behind the error.
    if (ownRegistry) await registry.close();
    if (ownVoice) await voice.close();
    await scale.close();
    throw err;
  }
  const port = options.cluster?.port ?? (server.address() as AddressInfo).port;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  const url = `${tls ? 'https' : 'http'}://${host}:${port}`;
  const wsUrl = `${tls ? 'wss' : 'ws'}://${host}:${port}/v1/realtime`;
  log.info(
    { url, characters: registry.list().length, llm: redactUrl(config.llm.baseURL) },
    // A worker does not listen: the primary listens on the URL and hands it connections.
    options.cluster ? 'worker taking connections' : 'server listening',
  );

  let stopped: Promise<boolean> | undefined;
  async function shutdown(graceMs = config.server.shutdownGraceMs): Promise<boolean> {
    stopped ??= (async () => {
      shuttingDown = true;
      realtime.stopAccepting();
      log.info({ sessions: realtime.active, graceMs }, 'shutting down');
      // Still listening while draining: a client that connects now gets 1001
      // (not a refused TCP connection) and /health reports shutting_down.
      const drained = await realtime.drain(Date.now() + graceMs);
      if (!drained) {
        log.warn({ graceMs }, 'responses still running at the deadline; cancelled');
        await realtime.cancelAll();
      }
      const closed = new Promise<void>((r) => server.close(() => r()));
      realtime.closeAll(CLOSE.GOING_AWAY, 'server shutting down');
      server.closeAllConnections();
      await closed;
      // The last state of every session, so their clients can resume elsewhere.
      await realtime.resumeFlushed();
      await scale.close();
      if (ownRegistry) await registry.close();
      if (ownVoice) await voice.close();
      log.info({}, 'server stopped');
      return drained;
    })();
    return stopped;
  }

  return {
    url,
    wsUrl,
    port,
    registry,
    metrics,
    llm,
    voice,
    get sessions() {
      return realtime.active;
    },
    get refusing() {
      return realtime.refusing();
    },
    resumeStore: scale.resume.store,
    shutdown,
    async close() {
      await shutdown(0);
    },
  };
}

/** Resume (store and tokens) and overload refusal, as the settings ask. */
function createScaleParts(
  config: Config,
  metrics: Metrics,
  log: Logger,
  given: ResumeStore | undefined,
) {
  const store = given ?? createStore(config, metrics, log);
  const resume = createResumer({
    store,
    ttlS: config.scale.resumeTtlS,
    saveDelayMs: DEFAULT_RESUME_SAVE_DELAY_MS,
    loadTimeoutMs: DEFAULT_RESUME_LOAD_TIMEOUT_MS,
    log: log.child({ part: 'resume' }),
    metrics: metrics.scale,
  });
  const overload = createOverloadMonitor({
    lagMs: config.scale.overloadLagMs,
    busy: config.scale.overloadBusy,
    heap: config.scale.overloadHeap,
    container: config.scale.overloadMemory,
    ...(config.scale.overloadCpu !== undefined ? { cpu: config.scale.overloadCpu } : {}),
    retryMs: DEFAULT_OVERLOAD_RETRY_MS,
    lagGauge: metrics.scale.eventLoopLag,
  });
  return {
    resume,
    overload,
    /** `/health`'s `resume` (and `workers`): a store that is down degrades the server. */
    async health(cluster: ClusterView | undefined) {
      const [state, workers] = await Promise.all([store.health(), cluster?.workers()]);
      return {
        degraded: !state.ok,
        fields: {
          resume: { store: store.kind, ...state },
          ...(workers && cluster
            ? {
                uptime_s: Math.round((Date.now() - cluster.startedAt) / 1000),
                workers,
                sessions: instanceSessions(workers, config),
              }
            : {}),
        },
      };
    },
    async close() {
      overload.stop();
      if (given === undefined) await store.close();
    },
  };
}

/** `/health`'s `sessions` with workers: every worker's, and the instance's cap. */
function instanceSessions(workers: WorkerState[], config: Config): { active: number; max: number } {
  const active = workers.reduce((n, w) => n + (w.sessions ?? 0), 0);
  return { active, max: workers.length * config.server.maxSessions };
}

/**
 * Whether the instance takes a new session now: this process, or with
 * workers any one of them (the primary hands a connection to one with room).
 */
async function readiness(
  realtime: RealtimeEndpoint,
  cluster: ClusterView | undefined,
): Promise<Readiness> {
  if (!cluster) {
    const refusing = realtime.refusing();
    return refusing ? { ready: false, reason: refusing } : { ready: true };
  }
  const workers = await cluster.workers();
  if (workers.some((w) => w.status === 'ok' && w.refusing === undefined)) return { ready: true };
  const reasons = new Set(workers.map((w) => w.refusing ?? w.status));
  return { ready: false, reason: [...reasons].join(', ') || 'no workers' };
}

/** The resume store the settings ask for: Redis with `REDIS_URL`, else memory. */
function createStore(config: Config, metrics: Metrics, log: Logger): ResumeStore {
  const url = config.scale.redisUrl;
  if (url === undefined) {
    return createMemoryResumeStore({
      maxChars: config.scale.resumeMemoryMb * 1024 * 1024,
      onEvicted: () => metrics.scale.storeEvictions.inc(),
      onError: (op) => metrics.scale.storeErrors.inc({ op }),
    });
  }
  return createRedisResumeStore({
    url,
    log: log.child({ part: 'resume' }),
    onError: (op) => metrics.scale.storeErrors.inc({ op }),
  });
}

/**
 * Node's request timeouts for `HANDSHAKE_TIMEOUT_S`: a connection that has
 * not sent a whole request by then (nothing at all, or half its headers) gets
 * 408 and is closed. Node checks its connections every
 * `connectionsCheckingInterval` (30 s by default, which would let one live
 * 90 s past its 60 s default); a second here. An upgraded WebSocket leaves
 * these checks once its handshake is done.
 */
function handshakeTimeouts(seconds: number): {
  headersTimeout: number;
  requestTimeout: number;
  connectionsCheckingInterval: number;
} {
  const ms = seconds * 1000;
  return {
    headersTimeout: ms,
    requestTimeout: ms,
    connectionsCheckingInterval: Math.min(1000, ms / 2),
  };
}

/**
 * Creates the HTTP(S) server and listens on the configured address, or, in
 * a worker, takes the connections its primary hands it.
 */
async function listen(
  config: Config,
  tls: { cert: string; key: string } | undefined,
  handler: ReturnType<typeof createHttpHandler>,
  upgrade: RealtimeEndpoint['upgrade'],
  cluster: ClusterView | undefined,
): Promise<Server> {
  let server: Server;
  const timeouts = handshakeTimeouts(config.server.handshakeTimeoutS);
  if (tls) {
    try {
      // TLS's own handshake first (Node's default: 120 s), then the request's.
      server = createHttpsServer(
        { ...tls, ...timeouts, handshakeTimeout: timeouts.headersTimeout },
        handler,
      );
    } catch (err) {
      throw new ConfigError(
        `TLS_CERT=${config.server.tls?.certFile} and TLS_KEY=${config.server.tls?.keyFile}: not a usable PEM certificate and key (${(err as Error).message}).`,
        { cause: err },
      );
    }
  } else {
    server = createHttpServer(timeouts, handler);
  }
  server.on('upgrade', upgrade);
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Answer as Node does without this listener (400, 408, 431…), then hang up.
    if (socket.writable && (socket as { bytesWritten?: number }).bytesWritten === 0) {
      socket.write(`HTTP/1.1 ${clientErrorStatus(err.code)}\r\nConnection: close\r\n\r\n`);
    }
    socket.destroy();
  });
  if (cluster) {
    // Node starts tracking connections (the request and header timeouts,
    // closeAllConnections) when a server starts listening; this one never
    // does itself, the primary listens for it.
    server.emit('listening');
    cluster.onConnection((socket) => {
      server.emit('connection', socket);
      socket.resume();
    });
    return server;
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(listenFailure(config.server.host, config.server.port, err)),
    );
    server.listen(config.server.port, config.server.host, resolve);
  });
  return server;
}

/**
 * Why the server cannot listen, as a {@link ConfigError} that says what to do.
 *
 * @example throw listenFailure('0.0.0.0', 8080, err);
 */
export function listenFailure(host: string, port: number, err: NodeJS.ErrnoException): ConfigError {
  return new ConfigError(
    err.code === 'EADDRINUSE'
      ? `port ${port} on ${host} is in use; set PORT to a free one.`
      : `cannot listen on ${host}:${port}: ${err.message}`,
    { cause: err },
  );
}

function clientErrorStatus(code: string | undefined): string {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return '431 Request Header Fields Too Large';
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return '408 Request Timeout';
    default:
      return '400 Bad Request';
  }
}

async function readTls(tls: { certFile: string; keyFile: string }) {
  const [cert, key] = await Promise.all([
    readPem(tls.certFile, 'TLS_CERT'),
    readPem(tls.keyFile, 'TLS_KEY'),
  ]);
  return { cert, key };
}

async function readPem(file: string, variable: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${variable}=${file}: cannot read it (${(err as Error).message}).`, {
      cause: err,
    });
  }
}
