/**
 * Every core of one machine: `npm start` with `WORKERS` above 1 runs a
 * primary process that forks the workers through `node:cluster`, listens
 * on the port itself and hands each connection, WebSocket and all, to the
 * worker with the most room (see worker-router.ts). Each worker is a whole
 * server: its own characters (and hot reload), LLM client and sessions.
 *
 * The primary replaces a worker that dies, forwards a stop signal as a
 * drain to every worker and exits when they have, answers the workers'
 * questions for `/health` (every worker's state) and `/metrics` (every
 * worker's metrics, aggregated: see cluster-metrics.ts), and
 * keeps the in-memory resume store when no Redis is set, so a conversation
 * resumes on any worker (see cluster-store.ts).
 */
import cluster, { type Worker } from 'node:cluster';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { usableCores, WORKER_COUNT_VARIABLE } from '../config/cores.js';
import type { ScaleMetrics } from '../metrics/index.js';
import {
  answerMetrics,
  primaryMetrics,
  type MetricsToPrimary,
  type MetricsToWorker,
} from './cluster-metrics.js';
import {
  primaryStore,
  workerStore,
  type StoreToPrimary,
  type StoreToWorker,
} from './cluster-store.js';
import type { ResumeStore } from './resume-store.js';
import type { ClusterView, WorkerState } from './index.js';
import { listenFailure } from './listener.js';
import { logsWritten } from './logger.js';
import { onStopSignals, signalRepeats } from './signals.js';
import { tellWorker } from './tell-worker.js';
import {
  openWorkerRouter,
  UNRESPONSIVE_MS,
  type WorkerRoom,
  type WorkerRouter,
} from './worker-router.js';

/** A worker waits twice this long for its primary to answer (workers, metrics, the store). */
const ASK_TIMEOUT_MS = 2_000;
/** Workers that die this many times within {@link CRASH_WINDOW_MS} stop the instance. */
const CRASH_LIMIT = 5;
const CRASH_WINDOW_MS = 60_000;
/** How often a worker looks whether its room changed, to tell the primary. */
const ROOM_REPORT_MS = 100;
/** A worker reports at least this often, changed or not: the primary's sign that it is alive. */
const HEARTBEAT_MS = 1_000;
/**
 * A ready worker not heard from for this long is killed and replaced (its
 * clients get a close and resume elsewhere): its event loop has been stuck
 * far longer than any pause, and it holds its sessions hostage.
 */
const HANG_KILL_MS = 30_000;
/** How the primary tells its workers the port it listens on for them. */
const PORT_VARIABLE = 'TROUPE_PRIMARY_PORT';
/** Where a worker learns when its instance (the primary) started: epoch ms. */
const STARTED_VARIABLE = 'TROUPE_INSTANCE_STARTED_MS';

/** Messages between the primary and its workers (all carry `troupe`). */
type ToPrimary =
  | { troupe: 'ready'; url: string }
  | { troupe: 'ask'; id: number; what: 'workers' | 'metrics'; waitMs?: number }
  | StoreToPrimary
  | MetricsToPrimary
  | { troupe: 'room'; room: WorkerRoom };
type ToWorker =
  | { troupe: 'answer'; id: number; value?: unknown; error?: string }
  | { troupe: 'connection' }
  | { troupe: 'shutdown' }
  | StoreToWorker
  | MetricsToWorker;

/** The number of workers a setting asks for: `auto` = the cores this process may use (a container's CPU limit included). */
export function resolveWorkers(setting: number | 'auto'): number {
  return setting === 'auto' ? usableCores() : setting;
}

/** Answers a worker's request with what `work` gives, or why it failed. */
async function answer(worker: Worker, id: number, work: () => Promise<unknown>): Promise<void> {
  let reply: ToWorker;
  try {
    reply = { troupe: 'answer', id, value: await work() };
  } catch (err) {
    reply = { troupe: 'answer', id, error: (err as Error).message };
  }
  tellWorker(worker, reply);
}

