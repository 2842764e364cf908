/**
 * The primary's door. With several workers the primary listens on the
 * instance's port itself and hands each connection, before a byte of it is
 * read, to the worker with the most room: of the workers taking sessions
 * (not full, overloaded or draining), the one with the fewest sessions,
 * counting the connections it has that are not sessions yet and those
 * handed to it that it has not reported yet. When
 * none has room, the one with the fewest sessions gets it, and its refusal
 * (1013, or 503 before the handshake, with a retry hint) tells the client why.
 * A worker that has not reported for {@link UNRESPONSIVE_MS} comes last of
 * all; one that has not taken a connection handed to it within
 * {@link TAKE_MS} comes after those with room.
 *
 * `node:cluster` alone hands connections round-robin, blind to this: with
 * `MAX_SESSIONS` per worker, a full worker refused clients while another
 * had room, and an overloaded one was handed as many as an idle one.
 */
import type { Refusing } from './realtime.js';
import type { Worker } from 'node:cluster';
import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';
import { LISTEN_BACKLOG } from './listener.js';

/** Connections that may wait for a worker (none ready yet, or all replaced at once). */
const MAX_WAITING = 1024;
/**
 * A worker not heard from for this long (it reports at least every second)
 * is unresponsive: its event loop is stuck, or the process is stopped. It
 * gets a connection only when no other worker is there.
 */
export const UNRESPONSIVE_MS = 3_000;
/**
 * A worker tells the primary of each connection it is handed at once (its
 * `received` count). One that has not within this long is stopped, or its
 * event loop is behind: without this, a worker stopped with fewer sessions
 * than the others was handed every other new connection, each of which
 * hung, until it had been silent for {@link UNRESPONSIVE_MS}.
 */
export const TAKE_MS = 100;
/** Added to an unresponsive worker's load: after every other, draining ones too. */
const UNRESPONSIVE_WEIGHT = 1e12;
/**
 * Added to the load of a worker slow to take a connection ({@link TAKE_MS}):
 * after every worker that takes them and has room, but before one that
 * would refuse. A worker only behind still takes its sessions, and one
 * that refuses would turn the client away.
 */
const SLOW_WEIGHT = 1e5;

/**
 * Added to a refusing worker's load: one that is full or overloaded still
 * comes before one that is draining, which will not take a session again.
 */
const REFUSING_WEIGHT = {
  full: 1e6,
  overloaded: 1e6,
  busy: 1e6,
  shutting_down: 1e9,
} as const;

/** What a worker reports of itself, as it changes. */
export interface WorkerRoom {
  /** Sessions open. */
  sessions: number;
  /** Connections it has been handed in all. */
  received: number;
  /**
   * Connections it was handed that are still open, sessions or not yet: one
   * received and still in its handshake is not a session yet, and counting
   * sessions alone made such a worker look emptier than it was. Absent in
   * a report that does not count them.
   */
  open?: number;
  /** Why it would refuse a new session now; absent when it would take one. */
  refusing?: Refusing;
}

/** Options of {@link openWorkerRouter}. */
export interface WorkerRouterOptions {
  host: string;
  /** 0: any free one. */
  port: number;
  log: Logger;
  /** The clock, in milliseconds (tests pass their own). @defaultValue performance.now */
  now?: () => number;
}

/** The primary's listening socket and which worker gets each connection. */
export interface WorkerRouter {
  /** The port it listens on. */
  readonly port: number;
  /** A worker that takes connections from now on. */
  add(worker: Worker): void;
  /** A worker that has died or stopped. */
  remove(worker: Worker): void;
  /** A worker's report of itself. */
  report(worker: Worker, room: WorkerRoom): void;
  /** What each ready worker last reported, and how long ago (ms). */
  rooms(): Array<{ worker: Worker; room: WorkerRoom; silentMs: number }>;
  /** Stops listening; connections still waiting for a worker are closed. */
  close(): void;
}

interface Entry {
  worker: Worker;
  room: WorkerRoom;
  /** Connections handed to it in all. */
  sent: number;
  /**
   * The connections handed to it that it has not yet said it received,
   * oldest first, and when each was handed. The primary keeps its own copy
   * of each until then: a worker that dies first (killed, before the
   * primary saw it exit) never had them, and another worker gets them.
   */
  untaken: Array<{ at: number; socket: Socket }>;
  /** When it last reported (the router's clock). */
  heardAt: number;
}

