/**
 * A worker whose event loop is stuck (here: stopped with SIGSTOP) gets no
 * new connections, shows as unresponsive in /health at once, and is killed
 * and replaced once it has been silent for 30 s.
 */
import { Agent, get } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_SCRIPT, startSimulator, type Simulator } from '../../src/testing/index.js';
import { startInstance, type Instance } from '../deploy/processes.js';
import { connect, type TestClient } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';

interface WorkerState {
  pid: number;
  status: string;
}

describe('npm start with WORKERS=2, one worker stuck', () => {
  let sim: Simulator;
  let instance: Instance;
  const clients: TestClient[] = [];
  let stuck: number | undefined;

  beforeAll(async () => {
    sim = await startSimulator({ script: DEMO_SCRIPT });
    instance = await startInstance({ WORKERS: '2', LLM_BASE_URL: sim.url });
  });

  afterAll(async () => {
    if (stuck !== undefined) {
      try {
        process.kill(stuck, 'SIGCONT');
      } catch {
        // Already killed by its primary.
      }
    }
    for (const c of clients) await c.close();
    await instance?.stop();
    await sim?.close();
  });

  /**
   * /health's workers, or none when the request went to the stuck worker
   * (in its first seconds, before the primary counts it unresponsive): a
   * probe's timeout, so the polls below ask again.
   */
  const workers = (): Promise<WorkerState[]> =>
    new Promise((resolve) => {
      const req = get(`${instance.url}/health`, { timeout: 1_000 }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve((JSON.parse(body) as { workers: WorkerState[] }).workers));
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve([]));
    });

  it('routes around it, says so in /health, then replaces it', async () => {
    const [first] = await workers();
    expect(first?.status).toBe('ok');
    stuck = first!.pid;
    process.kill(stuck, 'SIGSTOP');
    await within(
      (async () => {
        for (;;) {
          const states = await workers();
          if (states.find((w) => w.pid === stuck)?.status === 'unresponsive') return;
          await new Promise((r) => setTimeout(r, 50));
        }
      })(),
      'the stuck worker shown as unresponsive',
    );
    // Every new session goes to the worker that answers.
    for (let i = 0; i < 4; i++) {
      const c = await connect(`${instance.wsUrl}?character=plain`);
      clients.push(c);
      await c.next('session.created', undefined, 15_000);
    }
    await instance.proc.waitFor(
      /"msg":"worker unresponsive; killing it"/,
      'the stuck worker killed',
      60_000,
    );
    await instance.proc.waitFor(/"msg":"worker died; starting another"/, 'a worker in its place');
    await within(
      (async () => {
        for (;;) {
          const states = await workers();
          if (states.length === 2 && states.every((w) => w.status === 'ok' && w.pid !== stuck)) {
            return;
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      })(),
      'two workers answering again',
    );
    expect((await workers()).map((w) => w.pid)).not.toContain(stuck);
  });
});

describe('npm start with WORKERS=2, its primary stuck', () => {
  let sim: Simulator;
  let instance: Instance;
  let primary: number | undefined;

  beforeAll(async () => {
    sim = await startSimulator({ script: DEMO_SCRIPT });
    instance = await startInstance({ WORKERS: '2', LLM_BASE_URL: sim.url });
  });

  afterAll(async () => {
    if (primary !== undefined) process.kill(primary, 'SIGCONT');
    await instance?.stop();
    await sim?.close();
  });

  it('has a worker answer /health for itself, degraded, and /health/ready 503, not an error', async () => {
    // A connection kept alive (as nginx keeps them), handed to a worker before the primary stopped.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const ask = (path: string) =>
      new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
        get(`${instance.url}${path}`, { agent }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) }));
          res.on('error', reject);
        }).on('error', reject);
      });
    try {
      expect((await ask('/health')).body.status).toBe('ok');
      primary = instance.proc.child.pid!;
      process.kill(primary, 'SIGSTOP');
      const health = await ask('/health');
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({
        status: 'degraded',
        primary: expect.stringContaining('the primary did not answer'),
      });
      const ready = await ask('/health/ready');
      expect(ready).toMatchObject({ status: 503, body: { ready: false } });
    } finally {
      agent.destroy();
      if (primary !== undefined) process.kill(primary, 'SIGCONT');
      primary = undefined;
    }
  });
});
