/**
 * A process killed outright (SIGKILL) while a reply streams: the reply's
 * checkpoint in Redis (RESUME_REPLY_SAVE_MS) brings back what the client
 * had of it, cut there, on another instance; the next reply reads it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/testing/index.js';
import {
  needs,
  startInstance,
  startRedis,
  type Instance,
  type RedisProc,
} from '../deploy/processes.js';
import { connect, say, type Received, type TestClient } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';
import { STORY, STORY_SCRIPT } from '../helpers/story.js';

/** The text deltas a client has had, joined. */
function textOf(client: TestClient): string {
  return client.events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta as string)
    .join('');
}

/** The reply under way as the store's records have it (their heads), if one has it. */
async function storedReply(redis: Redis): Promise<string | undefined> {
  const keys = await redis.keys('troupe:resume:*');
  for (const key of keys) {
    if ((await redis.type(key)) !== 'hash') continue;
    const head = await redis.hget(key, 'head');
    if (head === null) continue;
    const record = JSON.parse(head) as {
      state?: { conversation?: { reply?: { messages: Array<{ content: string }> } } };
    };
    const reply = record.state?.conversation?.reply;
    if (reply) return reply.messages.at(-1)?.content;
  }
  return undefined;
}

describe.runIf(needs('redis-server'))('a reply under way when its process is killed', () => {
  let sim: Simulator;
  let redisProc: RedisProc;
  let redis: Redis;
  const instances: Instance[] = [];
  const clients: TestClient[] = [];

  beforeAll(async () => {
    sim = await startSimulator({
      profile: 'vllm-hermes',
      script: STORY_SCRIPT,
    });
    redisProc = await startRedis();
    redis = new Redis(redisProc.url, { lazyConnect: true });
    await redis.connect();
    const env = {
      WORKERS: '1',
      LLM_BASE_URL: sim.url,
      REDIS_URL: redisProc.url,
      RESUME_REPLY_SAVE_MS: '50',
    };
    instances.push(...(await Promise.all([startInstance(env), startInstance(env)])));
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) await c.close();
    for (const i of instances) await i.stop('SIGKILL').catch(() => undefined);
    redis?.disconnect();
    await redisProc?.close();
    await sim?.close();
  }, 60_000);

  it('resumes on another instance with what the client had of the reply, cut there', async () => {
    const [doomed, survivor] = instances as [Instance, Instance];
    const client = await connect(`${doomed.wsUrl}?character=plain`);
    clients.push(client);
    const created = await client.next('session.created');
    const session = created.session as { id: string; troupe: { resume_token: string } };
    // The reply stops after a few chunks and the stream stays open: it is under way.
    sim.injectFault({ type: 'stall', afterChunks: 6 });
    say(client, 'Tell me a story');
    await client.next('response.output_text.delta');
    // Its checkpoint reaches Redis; the stream has stalled, so the text stops growing.
    await within(
      (async () => {
        while ((await storedReply(redis)) !== textOf(client) || textOf(client) === '') {
          await sleep(20);
        }
      })(),
      'the reply under way in Redis',
    );
    const said = textOf(client);
    expect(STORY.startsWith(said) && said.length < STORY.length).toBe(true);
    const item = (
      client.events.find((e) => e.type === 'response.output_item.added') as {
        item: { id: string };
      } & Received
    ).item;

    await doomed.stop('SIGKILL');
    expect((await within(client.closed, 'the close of the killed instance')).code).toBe(1006);

    const again = await connect(`${survivor.wsUrl}?resume=${session.troupe.resume_token}`);
    clients.push(again);
    const resumed = await again.next('session.created');
    expect((resumed.session as { id: string }).id).toBe(session.id);
    again.send({ type: 'session.update', session: {} });
    await again.next('session.updated');
    const items = again.events
      .filter((e) => e.type === 'conversation.item.added')
      .map((e) => e.item as { id: string; role?: string; status: string; content: unknown });
    expect(items.at(-1)).toMatchObject({
      id: item.id,
      role: 'assistant',
      status: 'incomplete',
      content: [{ type: 'output_text', text: said }],
    });
    expect(items.at(-2)).toMatchObject({ role: 'user' });
    expect(again.events.map((e) => e.type)).not.toContain('error');

    // Asked again, the model reads the line and what had been said of the reply.
    again.send({ type: 'response.create' });
    const done = await again.next('response.done');
    expect((done.response as { status: string }).status).toBe('completed');
    const body = sim.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body as {
      messages: Array<{ role: string; content: string }>;
    };
    expect(body.messages.slice(-2)).toEqual([
      { role: 'user', content: 'Tell me a story' },
      { role: 'assistant', content: said },
    ]);
  }, 120_000);
});
