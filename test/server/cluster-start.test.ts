/**
 * A worker killed while the instance starts (the OOM killer, kill -9) is
 * replaced, as a worker that dies later is; only a worker that exits on its
 * own before any was ready (a bad characters folder) stops the instance. A
 * worker that dies while the instance stops makes the stop a failure.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEMO_SCRIPT, startSimulator } from '../../src/testing/index.js';
import { npmStartArgs, startProcess } from '../deploy/processes.js';
import { request } from '../helpers/http.js';
import { within } from '../helpers/wait.js';

/** The processes `pid` started (Linux). */
function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** The pid of a worker just forked, long before it is ready (Node and its modules still load). */
async function forkedWorker(proc: ReturnType<typeof startProcess>): Promise<number> {
  await proc.waitFor(/"msg":"starting workers"/, 'the primary forking');
  return within(
    (async () => {
      for (;;) {
        const pids = children(proc.child.pid!);
        if (pids.length > 0) return pids[0]!;
        await new Promise((r) => setTimeout(r, 5));
      }
    })(),
    'a worker process',
  );
}

/** Runs `body` on `npm start` with two workers on the simulator, no speech engines; stops both after. */
async function withTwoWorkers(
  body: (proc: ReturnType<typeof startProcess>) => Promise<void>,
): Promise<void> {
  const sim = await startSimulator({ script: DEMO_SCRIPT });
  const proc = startProcess(process.execPath, npmStartArgs(), {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      WORKERS: '2',
      HOST: '127.0.0.1',
      PORT: '0',
      LLM_BASE_URL: sim.url,
      CHARACTERS_DIR: 'characters',
      CHARACTERS_WATCH: 'false',
      STT_PROVIDER: 'none',
      TTS_PROVIDER: 'none',
      LOG_LEVEL: 'info',
    },
  });
  try {
    await body(proc);
  } finally {
    proc.child.kill('SIGKILL');
    await sim.close();
  }
}

describe('npm start with WORKERS=2, a worker killed while it starts', () => {
  it('starts another in its place, and the instance serves', () =>
    withTwoWorkers(async (proc) => {
      // A worker just forked, long before it is ready (Node and its modules still load).
      const worker = await forkedWorker(proc);
      process.kill(worker, 'SIGKILL');
      await proc.waitFor(/"msg":"worker died; starting another"/, 'the killed worker replaced');
      const ready = await proc.waitFor(
        /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*"msg":"workers ready"/,
        'every worker ready',
      );
      const health = (await request(`${ready[1]}/health`)).json<{ workers: unknown[] }>();
      expect(health.workers).toHaveLength(2);
      expect(proc.output()).not.toContain('worker failed to start');
      proc.child.kill('SIGTERM');
      expect(await within(proc.exited, 'the instance stopped')).toMatchObject({ code: 0 });
    }));
});

describe('npm start with WORKERS=2, SIGTERM while the workers start', () => {
  it('stops them (one may die of the signal before it can take it) and exits 0', () =>
    withTwoWorkers(async (proc) => {
      await forkedWorker(proc);
      proc.child.kill('SIGTERM');
      expect(await within(proc.exited, 'the instance stopped')).toMatchObject({ code: 0 });
      expect(proc.output()).toContain('"msg":"all workers stopped"');
      expect(proc.output()).not.toContain('worker died while stopping');
    }));
});

describe('npm start with WORKERS=2, a worker killed while the instance stops', () => {
  it('says so, and exits 1 once the other has stopped', () =>
    withTwoWorkers(async (proc) => {
      const first = await proc.waitFor(/"pid":(\d+),"msg":"worker ready"/, 'a worker ready');
      await proc.waitFor(/"msg":"workers ready"/, 'every worker ready');
      // Held still, it cannot drain; the other stops, then this one is killed mid-stop.
      const held = Number(first[1]);
      process.kill(held, 'SIGSTOP');
      try {
        proc.child.kill('SIGTERM');
        await proc.waitFor(/"msg":"worker stopped"/, 'the other worker stopped');
      } finally {
        // Also when the wait fails: a stopped process would never see its primary go.
        process.kill(held, 'SIGKILL');
      }
      expect(await within(proc.exited, 'the instance stopped')).toMatchObject({ code: 1 });
      expect(proc.output()).toMatch(/"signal":"SIGKILL","msg":"worker died while stopping"/);
      expect(proc.output()).toContain('"msg":"all workers stopped"');
    }));
});
