/**
 * `/metrics` as Prometheus reads it: Debian's `promtool` lints the text,
 * and a real Prometheus scrapes an instance with two workers while one of
 * them is killed. A counter that fell when its worker died would be a
 * reset to Prometheus, and `increase()` would count what never happened.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/index.js';
import { DEMO_SCRIPT, startSimulator, type Simulator } from '../../src/testing/index.js';
import { request, scrape } from '../helpers/http.js';
import { connect, type TestClient } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';
import {
  freePort,
  hasProgram,
  needs,
  startInstance,
  startProcess,
  type Instance,
  type Proc,
} from './processes.js';

/** `promtool check metrics` on a text: its complaints, empty when it has none. */
function promtool(text: string): string {
  const run = spawnSync(hasProgram('promtool')!, ['check', 'metrics'], { input: text });
  return `${run.stdout.toString()}${run.stderr.toString()}`.trim();
}

/** One instant query's result: its series, each with its labels and values (one, or a range's). */
async function query(
  url: string,
  q: string,
): Promise<Array<{ labels: Record<string, string>; value: number; values: number[] }>> {
  const answer = await request(`${url}/api/v1/query?query=${encodeURIComponent(q)}`);
  if (answer.status !== 200) throw new Error(`${q}: ${answer.status} ${answer.body}`);
  type Point = [number, string];
  const body = answer.json<{
    data: { result: Array<{ metric: Record<string, string>; value?: Point; values?: Point[] }> };
  }>();
  return body.data.result.map((r) => {
    const values = (r.values ?? [r.value!]).map((p) => Number(p[1]));
    return { labels: r.metric, value: values.at(-1)!, values };
  });
}

/** Asks `q` until `done` holds for its answer. */
async function queryUntil(
  url: string,
  q: string,
  done: (r: Array<{ value: number }>) => boolean,
): Promise<void> {
  while (!done(await query(url, q))) await new Promise((r) => setImmediate(r));
}

describe.runIf(needs('promtool'))('promtool check metrics', () => {
  it('finds nothing wrong with a server’s metrics', async () => {
    const metrics = createMetrics();
    expect(promtool(await metrics.registry.metrics())).toBe('');
  });
});

describe.runIf(needs('prometheus'))('Prometheus scraping WORKERS=2 while a worker dies', () => {
  let sim: Simulator;
  let instance: Instance;
  let prometheus: Proc;
  let promUrl: string;
  let dir: string;
  const clients: TestClient[] = [];

  beforeAll(async () => {
    sim = await startSimulator({ profile: 'vllm-hermes', script: DEMO_SCRIPT });
    instance = await startInstance({ WORKERS: '2', LLM_BASE_URL: sim.url });
    dir = await mkdtemp(path.join(tmpdir(), 'troupe-prometheus-'));
    const config = path.join(dir, 'prometheus.yml');
    await writeFile(
      config,
      [
        'global:',
        '  scrape_interval: 1s',
        '  scrape_timeout: 1s',
        'scrape_configs:',
        '  - job_name: troupe',
        '    static_configs:',
        `      - targets: ['127.0.0.1:${new URL(instance.url).port}']`,
      ].join('\n'),
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = startProcess(hasProgram('prometheus')!, [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ]);
    await prometheus.waitFor(/Server is ready to receive web requests/, 'prometheus ready');
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await prometheus?.stop();
    await instance?.stop();
    await sim?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lints clean through promtool, summed over the workers', async () => {
    expect(promtool(await scrape(instance.url))).toBe('');
  });

  it('sees no counter reset when a worker is killed and replaced', async () => {
    for (let i = 0; i < 4; i++) {
      const c = await connect(`${instance.wsUrl}?character=plain`);
      clients.push(c);
      await c.next('session.created');
    }
    const total = 'sum(troupe_sessions_total{job="troupe"})';
    await within(
      queryUntil(promUrl, total, (r) => r[0]?.value === 4),
      'Prometheus scraping the four sessions',
    );
    const health = (await request(`${instance.url}/health`)).json<{
      workers: Array<{ pid: number }>;
    }>();
    const victim = health.workers[0]!.pid;
    process.kill(victim, 'SIGKILL');
    await instance.proc.waitFor(/"msg":"worker died; starting another"/, 'the worker replaced');
    // Three scrapes of the instance after the replacement took its place.
    const scrapes = 'count_over_time(up{job="troupe"}[1h])';
    const [before] = await query(promUrl, scrapes);
    await within(
      queryUntil(promUrl, scrapes, (r) => (r[0]?.value ?? 0) >= before!.value + 3),
      'three more scrapes',
    );
    // Every sample Prometheus stored of every counter and histogram, in order: none fell.
    const growing = await query(
      promUrl,
      '{job="troupe",__name__=~".+(_total|_count|_bucket)"}[1h]',
    );
    expect(growing.length).toBeGreaterThan(20);
    const fell = growing.filter((s) => s.values.some((v, i) => i > 0 && v < s.values[i - 1]!));
    expect(fell.map((s) => s.labels)).toEqual([]);
    // And as Prometheus' own functions see them.
    for (const name of ['troupe_sessions_total', 'troupe_process_cpu_seconds_total']) {
      const resets = await query(promUrl, `sum(resets(${name}{job="troupe"}[1h]))`);
      expect(resets[0]?.value, name).toBe(0);
    }
    expect((await query(promUrl, total))[0]?.value).toBe(4);
  });
});
