/**
 * The shipped nginx configuration in front of two Troupe instances (separate
 * processes on loopback) sharing a redis-server: conversations run through
 * nginx, one instance is stopped with SIGTERM mid-turn, and its clients
 * reconnect through nginx with their resume tokens and carry on, on the
 * other instance, with their conversation.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_SCRIPT, startSimulator, type Simulator } from '../../src/testing/index.js';
import { httpAnswer, metricValue, rawUpgrade, request, scrape } from '../helpers/http.js';
import { connect, say, type TestClient } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';
import {
  needs,
  startInstance,
  startNginx,
  startRedis,
  type Instance,
  type NginxProc,
  type RedisProc,
} from './processes.js';

const CLIENTS = 6;
/** Long enough that the turns are surely running when the instance is stopped. */
const TTFT_MS = 400;

interface Conversation {
  name: string;
  client: TestClient;
  sessionId: string;
  token: string;
}

function tokenOf(created: Record<string, unknown>): string {
  const troupe = (created.session as { troupe?: { resume_token?: string } }).troupe;
  if (!troupe?.resume_token) throw new Error('session.created carries no resume token');
  return troupe.resume_token;
}

function historyText(body: unknown): string {
  return JSON.stringify((body as { messages?: unknown[] })?.messages ?? []);
}

