/**
 * The in-memory resume store shared by an instance's workers: the primary
 * keeps it (no Redis set), and each worker reaches it over IPC, so a
 * conversation resumes on any worker.
 *
 * The primary remembers which worker writes each record. When another
 * worker claims one (a client resumed there while its old connection is
 * still open), it first asks the writer to close that session and give its
 * record as it is then, cut reply and all, and hands that over. Its
 * evictions count in the primary's own metrics, which `/metrics` adds to
 * the workers'.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { ScaleMetrics } from '../metrics/index.js';
import {
  createMemoryResumeStore,
  ResumeStoreError,
  type RecordUpdate,
  type ResumeStore,
  type SaveResult,
  type StoredRecord,
} from './resume-store.js';
import { summedLog } from './logger.js';
import { tellWorker } from './tell-worker.js';

/**
 * How long a claim waits for the worker still running the session to close
 * it and give its record; past it, the last write goes over.
 */
const HANDOVER_WAIT_MS = 1_000;
/** How often the primary lets go of which worker wrote records that have expired. */
const WRITERS_SWEEP_MS = 60_000;
/** The primary says it let resume records go for room at most this often. */
const EVICTION_LOG_MS = 60_000;

/** One save as it crosses to the primary. */
export interface QueuedSave {
  key: string;
  update: RecordUpdate;
  ttlS: number;
}

/** What a worker asks of the store. */
export type StoreOp =
  { op: 'claim'; key: string; ttlS: number } | { op: 'saves'; saves: QueuedSave[] };

/** A worker's request to the store, answered as any request to the primary. */
export type StoreRequest = { troupe: 'store'; id: number } & StoreOp;

/** The store's messages from a worker to the primary. */
export type StoreToPrimary =
  StoreRequest | { troupe: 'handedOver'; id: number; record: StoredRecord | undefined };

/** The store's messages from the primary to a worker. */
export type StoreToWorker =
  { troupe: 'claimed'; key: string } | { troupe: 'handover'; id: number; key: string };

/** Options of {@link primaryStore}. */
export interface PrimaryStoreOptions {
  /** Room for the records, MiB (`RESUME_MEMORY_MB`). @defaultValue 256 */
  resumeMemoryMb?: number;
  log: Logger;
  /** Counts the records let go for room (in the primary's own metrics). */
  evictions?: Pick<Counter, 'inc'>;
}

/** The primary's side of the store. */
export interface PrimaryStore {
  /** What a worker's request gets: each save's outcome (or its error), or the claimed record. */
  request(worker: Worker, m: StoreRequest): Promise<unknown>;
  /** A worker's answer to a handover. */
  handedOver(id: number, record: StoredRecord | undefined): void;
  /** A worker is gone: it writes nothing any more. */
  forget(worker: Worker): void;
}

/**
 * The primary's store, within `resumeMemoryMb` (default 256 MiB).
 *
 * @example const store = primaryStore({ resumeMemoryMb: 256, log });
 */
