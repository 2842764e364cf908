import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_SCRIPT, startSimulator, type Simulator } from '../../src/testing/index.js';
import { startInstance, type Instance } from '../deploy/processes.js';
import { growingSamples, metricValue, request, scrape } from '../helpers/http.js';
import { connect, say, type TestClient } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';

interface WorkerState {
  id: number;
  pid: number;
  status: string;
  sessions?: number;
}

async function workers(url: string): Promise<WorkerState[]> {
  const health = (await request(`${url}/health`)).json<{ workers?: WorkerState[] }>();
  return health.workers ?? [];
}

/**
 * Asks /health until `done` holds. A request the router handed to a stopped
 * worker goes unanswered: it is given up after a while and asked again.
 */
async function healthUntil(url: string, done: (states: WorkerState[]) => boolean): Promise<void> {
  for (;;) {
    const answer = await request(`${url}/health`, { giveUpMs: 2_000 }).catch(() => undefined);
    const states = answer?.json<{ workers?: WorkerState[] }>().workers;
    if (states && done(states)) return;
  }
}

/** The samples of `before`'s counters and histograms that are lower, or gone, in `after`. */
function fallen(before: string, after: string): string[] {
  const later = growingSamples(after);
  return [...growingSamples(before)]
    .filter(([key, value]) => !((later.get(key) ?? -1) >= value))
    .map(([key, value]) => `${key}: ${value} → ${later.get(key)}`);
}