/** Options of {@link runPrimary}. */
export interface PrimaryOptions {
  workers: number;
  /** Where the instance listens (`HOST`, `PORT`; 0 = any free port). */
  host: string;
  port: number;
  /** Whether workers keep resume state in Redis (else the primary keeps it). */
  redis: boolean;
  /** Room for the primary's resume records (`RESUME_MEMORY_MB`), in MiB. @defaultValue 256 */
  resumeMemoryMb?: number;
  /** How long workers get to drain (`SHUTDOWN_GRACE_MS`); they are killed this much later plus 5 s. */
  graceMs: number;
  log: Logger;
}

/**
 * Runs the primary: listens, forks the workers and looks after them until a
 * signal (then exits 0 once every worker has drained) or a crash loop
 * (exits 1). Rejects with a ConfigError when it cannot listen.
 *
 * @example if (cluster.isPrimary && workers > 1) await runPrimary({ workers, host, port, redis: false, graceMs: 10000, log });
 */
export async function runPrimary(options: PrimaryOptions): Promise<void> {
  const { log } = options;
  let router: WorkerRouter;
  try {
    router = await openWorkerRouter({ host: options.host, port: options.port, log });
  } catch (err) {
    throw listenFailure(options.host, options.port, err as NodeJS.ErrnoException);
  }
  /**
   * Workers forked and not exited, with when each was forked (the
   * `performance.now()` clock). Not `cluster.workers`: that keeps a worker
   * that exited until its IPC channel has closed too, which can come after
   * its 'exit' — the last worker's 'exit' then found one still there, and the
   * stop waited for the grace period and exited 1.
   */
  const live = new Map<Worker, number>();
  const ready = new Set<number>();
  const stop = primaryStop({ live, ready, graceMs: options.graceMs, log });
  const metrics = primaryMetrics({
    workers: () => [...live.keys()].filter((w) => ready.has(w.id)),
    log,
  });
  const store = options.redis
    ? undefined
    : primaryStore({ ...options, evictions: metrics.storeEvictions });
  const crashes: number[] = [];
  let everReady = false;
  /** Workers draining on a signal of their own (not the primary's stop), already replaced. */
  const leaving = new Set<number>();

  const instanceStarted = Date.now();
  const fork = (): Worker => {
    const worker = cluster.fork({
      [PORT_VARIABLE]: String(router.port),
      [STARTED_VARIABLE]: String(instanceStarted),
      // Its speech engines' threads are sized by its share of the cores.
      [WORKER_COUNT_VARIABLE]: String(options.workers),
    });
    live.set(worker, performance.now());
    worker.on('message', (m: ToPrimary) => void handle(worker, m));
    return worker;
  };

  killStuckWorkers(router, log, () => stop.stopping);

  async function handle(worker: Worker, m: ToPrimary): Promise<void> {
    if (metrics.take(worker, m)) return;
    if (m?.troupe === 'room') {
      router.report(worker, m.room);
      if (m.room.refusing === 'shutting_down' && !stop.stopping && !leaving.has(worker.id)) {
        // Stopped on its own (an operator's SIGTERM): it drains, and its place is filled now.
        leaving.add(worker.id);
        log.info({ worker: worker.id }, 'worker draining on its own; starting another');
        fork();
      }
    } else if (m?.troupe === 'handedOver') {
      store?.handedOver(m.id, m.record);
    } else if (m?.troupe === 'ready') {
      ready.add(worker.id);
      router.add(worker);
      everReady = true;
      log.info({ worker: worker.id, pid: worker.process.pid }, 'worker ready');
      if (ready.size === options.workers)
        log.info({ workers: ready.size, url: m.url }, 'workers ready');
    } else if (m?.troupe === 'ask') {
      await answer(worker, m.id, async () =>
        m.what === 'metrics' ? metrics.text(m.waitMs) : workerStates(router, live),
      );
    } else if (m?.troupe === 'store') {
      await answer(worker, m.id, async () => store?.request(worker, m));
    }
  }

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    router.remove(worker);
    store?.forget(worker);
    metrics.retire(worker);
    ready.delete(worker.id);
    const replaced = leaving.delete(worker.id);
    if (stop.stopping) {
      stop.exited(worker, code, signal);
      return;
    }
    if (code === 0) {
      // A drain on its own signal (an operator's SIGTERM): a clean end, not a crash.
      log.info(
        { worker: worker.id, code },
        replaced ? 'worker stopped' : 'worker stopped; starting another',
      );
      if (!replaced) fork();
      return;
    }
    if (!everReady && signal === null) {
      // Nothing ever started and the worker exited on its own (a bad
      // characters folder): it said why. One killed (OOM killer, kill -9) is
      // replaced as any dead worker is.
      log.fatal({ worker: worker.id, code }, 'worker failed to start; stopping');
      stop.all('startup failed', 1);
      return;
    }
    const now = Date.now();
    crashes.push(now);
    while (crashes.length > 0 && crashes[0]! < now - CRASH_WINDOW_MS) crashes.shift();
    if (crashes.length >= CRASH_LIMIT) {
      log.fatal(
        { crashes: crashes.length, windowMs: CRASH_WINDOW_MS },
        'workers keep dying; stopping',
      );
      stop.all('crash loop', 1);
      return;
    }
    log.error({ worker: worker.id, code, signal }, 'worker died; starting another');
    // One that died while it drained was replaced when it began to.
    if (!replaced) fork();
  });

  onStopSignals(stop.signal, log);
  log.info(
    { workers: options.workers, resume: store ? 'primary memory' : 'redis' },
    'starting workers',
  );
  for (let i = 0; i < options.workers; i++) fork();
}

