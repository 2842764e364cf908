import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_SCRIPT, startSimulator, type Simulator } from '../../src/testing/index.js';
import { startInstance, type Instance } from '../deploy/processes.js';
import { request } from '../helpers/http.js';
import { connect, say, type TestClient } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';

async function sessionsPerWorker(url: string): Promise<number[]> {
  const health = (await request(`${url}/health`)).json<{
    workers?: Array<{ sessions?: number }>;
  }>();
  return (health.workers ?? []).map((w) => w.sessions ?? -1).sort();
}

describe('npm start with WORKERS=2 and MAX_SESSIONS=2 (per worker)', () => {
  let sim: Simulator;
  let instance: Instance;
  const clients: TestClient[] = [];

  beforeAll(async () => {
    // A slow first token keeps a reply running while the last test stops the instance.
    sim = await startSimulator({
      profile: 'vllm-hermes',
      script: DEMO_SCRIPT,
      latency: { ttftMs: 15_000 },
    });
    instance = await startInstance({
      WORKERS: '2',
      MAX_SESSIONS: '2',
      LLM_BASE_URL: sim.url,
      SHUTDOWN_GRACE_MS: '60000',
    });
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await instance?.stop();
    await sim?.close();
  });

  async function open(): Promise<TestClient> {
    const c = await connect(`${instance.wsUrl}?character=plain`);
    clients.push(c);
    return c;
  }

  it('takes WORKERS × MAX_SESSIONS sessions, then refuses with 1013', async () => {
    for (let i = 0; i < 4; i++) await (await open()).next('session.created');
    expect(await sessionsPerWorker(instance.url)).toEqual([2, 2]);
    const health = (await request(`${instance.url}/health`)).json<{ workers: object[] }>();
    expect(health.workers).toMatchObject([{ refusing: 'full' }, { refusing: 'full' }]);
    const ready = await request(`${instance.url}/health/ready`);
    expect([ready.status, ready.json()]).toEqual([503, { ready: false, reason: 'full' }]);
    const fifth = await open();
    expect(await fifth.closed).toEqual({
      code: 1013,
      reason: 'server full (2 sessions per worker); try again later',
    });
  });

  it('hands each new session to the worker with room, never to the full one', async () => {
    // Round-robin handed every other connection to the full worker: each of
    // these rounds was refused half the time.
    for (let round = 0; round < 6; round++) {
      const leaving = clients.find((c) => c.ws.readyState === c.ws.OPEN)!;
      await leaving.close();
      // The workers' answers to /health follow their reports to the primary.
      await within(
        (async () => {
          while ((await sessionsPerWorker(instance.url)).reduce((a, b) => a + b) !== 3)
            await new Promise((r) => setTimeout(r, 20));
        })(),
        'the instance counting the session that left',
      );
      expect((await request(`${instance.url}/health/ready`)).status).toBe(200);
      const c = await open();
      const first = await Promise.race([
        c.next('session.created').then(() => 'session.created'),
        c.closed.then(({ code, reason }) => `closed ${code} ${reason}`),
      ]);
      expect(first, `round ${round}`).toBe('session.created');
      expect(await sessionsPerWorker(instance.url)).toEqual([2, 2]);
    }
  });

  it('drains when the primary and its workers all get SIGTERM, the primary first (systemd, Ctrl+C)', async () => {
    const pids = (await request(`${instance.url}/health`))
      .json<{ workers: Array<{ pid: number }> }>()
      .workers.map((w) => w.pid);
    const talking = clients.find((c) => c.ws.readyState === c.ws.OPEN)!;
    say(talking, 'Hello there!');
    await talking.next('response.created');
    const exit = instance.stop();
    await instance.proc.waitFor(
      /("signal":"primary","msg":"signal received"[^]*){2}/,
      'both workers asked to stop by the primary',
    );
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // A worker with no reply running may have drained and exited already.
      }
    }
    // Before the fix the worker took its own signal for a second one and exited at once (1006).
    const ended = await Promise.race([
      talking.next('response.done').then((e) => e.response),
      talking.closed.then(({ code }) => ({ closedFirst: code })),
    ]);
    expect(ended).toMatchObject({ status: 'completed' });
    expect((await within(talking.closed, 'the close after the drain')).code).toBe(1001);
    expect(await within(exit, 'the primary exit')).toMatchObject({ code: 0 });
    expect(instance.logs().filter((l) => l.msg === 'second signal: exiting now')).toEqual([]);
  });
});