export function primaryStore(options: PrimaryStoreOptions): PrimaryStore {
  const store = memoryStore(options);
  const writers = new Map<string, { worker: number; expiresAt: number }>();
  setInterval(() => {
    const now = Date.now();
    for (const [key, w] of writers) if (w.expiresAt <= now) writers.delete(key);
  }, WRITERS_SWEEP_MS).unref();
  const handovers = new Map<number, (record: StoredRecord | undefined) => void>();
  let next = 0;
  /** The writer closes its session and gives its record as it is now; undefined if it has none, or is too slow. */
  const handover = (writer: Worker, key: string): Promise<StoredRecord | undefined> =>
    new Promise((resolve) => {
      const id = ++next;
      const done = (record: StoredRecord | undefined): void => {
        clearTimeout(timer);
        handovers.delete(id);
        resolve(record);
      };
      const timer = setTimeout(done, HANDOVER_WAIT_MS, undefined);
      handovers.set(id, done);
      tellWorker(writer, { troupe: 'handover', id, key } satisfies StoreToWorker);
    });
  const save = (worker: Worker, q: QueuedSave): Promise<SaveResult> => {
    writers.set(q.key, { worker: worker.id, expiresAt: Date.now() + q.ttlS * 1000 });
    return store.save(q.key, q.update, q.ttlS);
  };
  const claim = async (worker: Worker, key: string, ttlS: number) => {
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
      tellWorker(cluster.workers?.[writer.worker], {
        troupe: 'claimed',
        key,
      } satisfies StoreToWorker);
    }
    return given ?? record;
  };
  return {
    request(worker, m) {
      if (m.op === 'claim') return claim(worker, m.key, m.ttlS);
      // Each save's own outcome: one that fails (a record over the room) fails alone.
      return Promise.all(
        m.saves.map((q) => save(worker, q).catch((err: Error) => ({ error: err.message }))),
      );
    },
    handedOver(id, record) {
      handovers.get(id)?.(record);
    },
    forget(worker) {
      for (const [key, w] of writers) if (w.worker === worker.id) writers.delete(key);
    },
  };
}

/**
 * The records as text within their room: evictions are counted, and
 * logged at most once a minute.
 */
function memoryStore(options: PrimaryStoreOptions): ResumeStore {
  let evicted = 0;
  // The first at once, then what came since, at most once a minute.
  const tell = summedLog(EVICTION_LOG_MS, true, (since) =>
    options.log.warn(
      { evicted: since, total: evicted, resumeMemoryMb: options.resumeMemoryMb },
      'resume records let go for room (RESUME_MEMORY_MB)',
    ),
  );
  return createMemoryResumeStore({
    ...(options.resumeMemoryMb ? { maxChars: options.resumeMemoryMb * 1024 * 1024 } : {}),
    onEvicted: () => {
      evicted++;
      options.evictions?.inc();
      tell();
    },
  });
}

/** A worker's side of the store. */
export interface WorkerStore {
  store: ResumeStore;
  /** Handles a message of the store's from the primary; false for any other message. */
  take(m: { troupe?: string } | undefined): boolean;
}

/**
 * The store as a worker sees it: saves made in one turn of the event loop
 * cross together; claims go through `ask`, and the primary's handovers
 * and claims elsewhere come back through `take`.
 *
 * @example const { store, take } = workerStore((m) => ask({ troupe: 'store', ...m }), metrics.scale);
 */
export function workerStore(
  ask: (message: StoreOp) => Promise<unknown>,
  counts?: Pick<ScaleMetrics, 'storeErrors'>,
): WorkerStore {
  /** Told when a record this worker writes was claimed by another worker. */
  const claimedElsewhere: Array<(key: string) => void> = [];
  /** Closes a session another worker resumes, and gives its record (the resumer's). */
  let give: ((key: string) => Promise<StoredRecord | undefined>) | undefined;
  const storeOp = async <T>(message: StoreOp): Promise<T> => {
    try {
      return (await ask(message)) as T;
    } catch (err) {
      throw new ResumeStoreError(`the primary's store failed: ${(err as Error).message}`, {
        cause: err,
      });
    }
  };
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
  const handOver = async (id: number, key: string): Promise<void> => {
    let record: StoredRecord | undefined;
    try {
      record = await give?.(key);
    } catch {
      // The session could not give its record: the claim takes the last write.
    }
    process.send?.({ troupe: 'handedOver', id, record } satisfies StoreToPrimary);
  };
  return {
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
    take(message) {
      const m = message as StoreToWorker | undefined;
      if (m?.troupe === 'claimed') {
        for (const listener of claimedElsewhere) listener(m.key);
      } else if (m?.troupe === 'handover') {
        void handOver(m.id, m.key);
      } else {
        return false;
      }
      return true;
    },
  };
}
