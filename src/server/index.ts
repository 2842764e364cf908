/**
 * The Troupe server: one HTTP(S) server for the routes and the realtime
 * WebSocket endpoint, with graceful shutdown.
 */
import type { Server } from 'node:http';
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
import { createHttpHandler, routeSettings, type Readiness } from './http-routes.js';
import { createServerLlm, type ServerLlm } from './llm.js';
import { listen, readTls, tallyClientErrors } from './listener.js';
import { createLogger } from './logger.js';
import { createOverloadMonitor } from './overload.js';
import { createResumer } from './resume.js';
import {
  createMemoryResumeStore,
  createRedisResumeStore,
  type ResumeStore,
} from './resume-store.js';
import { createServerVoice, type ServerVoice } from './voice.js';
import { CLOSE, createRealtime, type RealtimeEndpoint, type Refusing } from './realtime.js';

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
  /** Why it would refuse a new session now, if it would (`busy`: not a resume). */
  refusing?: Exclude<Refusing, 'shutting_down'>;
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
    ...routeSettings(config.server),
    healthExtras: () => healthExtras(scale, realtime, options.cluster),
    ready: () => readiness(realtime, options.cluster),
    ...(options.cluster ? { metricsText: options.cluster.metrics } : {}),
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
      tallyClientErrors(log, (reason) => metrics.server.rejected.inc({ reason })),
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
      const deadline = Date.now() + graceMs;
      const drained = await realtime.drain(deadline);
      if (!drained) {
        log.warn({ graceMs }, 'responses still running at the deadline; cancelled');
        await realtime.cancelAll();
      }
      const closed = new Promise<void>((r) => server.close(() => r()));
      realtime.closeAll(CLOSE.GOING_AWAY, 'server shutting down', deadline);
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
      // A worker whose primary is gone or stuck answers for itself, not with an error.
      let primary: string | undefined;
      const [state, workers] = await Promise.all([
        store.health().catch((err: Error) => ({ ok: false, detail: err.message })),
        cluster?.workers().catch((err: Error) => void (primary = err.message)),
      ]);
      return {
        degraded: !state.ok || primary !== undefined,
        fields: {
          ...(primary !== undefined ? { primary } : {}),
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

/** `/health`'s own fields: whether the server is degraded, and why. */
type HealthExtras = { degraded: boolean; fields: Record<string, unknown> };

/** `/health`'s own fields: the scale-out part's, and why one process would refuse a session. */
async function healthExtras(
  scale: { health(cluster: ClusterView | undefined): Promise<HealthExtras> },
  realtime: RealtimeEndpoint,
  cluster: ClusterView | undefined,
): Promise<HealthExtras> {
  const extras = await scale.health(cluster);
  // Workers each say so in `workers`.
  const refusing = cluster ? undefined : realtime.refusing();
  return refusing ? { ...extras, fields: { ...extras.fields, refusing } } : extras;
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
    return refusing && refusing !== 'busy' ? { ready: false, reason: refusing } : { ready: true };
  }
  let workers: WorkerState[];
  try {
    workers = await cluster.workers();
  } catch (err) {
    // The primary is gone or stuck: it hands out no connections, so the instance takes none.
    return { ready: false, reason: (err as Error).message };
  }
  // Busy (event loop, CPU) is not "not ready": resumes are let in, and a
  // probe that took a crash's survivors out would turn their clients away.
  const takes = (w: WorkerState): boolean => w.refusing === undefined || w.refusing === 'busy';
  if (workers.some((w) => w.status === 'ok' && takes(w))) return { ready: true };
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