describe('npm start with WORKERS=2', () => {
  let sim: Simulator;
  let instance: Instance;
  const clients: TestClient[] = [];
  const tokens = new Map<TestClient, { id: string; token: string }>();

  beforeAll(async () => {
    sim = await startSimulator({ profile: 'vllm-hermes', script: DEMO_SCRIPT });
    instance = await startInstance({ WORKERS: '2', LLM_BASE_URL: sim.url });
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await instance?.stop();
    await sim?.close();
  });

  it('runs two workers that share the port, each reported by /health', async () => {
    const states = await workers(instance.url);
    expect(states).toHaveLength(2);
    expect(states.map((w) => w.status)).toEqual(['ok', 'ok']);
    expect(new Set(states.map((w) => w.pid)).size).toBe(2);
    // The primary listens; the workers say they take its connections, not that they listen.
    // A worker's line may reach the output after its primary's `workers ready`.
    await instance.proc.waitFor(
      /("msg":"worker taking connections"[^]*){2}/,
      "both workers' lines",
    );
    const lines = instance.logs().map((l) => l.msg);
    expect(lines.filter((m) => m === 'worker taking connections')).toHaveLength(2);
    expect(lines).not.toContain('server listening');
  });

  it('spreads sessions over the workers and aggregates every worker in /metrics', async () => {
    for (let i = 0; i < 4; i++) {
      const c = await connect(`${instance.wsUrl}?character=plain`);
      clients.push(c);
      const created = await c.next('session.created');
      const session = created.session as { id: string; troupe: { resume_token: string } };
      tokens.set(c, { id: session.id, token: session.troupe.resume_token });
    }
    // The workers tell the primary of their sessions as they open: once it has heard of all four…
    await within(
      healthUntil(instance.url, (s) => s.reduce((n, w) => n + (w.sessions ?? 0), 0) === 4),
      'the primary told of the four sessions',
    );
    const states = await workers(instance.url);
    // …each went to the worker with the fewest sessions.
    expect(states.map((w) => w.sessions)).toEqual([2, 2]);
    // The instance's sessions, whichever worker answers.
    const health = (await request(`${instance.url}/health`)).json<{
      sessions: object;
      characters: { loaded: number };
    }>();
    expect(health.sessions).toEqual({ active: 4, max: 2000 });
    const metrics = await scrape(instance.url);
    expect(metricValue(metrics, 'troupe_sessions_active')).toBe(4);
    expect(metricValue(metrics, 'troupe_sessions_total', { character: 'plain' })).toBe(4);
    // Every worker loads the same characters: counted once, not once per worker.
    expect(metricValue(metrics, 'troupe_characters_loaded')).toBe(health.characters.loaded);
  });

  it('serves a turn on every worker', async () => {
    for (const c of clients) say(c, 'Hello there!');
    for (const c of clients) {
      const done = await c.next('response.done', undefined, 15_000);
      expect(done.response).toMatchObject({ status: 'completed' });
    }
  });

  it('closes a connection at once when its conversation is resumed on another worker', async () => {
    const workerOf = (id: string, msg: string) =>
      instance.logs().find((l) => l.msg === msg && l.session === id)?.worker;
    let across = 0;
    for (const old of [...clients]) {
      const { id, token } = tokens.get(old)!;
      const again = await connect(`${instance.wsUrl}?resume=${token}`);
      const created = await again.next('session.created', undefined, 15_000);
      expect((created.session as { id: string }).id).toBe(id);
      // Told and closed without waiting for anything it does next.
      expect((await old.next('error')).error).toMatchObject({ code: 'session_resumed_elsewhere' });
      expect((await within(old.closed, 'the old connection closed', 15_000)).code).toBe(4002);
      await instance.proc.waitFor(
        new RegExp(`"session":"${id}"[^\\n]*"msg":"session resumed"`),
        'the resumed line',
      );
      const next = created.session as { id: string; troupe: { resume_token: string } };
      tokens.set(again, { id, token: next.troupe.resume_token });
      clients[clients.indexOf(old)] = again;
      if (workerOf(id, 'session resumed') !== workerOf(id, 'session opened')) across++;
      if (across > 0) break;
    }
    // The router puts a new connection on the worker with fewer sessions: one resume crossed.
    expect(across).toBe(1);
  });

  it('hands over a reply cut by a resume on another worker, with what was said of it', async () => {
    const workerOf = (id: string, msg: string) =>
      instance.logs().find((l) => l.msg === msg && l.session === id)?.worker;
    sim.setLatency({ tokensPerSec: 5 });
    const fillers: TestClient[] = [];
    try {
      // The router gives a connection to the worker with the fewest sessions:
      // with the workers even, the old session makes its worker the fuller,
      // and the resume lands on the other.
      for (;;) {
        const counts = (await workers(instance.url)).map((w) => w.sessions ?? 0);
        if (Math.min(...counts) === Math.max(...counts)) break;
        const filler = await connect(`${instance.wsUrl}?character=plain`);
        await filler.next('session.created');
        fillers.push(filler);
      }
      const old = await connect(`${instance.wsUrl}?character=plain`);
      const created = await old.next('session.created');
      const session = created.session as { id: string; troupe: { resume_token: string } };
      say(old, 'Hello there!');
      const delta = (await old.next(
        'response.output_text.delta',
        undefined,
        15_000,
      )) as unknown as {
        item_id: string;
        delta: string;
      };
      await instance.proc.waitFor(
        new RegExp(`"session":"${session.id}"[^\\n]*"msg":"session opened"`),
        'the opened line',
      );
      const oldPid = workerOf(session.id, 'session opened');
      // The reply still streams on the old connection when the resume comes.
      const again = await connect(`${instance.wsUrl}?resume=${session.troupe.resume_token}`);
      await again.next('session.created', undefined, 15_000);
      expect((await old.next('error')).error).toMatchObject({ code: 'session_resumed_elsewhere' });
      const reply = await again.next(
        'conversation.item.added',
        (e) => (e.item as { id?: string }).id === delta.item_id,
      );
      expect(reply.item).toMatchObject({ role: 'assistant', status: 'incomplete' });
      expect(JSON.stringify(reply.item)).toContain(delta.delta.trim());
      await instance.proc.waitFor(
        new RegExp(`"session":"${session.id}"[^\\n]*"msg":"session resumed"`),
        'the resumed line',
      );
      expect(workerOf(session.id, 'session resumed')).not.toBe(oldPid);
      await again.close();
      await within(old.closed, 'the old connection closed', 15_000);
    } finally {
      sim.setLatency({});
      for (const f of fillers) await f.close();
    }
  });

  it('answers /metrics while a worker is stuck, counting it as it last answered', async () => {
    const before = await scrape(instance.url);
    const stuck = (await workers(instance.url))[0]!;
    process.kill(stuck.pid, 'SIGSTOP');
    try {
      // Once the primary finds it silent, the router hands it nothing more.
      await within(
        healthUntil(
          instance.url,
          (s) => s.find((w) => w.id === stuck.id)?.status === 'unresponsive',
        ),
        'the stopped worker reported unresponsive',
      );
      const during = await scrape(instance.url);
      expect(metricValue(during, 'troupe_metrics_stale_workers')).toBe(1);
      expect(fallen(before, during)).toEqual([]);
      await instance.proc.waitFor(
        /"msg":"worker's metrics not in time; its last ones are used"/,
        "the primary saying it used the stuck worker's last metrics",
      );
      // A scraper with a short timeout (Prometheus says it in a header) is waited for half of it.
      const quick = await request(`${instance.url}/metrics`, {
        headers: { 'X-Prometheus-Scrape-Timeout-Seconds': '0.4' },
      });
      expect(metricValue(quick.body, 'troupe_metrics_stale_workers')).toBe(1);
      await instance.proc.waitFor(
        /"waitMs":200,"msg":"worker's metrics not in time/,
        'a wait of 200 ms',
      );
    } finally {
      process.kill(stuck.pid, 'SIGCONT');
    }
    await within(
      healthUntil(instance.url, (s) => s.every((w) => w.status === 'ok')),
      'both workers ok again',
    );
    expect(metricValue(await scrape(instance.url), 'troupe_metrics_stale_workers')).toBe(0);
  });

  it('replaces a worker that dies; its clients see their socket close and resume on another worker', async () => {
    const metricsBefore = await scrape(instance.url);
    const before = await workers(instance.url);
    const victim = before[0]!;
    const readyLines = () => instance.logs().filter((l) => l.msg === 'worker ready').length;
    const readyBefore = readyLines();
    process.kill(victim.pid, 'SIGKILL');
    const closes = await within(
      Promise.race(clients.map((c) => c.closed.then((x) => ({ c, ...x })))),
      'the close of a client of the killed worker',
      20_000,
    );
    expect(closes.code).toBe(1006);
    await instance.proc.waitFor(
      new RegExp(`("msg":"worker ready"[^\\n]*\\n[^]*){${readyBefore + 1}}`),
      'the replacement worker ready',
    );
    expect(readyLines()).toBe(readyBefore + 1);
    const after = await workers(instance.url);
    expect(after).toHaveLength(2);
    expect(after.map((w) => w.pid)).not.toContain(victim.pid);
    expect(after.map((w) => w.status)).toEqual(['ok', 'ok']);
    // What the dead worker counted stays counted: no counter falls, so
    // Prometheus sees no reset.
    expect(fallen(metricsBefore, await scrape(instance.url))).toEqual([]);
    // And counting goes on from there: a new session adds one.
    const opened = (text: string) =>
      metricValue(text, 'troupe_sessions_total', { character: 'plain' });
    const extra = await connect(`${instance.wsUrl}?character=plain`);
    clients.push(extra);
    await extra.next('session.created');
    expect(opened(await scrape(instance.url))).toBe(opened(metricsBefore)! + 1);
    // The instance's uptime, whichever worker answers: never the new worker's own.
    for (let i = 0; i < 4; i++) {
      const { uptime_s, workers: states } = (await request(`${instance.url}/health`)).json<{
        uptime_s: number;
        workers: Array<{ uptime_s: number }>;
      }>();
      expect(uptime_s).toBeGreaterThanOrEqual(Math.max(...states.map((w) => w.uptime_s)));
    }

    // Its clients resume on the workers left, through the primary's store.
    const dropped = clients.filter((c) => c.ws.readyState !== c.ws.OPEN);
    expect(dropped.length).toBeGreaterThan(0);
    for (const c of dropped) {
      const { id, token } = tokens.get(c)!;
      const again = await connect(`${instance.wsUrl}?resume=${token}`);
      const created = await again.next('session.created', undefined, 15_000);
      expect((created.session as { id: string }).id).toBe(id);
      await again.next('conversation.item.added', (e) =>
        JSON.stringify(e.item).includes('Hello there!'),
      );
      expect(again.events.map((e) => e.type)).not.toContain('error');
      clients[clients.indexOf(c)] = again;
    }
  });

  it('drains every worker on SIGTERM: clients get 1001 and the primary exits 0', async () => {
    const c = await connect(`${instance.wsUrl}?character=plain`);
    await c.next('session.created');
    const open = clients.filter((x) => x.ws.readyState === x.ws.OPEN);
    const exit = instance.stop();
    const { code } = await within(c.closed, 'the close of a session on SIGTERM', 20_000);
    expect(code).toBe(1001);
    for (const x of open) expect((await within(x.closed, 'a close', 20_000)).code).toBe(1001);
    expect(await within(exit, 'the primary exit', 30_000)).toMatchObject({ code: 0 });
  });
});