/**
 * The primary's stop: asks every worker to drain (one still starting gets
 * SIGTERM), and exits once all have ended: 0 when each ended cleanly, else 1
 * (or the code the stop was asked with). Workers still running 5 s past the
 * grace period are killed; a second signal kills them at once.
 */
function primaryStop(o: {
  live: Map<Worker, number>;
  ready: Set<number>;
  graceMs: number;
  log: Logger;
}): {
  readonly stopping: boolean;
  /** Starts the stop (once), for `reason`; the exit code is at least `code`. */
  all(reason: string, code?: number): void;
  /** A worker ended during the stop (`live` no longer holds it). */
  exited(worker: Worker, code: number | null, signal: string | null): void;
  /** A stop signal (SIGTERM, SIGINT, SIGHUP). */
  signal(signal: NodeJS.Signals): void;
} {
  const { live, ready, log } = o;
  let stopping = false;
  let exitCode = 0;
  /** Workers the stop sent SIGTERM while they started: dying of it is their clean end. */
  const signalledWhileStarting = new Set<number>();
  let signals = 0;
  const fresh = signalRepeats();
  const killAll = (): void => {
    for (const w of live.keys()) w.process.kill('SIGKILL');
  };
  const all = (reason: string, code = 0): void => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    log.info({ reason, workers: live.size }, 'stopping workers');
    for (const w of live.keys()) {
      // A worker still starting listens for no request yet, and has no sessions to drain.
      if (ready.has(w.id)) tellWorker(w, { troupe: 'shutdown' } satisfies ToWorker);
      else {
        signalledWhileStarting.add(w.id);
        w.process.kill('SIGTERM');
      }
    }
    setTimeout(() => {
      log.warn({}, 'workers still running after the grace period; killing them');
      killAll();
      process.exit(exitCode || 1);
    }, o.graceMs + 5_000).unref();
    if (live.size === 0) process.exit(exitCode);
  };
  return {
    get stopping() {
      return stopping;
    },
    all,
    exited(worker, code, signal) {
      const clean = code === 0 || (signal === 'SIGTERM' && signalledWhileStarting.has(worker.id));
      if (clean) log.info({ worker: worker.id, code, signal }, 'worker stopped');
      else {
        // It did not finish its drain (a crash, or killed): the stop was not clean.
        exitCode ||= 1;
        log.error({ worker: worker.id, code, signal }, 'worker died while stopping');
      }
      if (live.size === 0) {
        log.info({}, 'all workers stopped');
        void logsWritten().then(() => process.exit(exitCode));
      }
    },
    signal(signal) {
      if (!fresh(signal)) return;
      signals++;
      if (signals > 1) {
        log.warn({ signal }, 'second signal: exiting now');
        killAll();
        process.exit(1);
      }
      all(signal);
    },
  };
}

