import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createMemoryResumeStore,
  type RecordUpdate,
  type ResumeStore,
} from '../../src/server/resume-store.js';
import { character, characterDir } from '../helpers/characters.js';
import { connect, say } from '../helpers/realtime-client.js';
import { userMessage } from '../helpers/session.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';
import { freePort, needs, startRedis, type RedisProc } from '../deploy/processes.js';

/** A grace no turn here outlasts on any machine: it bounds a hang, it is not a race. */
const GRACE_MS = 600_000;

/** A memory store written as text at every save (as Redis is) that counts its writes. */
function countingStore(): ResumeStore & { saves: number } {
  const inner = createMemoryResumeStore({ readsLive: false });
  const store = {
    ...inner,
    kind: 'memory' as const,
    saves: 0,
    save(key: string, update: RecordUpdate, ttlS: number) {
      store.saves++;
      return inner.save(key, update, ttlS);
    },
  };
  return store;
}

/**
 * A redis-server on `port` (told to `started` at once, for the cleanup), two
 * servers sharing it (put in `servers`), and a client one turn into a
 * conversation on the first.
 */
async function conversingOnRedis(
  port: number,
  servers: TestServer[],
  started: (redis: RedisProc) => void,
) {
  const store = await startRedis(port);
  started(store);
  const env = { REDIS_URL: store.url };
  const first = await startTestServer({ env });
  const other = await startTestServer({ env });
  servers.push(first, other);
  const c = await connect(`${first.wsUrl}?character=plain&greeting=0`);
  const token = tokenOf(await c.next('session.created'));
  say(c, 'Hello there!');
  await c.untilDone();
  return { store, first, other, c, token };
}

/** Resumes `token` on `server`: the conversation comes back, with `text` in it, and no error. */
async function resumesWith(server: TestServer, token: string, text: string): Promise<void> {
  const again = await connect(`${server.wsUrl}?resume=${token}`);
  await again.next('session.created');
  await again.next('conversation.item.added', (e) => JSON.stringify(e.item).includes(text));
  expect(again.events.map((e) => e.type)).not.toContain('error');
  await again.close();
}

