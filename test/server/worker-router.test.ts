import type { Worker } from 'node:cluster';
import { connect, type Socket } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { openWorkerRouter, type WorkerRouter } from '../../src/server/worker-router.js';
import { within } from '../helpers/wait.js';

/** A stand-in for a cluster worker: records the connections handed to it. */
function fakeWorker(id: number) {
  const handed: Socket[] = [];
  const waiters: Array<() => void> = [];
  let connected = true;
  const worker = {
    id,
    isConnected: () => connected,
    send(_message: unknown, socket: Socket, done: (err: Error | null) => void) {
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

describe('the primary handing connections to workers', () => {
  it('hands each to the worker with the fewest sessions, counting those not yet reported', async () => {
    router = await openWorkerRouter({ host: '127.0.0.1', port: 0, log });
    const a = fakeWorker(1);
    const b = fakeWorker(2);
    router.add(a.worker);
    router.add(b.worker);
    router.report(a.worker, { sessions: 3, received: 0 });
    for (let i = 0; i < 4; i++) await dial();
    // b: 0, 1, 2 and then a tie at 3, which the first added takes.
    await b.holds(3);
    await a.holds(1);
    expect([a.handed.length, b.handed.length]).toEqual([1, 3]);
  });

  it('skips a worker that is full or overloaded, and one draining comes last', async () => {
    router = await openWorkerRouter({ host: '127.0.0.1', port: 0, log });
    const full = fakeWorker(1);
    const draining = fakeWorker(2);
    const idle = fakeWorker(3);
    for (const w of [full, draining, idle]) router.add(w.worker);
    router.report(full.worker, { sessions: 2, received: 0, refusing: 'full' });
    router.report(draining.worker, { sessions: 0, received: 0, refusing: 'shutting_down' });
    router.report(idle.worker, { sessions: 50, received: 0 });
    await dial();
    await idle.holds(1);
    // None has room: the full one refuses it with its reason; a draining one would say 1001.
    router.report(idle.worker, { sessions: 50, received: 1, refusing: 'overloaded' });
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

  it('rejects when the port is taken', async () => {
    router = await openWorkerRouter({ host: '127.0.0.1', port: 0, log });
    await expect(
      openWorkerRouter({ host: '127.0.0.1', port: router.port, log }),
    ).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});
