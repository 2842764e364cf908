/**
 * Every core of one machine: `npm start` with `WORKERS` above 1 runs a
 * primary process that forks the workers through `node:cluster`, listens
 * on the port itself and hands each connection, WebSocket and all, to the
 * worker with the most room (see worker-router.ts). Each worker is a whole
 * server: its own characters (and hot reload), LLM client and sessions.
 *
 * The primary replaces a worker that dies, forwards SIGTERM/SIGINT as a
 * drain to every worker and exits when they have, answers the workers'
 * questions for `/health` (every worker's state) and `/metrics` (every
 * worker's metrics, aggregated by prom-client's AggregatorRegistry), and
 * keeps the in-memory resume store when no Redis is set, so a conversation
 * resumes on any worker.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import type { Registry } from 'prom-client';
import { usableCores, WORKER_COUNT_VARIABLE } from '../config/cores.js';
import type { ScaleMetrics } from '../metrics/index.js';
import {
  createMemoryResumeStore,
  ResumeStoreError,
  type RecordUpdate,
  type ResumeStore,
  type SaveResult,
  type StoredRecord,
} from './resume-store.js';
import { listenFailure, type ClusterView, type WorkerState } from './index.js';
import { logsWritten } from './logger.js';
import { signalRepeats } from './signals.js';
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
/**
 * How long a claim waits for the worker still running the session to close
 * it and give its record; past it, the last write goes over.
 */
const HANDOVER_WAIT_MS = 1_000;
/** How often the primary lets go of which worker wrote records that have expired. */
const WRITERS_SWEEP_MS = 60_000;
/** The primary says it let resume records go for room at most this often. */
const EVICTION_LOG_MS = 60_000;

/** Messages between the primary and its workers (all carry `troupe`). */
type ToPrimary =
  | { troupe: 'ready'; url: string }
  | { troupe: 'ask'; id: number; what: 'workers' | 'metrics' }
  | { troupe: 'store'; id: number; op: 'claim'; key: string; ttlS: number }
  | { troupe: 'store'; id: number; op: 'saves'; saves: QueuedSave[] }
  | { troupe: 'room'; room: WorkerRoom }
  | { troupe: 'handedOver'; id: number; record: StoredRecord | undefined };
/** One save as it crosses to the primary. */
interface QueuedSave {
  key: string;
  update: RecordUpdate;
  ttlS: number;
}
type ToWorker =
  | { troupe: 'answer'; id: number; value?: unknown; error?: string }
  | { troupe: 'connection' }
  | { troupe: 'shutdown' }
  | { troupe: 'claimed'; key: string }
  | { troupe: 'evicted'; records: number }
  | { troupe: 'handover'; id: number; key: string };