/**
 * Kills a ready worker silent for {@link HANG_KILL_MS} (stuck in an endless
 * loop of a character's code, or the process stopped): the primary then
 * replaces it as one that died, and its clients resume elsewhere.
 */
export function killStuckWorkers(
  router: Pick<WorkerRouter, 'rooms' | 'remove'>,
  log: Logger,
  stopping: () => boolean,
): void {
  let tickAt = performance.now();
  setInterval(() => {
    const now = performance.now();
    // The primary itself stood still (stopped, or its machine paused): the
    // workers' reports wait unread in its channels, so their silence is its own.
    // They are read after this tick; the next one judges them.
    const stood = now - tickAt > 2 * HEARTBEAT_MS + 1_000;
    tickAt = now;
    if (stopping() || stood) return;
    for (const { worker, silentMs } of router.rooms()) {
      if (silentMs < HANG_KILL_MS || worker.isDead()) continue;
      log.error(
        { worker: worker.id, pid: worker.process.pid, silentS: Math.round(silentMs / 1000) },
        'worker unresponsive; killing it',
      );
      router.remove(worker);
      worker.process.kill('SIGKILL');
    }
  }, HEARTBEAT_MS).unref();
}

/**
 * Every worker's state for `/health`, from what each last reported (at
 * least every second): `starting` before it is ready, `unresponsive` when
 * it has not reported for {@link UNRESPONSIVE_MS}, else `ok` or
 * `shutting_down`, with its sessions. Answered at once: a stuck worker
 * does not hold up a health probe.
 */
function workerStates(router: WorkerRouter, live: Map<Worker, number>): WorkerState[] {
  const rooms = new Map(router.rooms().map((r) => [r.worker.id, r]));
  return [...live].map(([w, forkedAt]): WorkerState => {
    const base = {
      id: w.id,
      pid: w.process.pid,
      uptime_s: Math.round((performance.now() - forkedAt) / 1000),
    };
    const r = rooms.get(w.id);
    if (r === undefined) return { ...base, status: 'starting' };
    if (r.silentMs > UNRESPONSIVE_MS) return { ...base, status: 'unresponsive' };
    const { sessions, refusing } = r.room;
    return {
      ...base,
      status: refusing === 'shutting_down' ? 'shutting_down' : 'ok',
      sessions,
      ...(refusing !== undefined && refusing !== 'shutting_down' ? { refusing } : {}),
    };
  });
}

/** What a worker needs from its primary. */
export interface WorkerLink {
  /** `/health` and `/metrics` over every worker. */
  view: ClusterView;
  /** The primary's memory store (when no Redis is set). */
  store: ResumeStore;
  /** Tells the primary this worker takes connections. */
  ready(url: string): void;
  /**
   * Tells the primary this worker's room as it changes, and at least every
   * second (its sign of life), and takes its shutdown request: `primary`
   * when it asks for a drain, `primary gone` when it died (killed).
   */
  serve(status: () => WorkerStatus, shutdown: (by: 'primary' | 'primary gone') => void): void;
}

/** A worker's state, as it reports it to the primary. */
export interface WorkerStatus {
  sessions: number;
  /** Why it would refuse a new session now (`shutting_down` once it drains), if it would. */
  refusing?: WorkerRoom['refusing'] | undefined;
}

/**
 * The worker's side: registers its metrics for aggregation and talks to the primary.
 *
 * @example const link = linkWorker(metrics.registry, metrics.scale);
 */