describe('a primary killed outright', () => {
  let sim: Simulator;
  let instance: Instance;

  beforeAll(async () => {
    sim = await startSimulator({
      profile: 'vllm-hermes',
      latency: { ttftMs: 50, tokensPerSec: 40 },
      script: {
        rules: [
          {
            when: { user: 'long story' },
            reply: {
              parts: [{ text: Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ') }],
            },
          },
        ],
      },
    });
    instance = await startInstance({ WORKERS: '2', LLM_BASE_URL: sim.url });
  });

  afterAll(async () => {
    // Workers still here (the test failed): the pids their log lines give.
    for (const line of instance?.logs() ?? []) {
      if (line.msg !== 'worker ready' || typeof line.pid !== 'number') continue;
      try {
        process.kill(line.pid, 'SIGKILL');
      } catch {
        // Gone, as they should be.
      }
    }
    await sim?.close();
  });

  it('leaves its workers to finish their replies and close with 1001, not cut them', async () => {
    const c = await connect(`${instance.wsUrl}?character=plain`);
    await c.next('session.created');
    say(c, 'Tell me a long story.');
    await c.next('response.output_text.delta');
    process.kill(instance.proc.child.pid!, 'SIGKILL');
    const done = (await c.next('response.done')).response as { status: string };
    expect(done.status).toBe('completed');
    const { code } = await within(c.closed, 'the close after the reply');
    expect(code).toBe(1001);
    // Each worker drains and exits by itself: the output they share with the dead primary ends.
    const out = instance.proc.child.stdout!;
    if (!out.readableEnded) {
      await within(new Promise((ended) => out.once('end', ended)), 'both workers exiting');
    }
    const said = (msg: string) => instance.logs().filter((l) => l.msg === msg).length;
    expect(said('primary gone: draining')).toBe(2);
    expect(said('server stopped')).toBe(2);
    // Nothing waited for the dead primary to answer (its last saves failed at once).
    const logs = JSON.stringify(instance.logs());
    expect(logs).not.toContain('did not answer within');
    expect(logs).not.toContain('ERR_IPC_CHANNEL_CLOSED');
  });
});

describe('a worker stopped on its own (SIGTERM to its pid)', () => {
  let sim: Simulator;
  let instance: Instance;

  beforeAll(async () => {
    sim = await startSimulator({ profile: 'vllm-hermes', script: DEMO_SCRIPT });
    instance = await startInstance({ WORKERS: '2', LLM_BASE_URL: sim.url });
  });

  afterAll(async () => {
    await instance?.stop();
    await sim?.close();
  });

  it('is replaced as it begins to drain, and its clean end is not counted as a crash', async () => {
    const [first] = await workers(instance.url);
    const c = await connect(`${instance.wsUrl}?character=plain`);
    await c.next('session.created');
    process.kill(first!.pid, 'SIGTERM');
    await instance.proc.waitFor(/"msg":"worker stopped[";]/, 'the worker stopping');
    const said = (msg: string) => instance.logs().filter((l) => l.msg === msg);
    // Replaced once: as it began to drain (when it said so first), or as it ended.
    expect(
      said('worker draining on its own; starting another').length +
        said('worker stopped; starting another').length,
    ).toBe(1);
    expect(said('worker died; starting another')).toEqual([]);
    // Two workers serve again, the new one among them.
    await healthUntil(
      instance.url,
      (states) =>
        states.length === 2 &&
        states.every((w) => w.status === 'ok') &&
        !states.some((w) => w.pid === first!.pid),
    );
    await c.close();
  });
});