describe.runIf(needs('nginx') && needs('redis-server'))(
  'nginx in front of two instances sharing Redis',
  () => {
    let sim: Simulator;
    let redis: RedisProc;
    const instances: Instance[] = [];
    let nginx: NginxProc;
    const conversations: Conversation[] = [];

    beforeAll(async () => {
      sim = await startSimulator({
        profile: 'vllm-hermes',
        script: DEMO_SCRIPT,
        latency: { ttftMs: TTFT_MS },
      });
      redis = await startRedis();
      const env = { WORKERS: '1', LLM_BASE_URL: sim.url, REDIS_URL: redis.url };
      instances.push(...(await Promise.all([startInstance(env), startInstance(env)])));
      // Two worker processes, as Debian's `auto` gives on two cores.
      nginx = await startNginx(
        instances.map((i) => `127.0.0.1:${i.port}`),
        2,
      );
    });

    afterAll(async () => {
      for (const c of conversations) await c.client.close();
      await nginx?.close();
      for (const i of instances) await i.stop();
      await redis?.close();
      await sim?.close();
    });

    it('proxies /health and conversations to both instances', async () => {
      const health = await request(`${nginx.url}/health`);
      expect(health.status).toBe(200);
      expect(health.json()).toMatchObject({ resume: { store: 'redis', ok: true } });
      for (let i = 0; i < CLIENTS; i++) {
        const client = await connect(`${nginx.wsUrl}?character=plain`);
        const created = await client.next('session.created', undefined, 15_000);
        const session = created.session as { id: string };
        conversations.push({
          name: `Visitor${i}`,
          client,
          sessionId: session.id,
          token: tokenOf(created),
        });
      }
      for (const c of conversations) say(c.client, `My name is ${c.name}.`);
      for (const c of conversations) {
        const done = await c.client.next('response.done', undefined, 20_000);
        expect(done.response).toMatchObject({ status: 'completed' });
      }
      const served = instances.map(
        (inst) =>
          conversations.filter((c) =>
            inst.logs().some((l) => l.msg === 'session opened' && l.session === c.sessionId),
          ).length,
      );
      // Each session's opening line names the client behind nginx, as nginx passed it on.
      const opened = instances
        .flatMap((inst) => inst.logs())
        .find((l) => l.msg === 'session opened');
      expect(opened).toMatchObject({ address: '127.0.0.1', forwarded_for: '127.0.0.1' });
      // One after the other, least_conn evens them out: nginx's two worker
      // processes share their counts through the upstream's zone.
      expect(served).toEqual([CLIENTS / 2, CLIENTS / 2]);
    });

    it("upgrades OpenAI's compatibility path too", async () => {
      const compat = await connect(
        `${nginx.wsUrl.replace('/v1/realtime', '/openai/v1/realtime')}?character=plain`,
      );
      const created = await compat.next('session.created', undefined, 15_000);
      expect(created.session).toMatchObject({ type: 'realtime' });
      await compat.close();
    });

    it("lets a browser's page served through nginx on its own port open a session", async () => {
      // A browser on http://localhost:PORT sends that Origin and that Host; the
      // server checks one against the other, so nginx must pass the port on.
      const port = new URL(nginx.url).port;
      const page = await connect(`${nginx.wsUrl}?character=plain`, {
        origin: `http://localhost:${port}`,
        headers: { Host: `localhost:${port}` },
      });
      await page.next('session.created');
      await page.close();
      expect((await page.closed).code).toBe(1000);
    });

    it('moves the clients of an instance stopped mid-turn to the other, conversation and all', async () => {
      const [victim, survivor] = instances as [Instance, Instance];
      const onVictim = conversations.filter((c) =>
        victim.logs().some((l) => l.msg === 'session opened' && l.session === c.sessionId),
      );
      expect(onVictim.length).toBeGreaterThan(0);
      for (const c of onVictim) say(c.client, 'Tell me something.');
      for (const c of onVictim) await c.client.next('response.created', undefined, 10_000);

      const exit = victim.stop();
      const resumeMs: number[] = [];
      const spentTokens: string[] = [];
      for (const c of onVictim) {
        // The running turn finishes (the drain), then the socket closes with 1001.
        const done = await c.client.next('response.done', undefined, 20_000);
        expect(done.response).toMatchObject({ status: 'completed' });
        expect((await within(c.client.closed, 'the close after the drain', 20_000)).code).toBe(
          1001,
        );
      }
      expect(await within(exit, 'the stopped instance exit', 30_000)).toMatchObject({ code: 0 });

      for (const c of onVictim) {
        const started = performance.now();
        const client = await connect(`${nginx.wsUrl}?resume=${c.token}`);
        const created = await client.next('session.created', undefined, 15_000);
        expect((created.session as { id: string }).id).toBe(c.sessionId);
        const token = tokenOf(created);
        expect(token).not.toBe(c.token);
        // The items come back, announced again.
        const items = [];
        for (let i = 0; i < 4; i++) items.push(await client.next('conversation.item.added'));
        expect(JSON.stringify(items)).toContain(`My name is ${c.name}.`);
        expect(client.events.map((e) => e.type)).not.toContain('error');

        say(client, `What is my name?`);
        await client.next('response.output_text.delta', undefined, 15_000);
        resumeMs.push(performance.now() - started);
        const done = await client.next('response.done', undefined, 15_000);
        expect(done.response).toMatchObject({ status: 'completed' });
        // The LLM saw the whole conversation.
        const last = [...sim.requests].reverse().find((r) => historyText(r.body).includes(c.name));
        expect(historyText(last?.body)).toContain('What is my name?');
        expect(
          survivor.logs().some((l) => l.msg === 'session resumed' && l.session === c.sessionId),
        ).toBe(true);
        spentTokens.push(c.token);
        c.client = client;
        c.token = token;
      }
      resumeMs.sort((a, b) => a - b);
      console.log(
        `resume through nginx after SIGTERM: ${resumeMs.length} conversations, reconnect → first delta ms: ${resumeMs.map((m) => Math.round(m)).join(', ')}`,
      );
      // A spent token opens nothing.
      const replay = await connect(`${nginx.wsUrl}?resume=${spentTokens[0]}`, {
        headers: { 'User-Agent': 'replay-of-a-spent-token' },
      });
      await replay.next('session.created');
      expect((await replay.next('error')).error).toMatchObject({ code: 'resume_failed' });
      await replay.close();
      // nginx logs the upgrade when it ends, by its path alone: no token
      // reaches the access log.
      const logged = await within(
        (async () => {
          for (;;) {
            const lines = (await readFile(nginx.accessLog, 'utf8')).split('\n');
            const line = lines.find((l) => l.includes('replay-of-a-spent-token'));
            if (line) return { line, all: lines.join('\n') };
            await new Promise((r) => setTimeout(r, 50));
          }
        })(),
        "nginx's access line for the replay",
      );
      expect(logged.line).toContain('"GET /v1/realtime HTTP/1.1" 101 ');
      expect(logged.all).not.toContain('resume=');
      for (const token of spentTokens) expect(logged.all).not.toContain(token);
      expect(
        metricValue(await scrape(survivor.url), 'troupe_resume_attempts_total', {
          outcome: 'resumed',
        }),
      ).toBe(onVictim.length);
    });
  },
);

