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
import { TOOL_INTERRUPTED_OUTPUT } from '../../src/tools/constants.js';
import { characterDir } from '../helpers/characters.js';
import { connect, say, type Received, type TestClient } from '../helpers/realtime-client.js';
import { within } from '../helpers/wait.js';
import {
  BOOKER,
  BOOK_STORY_LINE,
  STORY,
  STORY_SCRIPT,
  WEATHER_STORY_LINE,
} from '../helpers/story.js';

/** The text deltas a client has had, joined. */
function textOf(client: TestClient): string {
  return client.events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta as string)
    .join('');
}

type Message = { role: string; content: string | null };

/** The messages of the reply under way as the store's records have it (their heads), if one has it. */
async function storedReply(redis: Redis): Promise<Message[] | undefined> {
  const keys = await redis.keys('troupe:resume:*');
  for (const key of keys) {
    if ((await redis.type(key)) !== 'hash') continue;
    const head = await redis.hget(key, 'head');
    if (head === null) continue;
    const record = JSON.parse(head) as {
      state?: { conversation?: { reply?: { messages: Message[] } } };
    };
    const reply = record.state?.conversation?.reply;
    if (reply) return reply.messages;
  }
  return undefined;
}

type Announced = { id: string; type: string; role?: string } & Record<string, unknown>;

/**
 * SIGKILLs `doomed` under `client`, resumes `token` on `survivor`, and
 * returns the new client with the items it was announced (it sends a
 * `session.update` first, so they come before its answer).
 */
async function killAndResume(
  doomed: Instance,
  client: TestClient,
  survivor: Instance,
  token: string,
): Promise<{ again: TestClient; created: Received; closeCode: number; items: Announced[] }> {
  await doomed.stop('SIGKILL');
  const { code: closeCode } = await within(client.closed, 'the close of the killed instance');
  const again = await connect(`${survivor.wsUrl}?resume=${token}`);
  const created = await again.next('session.created');
  again.send({ type: 'session.update', session: {} });
  await again.next('session.updated');
  const items = again.events
    .filter((e) => e.type === 'conversation.item.added')
    .map((e) => e.item as Announced);
  return { again, created, closeCode, items };
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
    instances.push(...(await Promise.all([startInstance(env('50')), startInstance(env('50'))])));
  });

  /** Two instances' settings: the simulator, Redis, the reply written every `replySaveMs`. */
  const env = (replySaveMs: string) => ({
    WORKERS: '1',
    LLM_BASE_URL: sim.url,
    REDIS_URL: redisProc.url,
    RESUME_REPLY_SAVE_MS: replySaveMs,
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    for (const i of instances) await i.stop('SIGKILL').catch(() => undefined);
    redis?.disconnect();
    await redisProc?.close();
    await sim?.close();
  });

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
        while (
          (await storedReply(redis))?.at(-1)?.content !== textOf(client) ||
          textOf(client) === ''
        ) {
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

    const {
      again,
      created: resumed,
      closeCode,
      items,
    } = await killAndResume(doomed, client, survivor, session.troupe.resume_token);
    clients.push(again);
    expect(closeCode).toBe(1006);
    expect((resumed.session as { id: string }).id).toBe(session.id);
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
  });

  it("keeps a round of the server's tools that ended before the kill: the tool is not run again", async () => {
    await redis.flushall();
    // A period longer than the test: only the round of tools asks for a write.
    const [doomed, survivor] = await Promise.all([
      startInstance(env('60000')),
      startInstance(env('60000')),
    ]);
    instances.push(doomed, survivor);
    const client = await connect(`${doomed.wsUrl}?character=weather`);
    clients.push(client);
    const created = await client.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    // The tool round is answered; the reply after it is asked and stalls before a word.
    const asks = sim.requests.length;
    sim.injectFault({ type: 'none' });
    sim.injectFault({ type: 'stall', afterChunks: 0 });
    say(client, WEATHER_STORY_LINE);
    const completed = await client.next('response.mcp_call.completed');
    await within(
      (async () => {
        const stalled = () => sim.requests.slice(asks).some((r) => r.fault?.type === 'stall');
        while ((await storedReply(redis))?.length !== 2 || !stalled()) await sleep(20);
      })(),
      'the round of tools in Redis, the next round asked',
    );
    expect(textOf(client)).toBe('');

    const { again, items } = await killAndResume(doomed, client, survivor, token);
    clients.push(again);
    expect(items.slice(-2)).toMatchObject([
      { role: 'user' },
      { id: completed.item_id, type: 'mcp_call', name: 'get_current_weather' },
    ]);
    expect(items.at(-1)!.output).toContain('Glasgow');

    // Asked again, the model reads the call and its result, and goes on to the story.
    again.send({ type: 'response.create' });
    const done = await again.next('response.done');
    expect((done.response as { status: string }).status).toBe('completed');
    expect(textOf(again)).toBe(STORY);
    expect(again.events.map((e) => e.type)).not.toContain('response.mcp_call.completed');
    const body = sim.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body as {
      messages: Message[];
    };
    expect(body.messages.slice(-3).map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
  });

  it("keeps a round of the server's tools killed while it runs: the model reads that it was cut", async () => {
    await redis.flushall();
    const chars = await characterDir({ 'booker.ts': BOOKER });
    try {
      // A period longer than the test: only the round of tools asks for a write.
      const booking = { ...env('60000'), CHARACTERS_DIR: chars.dir };
      const [doomed, survivor] = await Promise.all([
        startInstance(booking),
        startInstance(booking),
      ]);
      instances.push(doomed, survivor);
      const client = await connect(`${doomed.wsUrl}?character=booker`);
      clients.push(client);
      const created = await client.next('session.created');
      const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
      // book_table runs until its timeout: the instance is killed before.
      say(client, BOOK_STORY_LINE);
      const running = await client.next('response.mcp_call.in_progress');
      await within(
        (async () => {
          while ((await storedReply(redis))?.[1]?.content !== TOOL_INTERRUPTED_OUTPUT) {
            await sleep(20);
          }
        })(),
        'the running round in Redis',
      );

      const { again, items } = await killAndResume(doomed, client, survivor, token);
      clients.push(again);
      expect(items.at(-1)).toMatchObject({
        id: running.item_id,
        type: 'mcp_call',
        name: 'book_table',
        output: null,
        error: { type: 'tool_execution_error', message: TOOL_INTERRUPTED_OUTPUT },
      });
      // The operator sees it: a warning and a count by tool.
      await survivor.proc.waitFor(
        /"tools":\["book_table"\],"msg":"tool calls cut off by a stop, resumed as interrupted"/,
        'the warning of the call cut off',
      );
      const metrics = await (await fetch(`${survivor.url}/metrics`)).text();
      expect(metrics).toContain('troupe_resume_tools_interrupted_total{tool="book_table"} 1');

      // Asked again, the model reads that the call was cut while it ran.
      again.send({ type: 'response.create' });
      const done = await again.next('response.done');
      expect((done.response as { status: string }).status).toBe('completed');
      expect(textOf(again)).toBe(STORY);
      const body = sim.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body as {
        messages: Message[];
      };
      expect(body.messages.slice(-3)).toMatchObject([
        { role: 'user', content: BOOK_STORY_LINE },
        { role: 'assistant' },
        { role: 'tool', content: TOOL_INTERRUPTED_OUTPUT },
      ]);
    } finally {
      await chars.cleanup();
    }
  });
});