export function linkWorker(
  registry: Registry,
  counts?: Pick<ScaleMetrics, 'storeErrors'>,
): WorkerLink {
  answerMetrics(registry);
  let next = 0;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let take: ((socket: Socket) => void) | undefined;
  let received = 0;
  /** Connections handed to this worker and not yet closed (sessions, and those still opening). */
  let open = 0;
  /** Tells the primary this worker's room if it changed (set by `serve`). */
  let report: (() => void) | undefined;
  let reportSoon = false;
  const ask = <T>(message: Record<string, unknown>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      // The primary is gone (killed): nothing will answer, so nobody waits for it.
      if (!process.connected) return reject(new Error('the primary is gone'));
      const id = ++next;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the primary did not answer within ${ASK_TIMEOUT_MS * 2} ms`));
      }, ASK_TIMEOUT_MS * 2);
      waiting.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      process.send!({ ...message, id }, undefined, {}, (err) => {
        if (!err) return;
        waiting.get(id)?.reject(new Error('the primary is gone'));
        waiting.delete(id);
      });
    });
  /** Sessions that open or end, and connections taken, in one turn of the event loop: one report. */
  const roomChanged = (): void => {
    if (reportSoon || !report) return;
    reportSoon = true;
    setImmediate(() => {
      reportSoon = false;
      report?.();
    });
  };
  // Questions asked before the primary died get no answer: they fail now, not at their timeout.
  process.once('disconnect', () => {
    for (const { reject } of waiting.values()) reject(new Error('the primary is gone'));
    waiting.clear();
  });
  const stores = workerStore((message) => ask({ troupe: 'store', ...message }), counts);
  process.on('message', (m: ToWorker, handle?: Socket) => {
    if (stores.take(m)) return;
    if (m?.troupe === 'connection') {
      received++;
      if (handle) {
        open++;
        handle.once('close', () => {
          open--;
          roomChanged();
        });
        // Sent only after `ready`, when the server takes connections.
        (take ?? ((socket: Socket) => socket.destroy()))(handle);
      }
      // Told at once: the primary takes a worker slow to say so for a stuck one.
      roomChanged();
      return;
    }
    if (m?.troupe !== 'answer') return;
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.error !== undefined) w?.reject(new Error(m.error));
    else w?.resolve(m.value);
  });
  return {
    view: {
      workers: () => ask<WorkerState[]>({ troupe: 'ask', what: 'workers' }),
      metrics: (waitMs) => ask<string>({ troupe: 'ask', what: 'metrics', waitMs }),
      port: Number(process.env[PORT_VARIABLE]),
      startedAt: Number(process.env[STARTED_VARIABLE]),
      onConnection(taker) {
        take = taker;
      },
      roomChanged,
    },
    store: stores.store,
    ready(url) {
      process.send!({ troupe: 'ready', url } satisfies ToPrimary);
    },
    serve(status, shutdown) {
      let reported = '';
      let reportedAt = 0;
      report = (): void => {
        const { sessions, refusing } = status();
        const room: WorkerRoom = { sessions, received, open, ...(refusing ? { refusing } : {}) };
        const key = `${sessions} ${received} ${open} ${refusing ?? ''}`;
        const now = performance.now();
        // A change at once; else once a second, so the primary knows this worker is alive.
        if ((key === reported && now - reportedAt < HEARTBEAT_MS) || !process.connected) return;
        reported = key;
        reportedAt = now;
        process.send!({ troupe: 'room', room } satisfies ToPrimary);
      };
      setInterval(report, ROOM_REPORT_MS).unref();
      process.on('message', (m: ToWorker) => {
        if (m?.troupe === 'shutdown') shutdown('primary');
      });
      // The primary is gone (killed): nobody hands this worker connections any
      // more, and its clients had better finish their replies and resume
      // elsewhere than see them cut. Node's cluster would exit at once here.
      cluster.worker!.exitedAfterDisconnect = true;
      process.on('disconnect', () => shutdown('primary gone'));
    },
  };
}

/** Whether this process is a worker of `npm start`'s primary. */
export const isWorker = cluster.isWorker;
/** Whether this process is a cluster primary (true for a plain process too). */
export const isPrimary = cluster.isPrimary;