describe.runIf(needs('nginx'))('nginx in front of two instances, one of them full', () => {
  let sim: Simulator;
  const instances: Instance[] = [];
  let nginx: NginxProc;
  const clients: TestClient[] = [];

  beforeAll(async () => {
    sim = await startSimulator({ script: DEMO_SCRIPT });
    const env = { WORKERS: '1', LLM_BASE_URL: sim.url };
    instances.push(
      ...(await Promise.all([
        startInstance({ ...env, MAX_SESSIONS: '1' }),
        startInstance({ ...env, MAX_SESSIONS: '3' }),
      ])),
    );
    // Two worker processes, as Debian's `auto` gives on two cores: the
    // upstream's zone lets them share their connection counts.
    nginx = await startNginx(
      instances.map((i) => `127.0.0.1:${i.port}`),
      2,
    );
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await nginx?.close();
    for (const i of instances) await i.stop();
    await sim?.close();
  });

  it('sends the sessions a full instance refuses to the other, and refuses with 503 when both are full', async () => {
    for (let i = 0; i < 4; i++) {
      const client = await connect(`${nginx.wsUrl}?character=plain`);
      clients.push(client);
      // A full instance answers 503 before the handshake and nginx tries the
      // other; a 101 followed by 1013 would leave this client without a session.
      await client.next('session.created', undefined, 15_000);
    }
    const active = await Promise.all(
      instances.map(async (inst) => {
        const health = (await request(`${inst.url}/health`)).json() as {
          sessions: { active: number };
        };
        return health.sessions.active;
      }),
    );
    expect(active).toEqual([1, 3]);
    // Both full: the client is refused before the handshake, not let in and closed.
    await expect(connect(`${nginx.wsUrl}?character=plain`)).rejects.toThrow(
      /Unexpected server response: 503/,
    );
    // The same with a retry hint, whether the last instance's own 503 or
    // nginx's answer once it skips both.
    for (let i = 0; i < 2; i++) {
      const socket = await rawUpgrade(Number(new URL(nginx.url).port), '/v1/realtime');
      const answer = await within(
        httpAnswer(socket),
        'the answer to an upgrade with both instances full',
      );
      socket.destroy();
      expect(answer).toMatch(/^HTTP\/1\.1 503 /);
      expect(answer).toMatch(/\r\nRetry-After: 2\r\n/i);
      expect(answer).toMatch(/server full|no Troupe instance can take a session now/);
    }
    const full = await Promise.all(
      instances.map(async (inst) =>
        metricValue(await scrape(inst.url), 'troupe_connections_rejected_total', {
          reason: 'full',
        }),
      ),
    );
    expect(full[0]).toBeGreaterThan(0);
  });

  it('gives an instance that refused a session new ones as soon as it has room', async () => {
    // The instance that holds one session has refused several by now. Its
    // client leaves: the next session is its, not refused because nginx
    // still counts the instance as failed.
    const [small] = instances as [Instance, Instance];
    const idOf = (c: TestClient): string | undefined =>
      (c.events.find((e) => e.type === 'session.created')?.session as { id: string } | undefined)
        ?.id;
    const onSmall = clients.filter((c) =>
      small.logs().some((l) => l.msg === 'session opened' && l.session === idOf(c)),
    );
    expect(onSmall).toHaveLength(1);
    await onSmall[0]!.close();
    await small.proc.waitFor(
      new RegExp(`"session":"${idOf(onSmall[0]!)}"[^\\n]*"msg":"session closed"`),
      'the session closed on the instance',
    );
    const next = await connect(`${nginx.wsUrl}?character=plain`);
    clients.push(next);
    const created = await next.next('session.created', undefined, 15_000);
    const id = (created.session as { id: string }).id;
    // On the instance that had room (the other is full).
    await small.proc.waitFor(
      new RegExp(`"session":"${id}"[^\\n]*"msg":"session opened"`),
      'the session opened on the instance with room',
    );
  });
});

describe.runIf(needs('nginx'))(
  'nginx in front of an instance of an older release and a new one',
  () => {
    let sim: Simulator;
    let instance: Instance;
    let old: Server;
    let nginx: NginxProc;
    const clients: TestClient[] = [];

    beforeAll(async () => {
      sim = await startSimulator({ script: DEMO_SCRIPT });
      instance = await startInstance({ WORKERS: '1', LLM_BASE_URL: sim.url });
      // As a release before OpenAI's compatibility path answers its upgrade.
      old = createServer((_req, res) => res.writeHead(404).end());
      old.on('upgrade', (_req, socket) =>
        socket.end(
          'HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\nWebSocket endpoint is /v1/realtime',
        ),
      );
      await new Promise<void>((resolve) => old.listen(0, '127.0.0.1', resolve));
      const { port } = old.address() as AddressInfo;
      nginx = await startNginx([`127.0.0.1:${port}`, `127.0.0.1:${instance.port}`], 2);
    });

    afterAll(async () => {
      for (const c of clients) await c.close();
      await nginx?.close();
      await instance?.stop();
      await new Promise((resolve) => old?.close(resolve));
      await sim?.close();
    });

    it("sends OpenAI's compatibility path on to the instance that has it", async () => {
      // The old one holds no connections: least_conn picks it for each new one.
      const compat = nginx.wsUrl.replace('/v1/realtime', '/openai/v1/realtime');
      for (let i = 0; i < 4; i++) {
        const client = await connect(`${compat}?character=plain`);
        clients.push(client);
        await client.next('session.created', undefined, 15_000);
      }
    });
  },
);