/** The number of workers a setting asks for: `auto` = the cores this process may use (a container's CPU limit included). */
export function resolveWorkers(setting: number | 'auto'): number {
  return setting === 'auto' ? usableCores() : setting;
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
  const aggregator = new AggregatorRegistry();
  const store = options.redis ? undefined : sharedStore(primaryMemoryStore(options));
  const started = new Map<number, number>();
  const ready = new Set<number>();
  const crashes: number[] = [];
  let everReady = false;
  let stopping = false;

  const instanceStarted = Date.now();
  const fork = (): Worker => {
    const worker = cluster.fork({
      [PORT_VARIABLE]: String(router.port),
      [STARTED_VARIABLE]: String(instanceStarted),
      // Its speech engines' threads are sized by its share of the cores.
      [WORKER_COUNT_VARIABLE]: String(options.workers),
    });
    started.set(worker.id, performance.now());
    worker.on('message', (m: ToPrimary) => void handle(worker, m));
    return worker;
  };

  killStuckWorkers(router, log, () => stopping);

  async function handle(worker: Worker, m: ToPrimary): Promise<void> {
    if (m?.troupe === 'room') {
      router.report(worker, m.room);
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
      const reply = (value: unknown, error?: string): void =>
        void worker.send({ troupe: 'answer', id: m.id, value, ...(error ? { error } : {}) });
      try {
        reply(
          m.what === 'metrics' ? await aggregator.clusterMetrics() : workerStates(router, started),
        );
      } catch (err) {
        reply(undefined, (err as Error).message);
      }
    } else if (m?.troupe === 'store') {
      const answer = (value: unknown, error?: string): void =>
        void worker.send({ troupe: 'answer', id: m.id, value, ...(error ? { error } : {}) });
      if (!store) return answer(undefined);
      try {
        answer(
          m.op === 'saves'
            ? // Each save's own outcome: one that fails (a record over the room) fails alone.
              await Promise.all(
                m.saves.map((q) =>
                  store.save(worker, q).catch((err: Error) => ({ error: err.message })),
                ),
              )
            : await store.claim(worker, m.key, m.ttlS),
        );
      } catch (err) {
        answer(undefined, (err as Error).message);
      }
    }
  }

  cluster.on('exit', (worker, code, signal) => {
    router.remove(worker);
    store?.forget(worker);
    ready.delete(worker.id);
    started.delete(worker.id);
    if (stopping) {
      log.info({ worker: worker.id, code }, 'worker stopped');
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        log.info({}, 'all workers stopped');
        void logsWritten().then(() => process.exit(0));
      }
      return;
    }
    if (!everReady && signal === null) {
      // Nothing ever started and the worker exited on its own (a bad
      // characters folder): it said why. One killed (OOM killer, kill -9) is
      // replaced as any dead worker is.
      log.fatal({ worker: worker.id, code }, 'worker failed to start; stopping');
      stopAll('startup failed', 1);
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
      stopAll('crash loop', 1);
      return;
    }
    log.error({ worker: worker.id, code, signal }, 'worker died; starting another');
    fork();
  });

  let exitCode = 0;
  function stopAll(reason: string, code = 0): void {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    log.info({ reason, workers: Object.keys(cluster.workers ?? {}).length }, 'stopping workers');
    for (const w of Object.values(cluster.workers ?? {})) {
      // A worker still starting listens for no request yet, and has no sessions to drain.
      if (ready.has(w?.id ?? -1)) w?.send({ troupe: 'shutdown' } satisfies ToWorker);
      else w?.process.kill('SIGTERM');
    }
    setTimeout(() => {
      log.warn({}, 'workers still running after the grace period; killing them');
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
      process.exit(exitCode || 1);
    }, options.graceMs + 5_000).unref();
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(exitCode);
  }

  let signals = 0;
  const fresh = signalRepeats();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!fresh(signal)) return;
    signals++;
    if (signals > 1) {
      log.warn({ signal }, 'second signal: exiting now');
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
      process.exit(1);
    }
    stopAll(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  log.info(
    { workers: options.workers, resume: store ? 'primary memory' : 'redis' },
    'starting workers',
  );
  for (let i = 0; i < options.workers; i++) fork();
}

/**
 * Kills a ready worker silent for {@link HANG_KILL_MS} (stuck in an endless
 * loop of a character's code, or the process stopped): the primary then
 * replaces it as one that died, and its clients resume elsewhere.
 */
