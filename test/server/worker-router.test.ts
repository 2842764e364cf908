import type { Worker } from 'node:cluster';
import { connect, type Socket } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { LISTEN_BACKLOG } from '../../src/server/listener.js';
import { openWorkerRouter, TAKE_MS, type WorkerRouter } from '../../src/server/worker-router.js';
import { listenQueue } from '../helpers/http.js';
import { within } from '../helpers/wait.js';

/**
 * A stand-in for a cluster worker: records the connections handed to it.
 * `channelGone()`: its sends fail from then on, as a dead worker's do.
 */
function fakeWorker(id: number) {
  const handed: Socket[] = [];
  const waiters: Array<() => void> = [];
  let connected = true;
  let gone = false;
  const worker = {
    id,
    isConnected: () => connected,
    send(_message: unknown, socket: Socket, _options: unknown, done: (err: Error | null) => void) {
      if (gone) {
        done(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
        return false;
      }
      handed.push(socket);
      done(null);
      for (const w of waiters.splice(0)) w();
      return true;
    },
  } as unknown as Worker;
  return {
    worker,
    handed,
    disconnect: () => (connected = false),
    channelGone: () => (gone = true),
    /** Resolves once it holds `n` connections. */
    holds: (n: number) =>
      within(
        new Promise<void>(function wait(resolve) {
          if (handed.length >= n) resolve();
          else waiters.push(() => wait(resolve));
        }),
        `worker ${id} holding ${n} connections`,
      ),
  };
}

let router: WorkerRouter | undefined;
const sockets: Socket[] = [];

afterEach(() => {
  router?.close();
  router = undefined;
  for (const s of sockets.splice(0)) s.destroy();
});

async function dial(): Promise<void> {
  const s = connect(router!.port, '127.0.0.1');
  s.on('error', () => {});
  sockets.push(s);
  await new Promise((r) => s.once('connect', r));
}

const log = pino({ level: 'silent' });

type FakeWorker = ReturnType<typeof fakeWorker>;

/** A router on a port of its own (on `now`'s clock, if given), and `count` fake workers added to it, ids from 1. */
async function routerWith(
  count: 2,
  now?: () => number,
): Promise<[WorkerRouter, FakeWorker, FakeWorker]>;
async function routerWith(
  count: 3,
  now?: () => number,
): Promise<[WorkerRouter, FakeWorker, FakeWorker, FakeWorker]>;
async function routerWith(
  count: number,
  now?: () => number,
): Promise<[WorkerRouter, ...FakeWorker[]]> {
  const opened = await openWorkerRouter({
    host: '127.0.0.1',
    port: 0,
    log,
    ...(now ? { now } : {}),
  });
  router = opened;
  const workers = Array.from({ length: count }, (_, i) => fakeWorker(i + 1));
  for (const w of workers) opened.add(w.worker);
  return [opened, ...workers];
}

describe('the primary handing connections to workers', () => {
  it("keeps a burst of connections waiting in a queue deeper than Node's 511", async () => {
    const [r] = await routerWith(2);
    const { backlog, cap } = listenQueue(r.port);
    expect(backlog).toBe(Math.min(LISTEN_BACKLOG, cap));
  });

  it('hands each to the worker with the fewest sessions, counting those not yet reported', async () => {
    const [r, a, b] = await routerWith(2);
    r.report(a.worker, { sessions: 3, received: 0 });
    for (let i = 0; i < 4; i++) await dial();
    // b: 0, 1, 2 and then a tie at 3, which the first added takes.
    await b.holds(3);
    await a.holds(1);
    expect([a.handed.length, b.handed.length]).toEqual([1, 3]);
  });

  it('counts the connections a worker has that are not sessions yet', async () => {
    const [r, a, b] = await routerWith(2);
    // a took two that are still in their handshakes; b has one session.
    r.report(a.worker, { sessions: 0, received: 0, open: 2 });
    r.report(b.worker, { sessions: 1, received: 0, open: 1 });
    await dial();
    await b.holds(1);
    // Counting sessions alone, a looked empty and got it.
    expect([a.handed.length, b.handed.length]).toEqual([0, 1]);
  });

  it('skips a worker that is full or overloaded, and one draining comes last', async () => {
    const [r, full, draining, idle] = await routerWith(3);
    r.report(full.worker, { sessions: 2, received: 0, refusing: 'full' });
    r.report(draining.worker, { sessions: 0, received: 0, refusing: 'shutting_down' });
    r.report(idle.worker, { sessions: 50, received: 0 });
    await dial();
    await idle.holds(1);
    // None has room: the full one refuses it with its reason; a draining one would say 1001.
    r.report(idle.worker, { sessions: 50, received: 1, refusing: 'overloaded' });
    await dial();
    await full.holds(1);
    expect(draining.handed).toHaveLength(0);
  });

  it('holds connections while no worker is ready, and hands them to the first that is', async () => {
    router = await openWorkerRouter({ host: '127.0.0.1', port: 0, log });
    const gone = fakeWorker(1);
    router.add(gone.worker);
    gone.disconnect();
    await dial();
    await dial();
    const next = fakeWorker(2);
    router.add(next.worker);
    await next.holds(2);
    expect(gone.handed).toHaveLength(0);
  });

  it('hands nothing more to a worker that has not taken a connection within TAKE_MS (stopped)', async () => {
    let now = 0;
    const [r, stopped, live] = await routerWith(2, () => now);
    // Both have room; each is handed one, as the load says.
    await dial();
    await stopped.holds(1);
    await dial();
    await live.holds(1);
    r.report(live.worker, { sessions: 1, received: 1 });
    // Tied on load, the stopped one would take every other connection; once
    // its first has been untaken for TAKE_MS it gets none while another can.
    now += TAKE_MS + 1;
    r.report(live.worker, { sessions: 1, received: 1 });
    for (let i = 2; i <= 5; i++) {
      await dial();
      await live.holds(i);
      r.report(live.worker, { sessions: i, received: i });
    }
    expect(stopped.handed).toHaveLength(1);
  });

  it('still prefers a worker slow to take its connections to one that would refuse', async () => {
    let now = 0;
    const [r, slow, full] = await routerWith(2, () => now);
    r.report(full.worker, { sessions: 0, received: 0, refusing: 'full' });
    await dial();
    await slow.holds(1);
    now += TAKE_MS + 1;
    r.report(full.worker, { sessions: 0, received: 0, refusing: 'full' });
    await dial();
    await slow.holds(2);
    expect(full.handed).toHaveLength(0);
  });

  it('keeps handing connections to a worker that takes them, however long ago the last was', async () => {
    let now = 0;
    const [r, a, b] = await routerWith(2, () => now);
    r.report(b.worker, { sessions: 5, received: 0 });
    await dial();
    await a.holds(1);
    r.report(a.worker, { sessions: 1, received: 1 });
    now += 10 * TAKE_MS;
    r.report(b.worker, { sessions: 5, received: 0 });
    r.report(a.worker, { sessions: 1, received: 1 });
    await dial();
    await a.holds(2);
    expect(b.handed).toHaveLength(0);
  });

  it('keeps its copy of a connection until the worker says it received it, then closes it', async () => {
    const [r, a] = await routerWith(2);
    r.report(a.worker, { sessions: 0, received: 0 });
    await dial();
    await a.holds(1);
    expect(a.handed[0]!.destroyed).toBe(false);
    r.report(a.worker, { sessions: 0, received: 1, open: 1 });
    expect(a.handed[0]!.destroyed).toBe(true);
  });

  it('hands a connection a worker never said it received to another when that worker is gone', async () => {
    const [r, dying, other] = await routerWith(2);
    r.report(other.worker, { sessions: 5, received: 0 });
    await dial();
    await dial();
    await dying.holds(2);
    // Killed before it took them: the primary learns of it only now.
    r.remove(dying.worker);
    await other.holds(2);
    expect(other.handed).toEqual(dying.handed);
    expect(other.handed.every((s) => !s.destroyed)).toBe(true);
  });

  it('hands a connection to another worker when the send to its worker fails', async () => {
    const [r, dead, other] = await routerWith(2);
    r.report(other.worker, { sessions: 5, received: 0 });
    dead.channelGone();
    await dial();
    await other.holds(1);
    expect(dead.handed).toHaveLength(0);
    // The dead one gets nothing more.
    await dial();
    await other.holds(2);
  });

  it('rejects when the port is taken', async () => {
    router = await openWorkerRouter({ host: '127.0.0.1', port: 0, log });
    await expect(
      openWorkerRouter({ host: '127.0.0.1', port: router.port, log }),
    ).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});