function tokenOf(created: Record<string, unknown>): string {
  return (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
}

describe('resume across a drain', () => {
  const servers: TestServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('writes what the client sent before refusing its response.create, so it resumes elsewhere with all of it', async () => {
    // Two instances sharing one store; the first drains while a long turn keeps it draining.
    const store = createMemoryResumeStore();
    const draining = await startTestServer({
      resumeStore: store,
      simulator: { latency: { ttftMs: 15_000 } },
    });
    const other = await startTestServer({ resumeStore: store });
    servers.push(draining, other);
    const busy = await connect(`${draining.wsUrl}?character=plain`);
    const token = tokenOf(await busy.next('session.created'));
    say(busy, 'Hello there!');
    await busy.next('response.created');

    const stopped = draining.server.shutdown(GRACE_MS);
    // The line and the request in one go: the refusal comes after the line is stored.
    say(busy, 'My name is Ada.');
    expect((await busy.next('error')).error).toMatchObject({ code: 'server_shutting_down' });
    // The running reply ends, then the session closes.
    expect((await busy.next('response.done')).response).toMatchObject({ status: 'completed' });
    expect((await within(busy.closed, 'the close after its reply')).code).toBe(1001);
    const again = await connect(`${other.wsUrl}?resume=${token}`);
    await again.next('session.created');
    await again.next('conversation.item.added', (e) =>
      JSON.stringify(e.item).includes('My name is Ada.'),
    );
    // Only the reply is asked for again: the line is there.
    again.send({ type: 'response.create' });
    expect((await again.next('response.done')).response).toMatchObject({ status: 'completed' });
    const history = JSON.stringify(other.simulator.requests.at(-1)?.body);
    expect(history.split('My name is Ada.').length - 1).toBe(1);
    await again.close();
    expect(await within(stopped, 'shutdown')).toBe(true);
  });

  it('refuses, rather than drops, what a client sends while its stopped session is being written', async () => {
    // A store whose writes wait while the gate is shut: the shutdown's last write takes that long.
    const inner = createMemoryResumeStore({ readsLive: false });
    let open = true;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const store: ResumeStore = {
      ...inner,
      async save(key, update, ttlS) {
        if (!open) await gate;
        return inner.save(key, update, ttlS);
      },
    };
    const t = await startTestServer({ resumeStore: store });
    servers.push(t);
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    await t.waitForLog('session opened');
    open = false;
    // A change whose write waits at the gate, then the shutdown: no reply runs, so the
    // session stops at once and its socket stays open until its last write is done.
    c.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'First.' }] },
    });
    await c.next('conversation.item.added', (e) => JSON.stringify(e.item).includes('First.'));
    const stopped = t.server.shutdown(GRACE_MS);
    await t.waitForLog('shutting down');
    c.send({
      type: 'conversation.item.create',
      event_id: 'late_item',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Second.' }] },
    });
    const error = await c.next('error');
    expect(error.error).toMatchObject({ code: 'server_shutting_down', event_id: 'late_item' });
    release();
    expect((await within(c.closed, 'the close after the last write')).code).toBe(1001);
    expect(await within(stopped, 'shutdown')).toBe(true);
  });

  /** A 300-word reply at `tokensPerSec`, on a server writing to a counting store: what the turn wrote. */
  async function longReplyTurn(
    replySaveMs: string,
    tokensPerSec: number,
  ): Promise<{ written: number; deltas: number; tookMs: number }> {
    const store = countingStore();
    const t = await startTestServer({
      resumeStore: store,
      env: { RESUME_REPLY_SAVE_MS: replySaveMs },
      simulator: { latency: { tokensPerSec } },
      script: {
        rules: [
          {
            reply: {
              parts: [{ text: Array.from({ length: 300 }, (_, i) => `word${i}`).join(' ') }],
            },
          },
        ],
      },
    });
    servers.push(t);
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    const before = store.saves;
    const startedAt = performance.now();
    say(c, 'Tell me a long story.');
    const events = await c.untilDone();
    const tookMs = performance.now() - startedAt;
    const deltas = events.filter((e) => e.type === 'response.output_text.delta').length;
    await c.close();
    await t.waitForLog('session closed');
    await t.server.shutdown(0);
    return { written: store.saves - before, deltas, tookMs };
  }

  it('writes the state after the changes of a turn, never per delta', async () => {
    // A long reply at a high rate: hundreds of deltas. Its own writes by the
    // clock (RESUME_REPLY_SAVE_MS) are off here, counted below.
    const { written, deltas } = await longReplyTurn('0', 2_000);
    expect(deltas).toBeGreaterThan(100);
    // The user's item, the response's start and end, the last write at the close: a
    // handful whatever the reply's length (the writes are debounced, so often fewer).
    expect(written).toBeLessThanOrEqual(6);
  });

  it('writes a reply under way by the clock: at most once per RESUME_REPLY_SAVE_MS, whatever its deltas', async () => {
    const { written, deltas, tookMs } = await longReplyTurn('100', 500);
    expect(deltas).toBeGreaterThan(100);
    // The turn's handful, and one a period at most while the reply ran.
    expect(written).toBeGreaterThan(2);
    expect(written).toBeLessThanOrEqual(6 + Math.ceil(tookMs / 100));
    expect(written).toBeLessThan(deltas / 2);
  });
});

