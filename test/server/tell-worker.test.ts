import cluster from 'node:cluster';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tellWorker } from '../../src/server/tell-worker.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-tell-'));
  // A worker whose channel to the primary is gone while its process still runs.
  await writeFile(join(dir, 'worker.mjs'), 'process.disconnect(); setTimeout(() => {}, 60_000);\n');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('tellWorker', () => {
  it("drops a message to a worker whose channel is gone, where Node's send raises an error", async () => {
    cluster.setupPrimary({ exec: join(dir, 'worker.mjs'), silent: true });
    const worker = cluster.fork();
    try {
      await once(worker, 'disconnect');
      const errors: Array<NodeJS.ErrnoException> = [];
      worker.on('error', (err: NodeJS.ErrnoException) => errors.push(err));
      tellWorker(worker, { troupe: 'claimed', key: 'k' });
      await new Promise((resolve) => setImmediate(resolve));
      expect(errors).toEqual([]);
      // Without a listener this error is an uncaught exception in the primary.
      worker.send({ troupe: 'claimed', key: 'k' });
      await new Promise((resolve) => setImmediate(resolve));
      expect(errors.map((e) => e.code)).toEqual(['ERR_IPC_CHANNEL_CLOSED']);
    } finally {
      worker.process.kill('SIGKILL');
    }
  });
});