/**
 * Listens on the instance's port; rejects with the reason (a port in use)
 * when it cannot.
 *
 * @example
 * const router = await openWorkerRouter({ host: '0.0.0.0', port: 8080, log });
 * cluster.on('online', (w) => router.add(w));
 */
export async function openWorkerRouter(options: WorkerRouterOptions): Promise<WorkerRouter> {
  const { log } = options;
  const clock = options.now ?? (() => performance.now());
  const entries = new Map<number, Entry>();
  const waiting: Socket[] = [];

  /** The worker with the most room: taking sessions first, then the fewest sessions. */
  function pick(): Entry | undefined {
    let best: Entry | undefined;
    let bestScore = Infinity;
    const now = clock();
    for (const e of entries.values()) {
      if (!e.worker.isConnected()) continue;
      const load = Math.max(e.room.sessions, e.room.open ?? 0) + e.untaken.length;
      const oldest = e.untaken[0]?.at ?? now;
      const score =
        (e.room.refusing ? REFUSING_WEIGHT[e.room.refusing] : 0) +
        (now - e.heardAt > UNRESPONSIVE_MS ? UNRESPONSIVE_WEIGHT : 0) +
        (now - oldest > TAKE_MS ? SLOW_WEIGHT : 0) +
        load;
      if (score < bestScore) {
        best = e;
        bestScore = score;
      }
    }
    return best;
  }

  function hand(socket: Socket): void {
    if (socket.destroyed) return;
    const entry = pick();
    if (!entry) {
      if (waiting.length >= MAX_WAITING) return void socket.destroy();
      waiting.push(socket);
      return;
    }
    entry.sent++;
    const handed = { at: clock(), socket };
    entry.untaken.push(handed);
    // keepOpen: the primary's copy stays open until the worker reports it
    // received it (Node's own hand-over closes it once sent, and leaves a
    // connection queued for a worker that died waiting for ever).
    entry.worker.send({ troupe: 'connection' }, socket, { keepOpen: true }, (err) => {
      if (!err) return;
      // Never reached the worker (its channel is gone): it will not count it.
      entry.sent--;
      const at = entry.untaken.indexOf(handed);
      if (at >= 0) entry.untaken.splice(at, 1);
      drop(entry);
      hand(socket);
    });
  }

  /** A worker gone: it takes no more, and what it never said it received goes to the others. */
  function drop(entry: Entry): void {
    if (entries.get(entry.worker.id) !== entry) return;
    entries.delete(entry.worker.id);
    for (const { socket } of entry.untaken.splice(0)) hand(socket);
  }

  const server: Server = createServer({ pauseOnConnect: true }, (socket) => {
    // A reset before the hand-over must not be an uncaught error in the primary.
    socket.on('error', () => socket.destroy());
    hand(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: options.port, host: options.host, backlog: LISTEN_BACKLOG }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // After it listens: an accept that fails (too many open files) is logged, not fatal.
  server.on('error', (err) => log.error({ err }, 'listening socket error'));

  return {
    port: (server.address() as { port: number }).port,
    add(worker) {
      entries.set(worker.id, {
        worker,
        room: { sessions: 0, received: 0 },
        sent: 0,
        untaken: [],
        heardAt: clock(),
      });
      for (const socket of waiting.splice(0)) hand(socket);
    },
    remove(worker) {
      const entry = entries.get(worker.id);
      if (entry) drop(entry);
    },
    report(worker, room) {
      const entry = entries.get(worker.id);
      if (!entry) return;
      entry.room = room;
      entry.heardAt = clock();
      // The ones it has received were handed to it first: the primary's copies close.
      const taken = entry.untaken.length - Math.max(0, entry.sent - room.received);
      for (const { socket } of entry.untaken.splice(0, taken)) socket.destroy();
    },
    rooms() {
      const now = clock();
      return [...entries.values()].map((e) => ({
        worker: e.worker,
        room: e.room,
        silentMs: now - e.heardAt,
      }));
    },
    close() {
      server.close();
      for (const socket of waiting.splice(0)) socket.destroy();
    },
  };
}