describe.runIf(needs('redis-server'))('a drain while Redis is down (redis-server)', () => {
  const servers: TestServer[] = [];
  let redis: RedisProc | undefined;
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
    await redis?.close();
    redis = undefined;
  });

  const conversing = (port: number) =>
    conversingOnRedis(port, servers, (started) => (redis = started));

  it('holds each session until Redis is back and has its state, so the client resumes elsewhere', async () => {
    const port = await freePort();
    const { store, first: draining, other, c, token } = await conversing(port);
    // Redis stops (without persistence, as the compose file runs it): it comes back empty.
    await store.close();
    redis = undefined;
    // What the client adds meanwhile cannot be written: each try fails, and the log says so once.
    for (const line of ['One.', 'Two.', 'Three.']) {
      c.send(userMessage(line));
      await c.next('conversation.item.done', (e) => JSON.stringify(e.item).includes(line));
    }
    const drained = draining.server.shutdown(GRACE_MS);
    await draining.waitForLog('draining: the last state waits for the resume store');
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    redis = await startRedis(port);
    expect((await c.closed).code).toBe(1001);
    await drained;
    const said = draining.logs().map((l) => `${String(l.level)} ${String(l.msg)}`);
    expect(said).toContain('30 draining: the last state is written');
    expect(said).toContain('30 resume saves work again');
    expect(said.filter((m) => m === '40 resume save failed')).toHaveLength(1);

    await resumesWith(other, token, 'Three.');
  });

  it('holds a session through a Redis stall, trying its last write again until Redis takes it', async () => {
    const { store, first: draining, other, c, token } = await conversing(await freePort());
    // Redis stalls (not down: no reconnection will come to write the records again).
    store.proc.child.kill('SIGSTOP');
    try {
      c.send(userMessage('Said during the stall.'));
      await c.next('conversation.item.done', (e) => JSON.stringify(e.item).includes('stall'));
      const drained = draining.server.shutdown(GRACE_MS);
      await draining.waitForLog('draining: the last state waits for the resume store');
      expect(c.ws.readyState).toBe(c.ws.OPEN);
      store.proc.child.kill('SIGCONT');
      expect((await c.closed).code).toBe(1001);
      await drained;
    } finally {
      store.proc.child.kill('SIGCONT');
    }
    await resumesWith(other, token, 'Said during the stall.');
  });
});

describe.runIf(needs('redis-server'))(
  'a client that drops while Redis fails (redis-server)',
  () => {
    const servers: TestServer[] = [];
    let redis: RedisProc | undefined;
    afterEach(async () => {
      await Promise.all(servers.splice(0).map((s) => s.close()));
      await redis?.close();
      redis = undefined;
    });

    /** A conversation on Redis (see conversingOnRedis) whose client says two more lines once `fail` made Redis fail, then drops. */
    async function droppedDuring(port: number, fail: (store: RedisProc) => Promise<void>) {
      const { store, first, other, c, token } = await conversingOnRedis(
        port,
        servers,
        (started) => (redis = started),
      );
      await fail(store);
      for (const line of ['Said in the outage.', 'Said last.']) {
        c.send(userMessage(line));
        await c.next('conversation.item.done', (e) => JSON.stringify(e.item).includes(line));
      }
      // The client drops; the session's last write fails, and its state waits for the store.
      c.ws.terminate();
      await first.waitForLog('resume save failed at the close: the last state waits for the store');
      return { first, other, token };
    }

    const resumesAll = (other: TestServer, token: string) =>
      resumesWith(other, token, 'Said last.');

    it('writes its last state once Redis is back, so it resumes all of it', async () => {
      const port = await freePort();
      const { first, other, token } = await droppedDuring(port, async (store) => {
        await store.close();
        redis = undefined;
      });
      // Back empty (no persistence): the record is written again from memory.
      redis = await startRedis(port);
      await first.waitForLog('resume record written: the store took the last state');
      await resumesAll(other, token);
    });

    it('writes the state at the close though nothing changed, for a Redis that lost it (FLUSHALL)', async () => {
      const { store, other, c, token } = await conversingOnRedis(
        await freePort(),
        servers,
        (started) => (redis = started),
      );
      c.send(userMessage('Said last.'));
      // Acknowledged once its save is on its way to Redis, which runs it before this FLUSHALL.
      await c.next('conversation.item.done', (e) => JSON.stringify(e.item).includes('Said last.'));
      const direct = new Redis(store.url);
      await within(direct.flushall(), "Redis's FLUSHALL");
      await within(c.close(), "the client's close");
      // The close's write lands after the close itself: wait for Redis to hold a record again.
      await within(
        (async () => {
          while ((await direct.dbsize()) === 0) await new Promise((r) => setTimeout(r, 20));
        })(),
        'the record written at the close',
      );
      direct.disconnect();
      await resumesAll(other, token);
    });

    it('gives its last state to a resume on the same instance before Redis has it (Redis full, then not)', async () => {
      const { first, token } = await droppedDuring(await freePort(), async (store) => {
        const direct = new Redis(store.url);
        await direct.config('SET', 'maxmemory-policy', 'noeviction');
        await direct.config('SET', 'maxmemory', '1');
        direct.disconnect();
      });
      // Room again, and the resume comes before the retry: Redis holds the record incomplete.
      const direct = new Redis(redis!.url);
      await within(direct.config('SET', 'maxmemory', '0'), "Redis's CONFIG SET");
      direct.disconnect();
      await resumesWith(first, token, 'Said last.');
    });

    it('keeps a conversation an instance could not restore (no such character) for one that can', async () => {
      redis = await startRedis(await freePort());
      const chars = await characterDir({ 'other.ts': character({ name: 'Other' }) });
      try {
        const env = { REDIS_URL: redis.url };
        const first = await startTestServer({ env });
        const lacking = await startTestServer({ env: { ...env, CHARACTERS_DIR: chars.dir } });
        servers.push(first, lacking);
        const c = await connect(`${first.wsUrl}?character=plain&greeting=0`);
        const token = tokenOf(await c.next('session.created'));
        c.send(userMessage('Said last.'));
        await c.next('conversation.item.done');
        await c.close();
        await first.waitForLog('session closed');
        const refused = await connect(`${lacking.wsUrl}?resume=${token}`);
        const error = (await refused.next('error')).error as { code: string; message: string };
        expect(error.code).toBe('resume_failed');
        expect(error.message).toMatch(/"plain".*The conversation is kept/);
        await refused.close();
        await resumesAll(first, token);
      } finally {
        await chars.cleanup();
      }
    });

    it('writes its last state once a full Redis takes writes again, over the older record it kept', async () => {
      const { first, other, token } = await droppedDuring(await freePort(), async (store) => {
        const direct = new Redis(store.url);
        await direct.config('SET', 'maxmemory-policy', 'noeviction');
        await direct.config('SET', 'maxmemory', '1');
        direct.disconnect();
      });
      // Redis kept the record of the first turn; saves fail (OOM) until it has room.
      const direct = new Redis(redis!.url);
      await direct.config('SET', 'maxmemory', '0');
      direct.disconnect();
      await first.waitForLog('resume record written: the store took the last state');
      await resumesAll(other, token);
    });
  },
);