function killStuckWorkers(router: WorkerRouter, log: Logger, stopping: () => boolean): void {
  setInterval(() => {
    if (stopping()) return;
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
function workerStates(router: WorkerRouter, started: Map<number, number>): WorkerState[] {
  const rooms = new Map(router.rooms().map((r) => [r.worker.id, r]));
  return Object.values(cluster.workers ?? {})
    .filter((w): w is Worker => w !== undefined)
    .map((w): WorkerState => {
      const base = {
        id: w.id,
        pid: w.process.pid,
        uptime_s: Math.round((performance.now() - (started.get(w.id) ?? 0)) / 1000),
      };
      const r = rooms.get(w.id);
      if (r === undefined) return { ...base, status: 'starting' };
      if (r.silentMs > UNRESPONSIVE_MS) return { ...base, status: 'unresponsive' };
      const { sessions, refusing } = r.room;
      return {
        ...base,
        status: refusing === 'shutting_down' ? 'shutting_down' : 'ok',
        sessions,
        ...(refusing === 'full' || refusing === 'overloaded' ? { refusing } : {}),
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
   * second (its sign of life), and takes its shutdown request.
   */
  serve(status: () => WorkerStatus, shutdown: () => void): void;
}

/**
 * The primary's resume store: its evictions are logged, at most once a
 * minute, and told to a worker to count (`/metrics` is the workers').
 */
function primaryMemoryStore(options: PrimaryOptions): ResumeStore {
  let evicted = 0;
  let saidAt = -Infinity;
  /** Evictions not yet told to a worker, whose /metrics counts them. */
  let untold = 0;
  let telling = false;
  const tell = (): void => {
    telling = false;
    // None connected (all restarting): told with the next eviction.
    const worker = Object.values(cluster.workers ?? {}).find((w) => w?.isConnected());
    if (worker === undefined) return;
    worker.send({ troupe: 'evicted', records: untold } satisfies ToWorker);
    untold = 0;
  };
  return createMemoryResumeStore({
    ...(options.resumeMemoryMb ? { maxChars: options.resumeMemoryMb * 1024 * 1024 } : {}),
    onEvicted: () => {
      evicted++;
      untold++;
      // Evictions of one save cross in one message.
      if (!telling) {
        telling = true;
        setImmediate(tell);
      }
      const now = performance.now();
      if (now - saidAt < EVICTION_LOG_MS) return;
      saidAt = now;
      options.log.warn(
        { evicted, resumeMemoryMb: options.resumeMemoryMb },
        'resume records let go for room (RESUME_MEMORY_MB)',
      );
    },
  });
}

/**
 * The primary's store as its workers share it: it remembers which worker
 * writes each record, and when another worker claims one (a client resumed
 * there), tells the writer at once, so the connection still open on it is
 * closed (one conversation, one connection).
 */
function sharedStore(store: ResumeStore) {
  const writers = new Map<string, { worker: number; expiresAt: number }>();
  setInterval(() => {
    const now = Date.now();
    for (const [key, w] of writers) if (w.expiresAt <= now) writers.delete(key);
  }, WRITERS_SWEEP_MS).unref();
  let next = 0;
  const handovers = new Map<number, (record: StoredRecord | undefined) => void>();
  /** The writer closes its session and gives its record as it is now; undefined if it has none, or is too slow. */
  const handover = (writer: Worker, key: string): Promise<StoredRecord | undefined> =>
    new Promise((resolve) => {
      const id = ++next;
      const timer = setTimeout(() => {
        handovers.delete(id);
        resolve(undefined);
      }, HANDOVER_WAIT_MS);
      handovers.set(id, (record) => {
        clearTimeout(timer);
        handovers.delete(id);
        resolve(record);
      });
      writer.send({ troupe: 'handover', id, key } satisfies ToWorker);
    });
  return {
    save(worker: Worker, q: QueuedSave): Promise<SaveResult> {
      writers.set(q.key, { worker: worker.id, expiresAt: Date.now() + q.ttlS * 1000 });
      return store.save(q.key, q.update, q.ttlS);
    },
    async claim(worker: Worker, key: string, ttlS: number) {
      const writer = writers.get(key);
      const other = writer !== undefined && writer.worker !== worker.id;
      const writing = other ? cluster.workers?.[writer.worker] : undefined;
      // The session may still be open on its worker: it closes first and hands
      // over what it has now (its cut reply, changes not yet written).
      const given = writing?.isConnected() ? await handover(writing, key) : undefined;
      const record = await store.claim(key, ttlS);
      writers.delete(key);
      if (record === undefined) return undefined;
      if (other && given === undefined) {
        cluster.workers?.[writer.worker]?.send({ troupe: 'claimed', key } satisfies ToWorker);
      }
      return given ?? record;
    },
    /** A worker's answer to {@link handover}. */
    handedOver(id: number, record: StoredRecord | undefined): void {
      handovers.get(id)?.(record);
    },
    forget(worker: Worker): void {
      for (const [key, w] of writers) if (w.worker === worker.id) writers.delete(key);
    },
  };
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
  counts?: Pick<ScaleMetrics, 'storeEvictions' | 'storeErrors'>,
): WorkerLink {
  // Constructing it makes prom-client answer the primary's metric requests.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
  let next = 0;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let take: ((socket: Socket) => void) | undefined;
  let received = 0;
  /** Tells the primary this worker's room if it changed (set by `serve`). */
  let report: (() => void) | undefined;
  let reportSoon = false;
  /** Told when a record this worker writes was claimed by another worker. */
  const claimedElsewhere: Array<(key: string) => void> = [];
  /** Closes a session another worker resumes, and gives its record (the resumer's). */
  let give: ((key: string) => Promise<StoredRecord | undefined>) | undefined;
  process.on('message', (m: ToWorker, handle?: Socket) => {
    if (m?.troupe === 'claimed') {
      for (const listener of claimedElsewhere) listener(m.key);
      return;
    }
    if (m?.troupe === 'handover') {
      void (async () => {
        let record: StoredRecord | undefined;
        try {
          record = await give?.(m.key);
        } catch {
          // The session could not give its record: the claim takes the last write.
        }
        process.send?.({ troupe: 'handedOver', id: m.id, record } satisfies ToPrimary);
      })();
      return;
    }
    if (m?.troupe === 'evicted') {
      // The primary's store let records go: counted here, where /metrics sums them.
      counts?.storeEvictions.inc(m.records);
      return;
    }
    if (m?.troupe === 'connection') {
      received++;
      // Sent only after `ready`, when the server takes connections.
      if (handle) (take ?? ((socket: Socket) => socket.destroy()))(handle);
      return;
    }
    if (m?.troupe !== 'answer') return;
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.error !== undefined) w?.reject(new Error(m.error));
    else w?.resolve(m.value);
  });
  const ask = <T>(message: Record<string, unknown>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
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
      process.send!({ ...message, id });
    });
  const storeOp = async <T>(message: Record<string, unknown>): Promise<T> => {
    try {
      return await ask<T>({ troupe: 'store', ...message });
    } catch (err) {
      throw new ResumeStoreError(`the primary's store failed: ${(err as Error).message}`, {
        cause: err,
      });
    }
  };
  // Saves made in one turn of the event loop cross together: one message
  // (one wake-up of the primary) for all of them.
  let queued: Array<QueuedSave & { done: (result: SaveResult | Error) => void }> = [];
  const sendSaves = (): void => {
    if (queued.length === 0) return;
    const batch = queued;
    queued = [];
    storeOp<Array<SaveResult | { error: string }> | undefined>({
      op: 'saves',
      saves: batch.map(({ key, update, ttlS }) => ({ key, update, ttlS })),
    }).then(
      (results) =>
        batch.forEach((q, i) => {
          const result = results?.[i];
          if (result !== undefined && typeof result !== 'object') return q.done(result);
          counts?.storeErrors.inc({ op: 'save' });
          q.done(new ResumeStoreError(result?.error ?? 'the primary did not answer this save'));
        }),
      (err: Error) => {
        counts?.storeErrors.inc({ op: 'save' }, batch.length);
        batch.forEach((q) => q.done(err));
      },
    );
  };
  return {
    view: {
      workers: () => ask<WorkerState[]>({ troupe: 'ask', what: 'workers' }),
      metrics: () => ask<string>({ troupe: 'ask', what: 'metrics' }),
      port: Number(process.env[PORT_VARIABLE]),
      startedAt: Number(process.env[STARTED_VARIABLE]),
      onConnection(taker) {
        take = taker;
      },
      roomChanged() {
        // Sessions that open or end in one turn of the event loop: one report.
        if (reportSoon || !report) return;
        reportSoon = true;
        setImmediate(() => {
          reportSoon = false;
          report?.();
        });
      },
    },
    store: {
      kind: 'cluster',
      save: (key, update, ttlS) =>
        new Promise((resolve, reject) => {
          if (queued.length === 0) setImmediate(sendSaves);
          queued.push({
            key,
            update,
            ttlS,
            done: (r) => (r instanceof Error ? reject(r) : resolve(r)),
          });
        }),
      sendNow: sendSaves,
      claim: (key, ttlS) =>
        storeOp<StoredRecord | undefined>({ op: 'claim', key, ttlS }).catch((err: Error) => {
          counts?.storeErrors.inc({ op: 'claim' });
          throw err;
        }),
      onClaimedElsewhere: (listener) => void claimedElsewhere.push(listener),
      onHandover(giver) {
        give = giver;
      },
      health: () => Promise.resolve({ ok: process.connected }),
      close: () => Promise.resolve(),
    },
    ready(url) {
      process.send!({ troupe: 'ready', url } satisfies ToPrimary);
    },
    serve(status, shutdown) {
      let reported = '';
      let reportedAt = 0;
      report = (): void => {
        const { sessions, refusing } = status();
        const room: WorkerRoom = { sessions, received, ...(refusing ? { refusing } : {}) };
        const key = `${sessions} ${received} ${refusing ?? ''}`;
        const now = performance.now();
        // A change at once; else once a second, so the primary knows this worker is alive.
        if ((key === reported && now - reportedAt < HEARTBEAT_MS) || !process.connected) return;
        reported = key;
        reportedAt = now;
        process.send!({ troupe: 'room', room } satisfies ToPrimary);
      };
      setInterval(report, ROOM_REPORT_MS).unref();
      process.on('message', (m: ToWorker) => {
        if (m?.troupe === 'shutdown') shutdown();
      });
      // The primary is gone (killed): nobody hands this worker connections any more.
      process.on('disconnect', shutdown);
    },
  };
}

/** Whether this process is a worker of `npm start`'s primary. */
export const isWorker = cluster.isWorker;
/** Whether this process is a cluster primary (true for a plain process too). */
export const isPrimary = cluster.isPrimary;