describe('what the client changed is stored before it hears so', () => {
  it('saves a created item, a deleted item and a settings change before their acknowledgements go out', async () => {
    // Each save's parts as the store received them, at the moment it did.
    const saved: string[] = [];
    const inner = createMemoryResumeStore({ readsLive: false });
    const store: ResumeStore = {
      ...inner,
      kind: 'memory',
      save(key, update, ttlS) {
        saved.push(`${update.head}${update.parts.join('')}`);
        return inner.save(key, update, ttlS);
      },
    };
    // A model that takes its time: a reply's own writes come long after.
    const t = await startTestServer({
      resumeStore: store,
      simulator: { latency: { ttftMs: 60_000 } },
    });
    try {
      const c = await connect(`${t.wsUrl}?character=plain&greeting=0`);
      await c.next('session.created');
      const has = (text: string) => saved.some((s) => s.includes(text));
      c.send({
        type: 'conversation.item.create',
        item: {
          id: 'item_line_one',
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: 'Remember the word heliotrope.' }],
        },
      });
      await c.next('conversation.item.added');
      // Before, the write waited 50 ms: a process killed then lost the line.
      expect(has('heliotrope')).toBe(true);
      c.send({ type: 'conversation.item.delete', item_id: 'item_line_one' });
      await c.next('conversation.item.deleted');
      expect(saved.at(-1)).not.toContain('heliotrope');
      c.send({
        type: 'session.update',
        session: { instructions: 'Speak like a lighthouse keeper.' },
      });
      await c.next('session.updated');
      expect(has('lighthouse keeper')).toBe(true);
      await c.close();
    } finally {
      await t.close();
    }
  });
});
