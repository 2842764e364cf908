/**
 * The in-memory resume store within RESUME_MEMORY_MB: clients that fill
 * conversations and drop them one after another cannot fill the server's
 * memory; the oldest records are let go.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { metricValue, scrape } from '../helpers/http.js';
import { connect } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startInstance, type Instance } from '../deploy/processes.js';
import { within } from '../helpers/wait.js';

describe('the in-memory resume store under conversations that fill it', () => {
  let t: TestServer | undefined;
  let instance: Instance | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await instance?.stop();
    instance = undefined;
  });

  /** A session that adds `items` items of `chars` characters, then drops; its resume token. */
  async function fillAndDrop(
    server: { wsUrl: string },
    items = 2,
    chars = 150_000,
  ): Promise<string> {
    const c = await connect(`${server.wsUrl}?character=plain&greeting=0`);
    const created = await c.next('session.created');
    for (let i = 0; i < items; i++) {
      c.send({
        type: 'conversation.item.create',
        item: {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: `${i}`.repeat(chars) }],
        },
      });
      await c.next('conversation.item.done', undefined, 15_000);
    }
    await c.close();
    return (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
  }

  it('lets the oldest conversations go once RESUME_MEMORY_MB is full, and keeps serving', async () => {
    t = await startTestServer({ env: { RESUME_MEMORY_MB: '1' } });
    const server = t;
    const tokens: string[] = [];
    for (let i = 0; i < 5; i++) tokens.push(await fillAndDrop(server));
    await within(
      (async () => {
        for (;;) {
          const evicted = metricValue(
            await scrape(server.url),
            'troupe_resume_store_evictions_total',
          );
          if ((evicted ?? 0) >= 3) return;
          await new Promise((r) => setTimeout(r, 20));
        }
      })(),
      'the oldest records let go',
    );
    // The first conversation is gone: a fresh session and resume_failed, as for an expired token.
    const first = await connect(`${server.wsUrl}?resume=${tokens[0]}`);
    await first.next('session.created');
    expect((await first.next('error')).error).toMatchObject({ code: 'resume_failed' });
    await first.close();
    // The last one is still there.
    const last = await connect(`${server.wsUrl}?resume=${tokens[4]}`);
    await last.next('session.created');
    await last.next('conversation.item.added', (e) => JSON.stringify(e.item).includes('1111'));
    expect(last.events.map((e) => e.type)).not.toContain('error');
    await last.close();
  });

  it('with workers, counts and logs the records let go at once, and refuses one over the room alone, saying why', async () => {
    instance = await startInstance({
      WORKERS: '2',
      RESUME_MEMORY_MB: '1',
      LLM_BASE_URL: 'http://127.0.0.1:9/v1',
    });
    const server = instance;
    for (let i = 0; i < 5; i++) await fillAndDrop(server);
    await within(
      (async () => {
        for (;;) {
          const metrics = await scrape(server.url);
          if ((metricValue(metrics, 'troupe_resume_store_evictions_total') ?? 0) >= 3) return;
          await new Promise((r) => setTimeout(r, 20));
        }
      })(),
      'the records let go, counted in /metrics',
    );
    // In the primary's first minute too.
    await server.proc.waitFor(/"msg":"resume records let go for room/, 'the eviction line');
    // 3 × 200,000 characters: over the 1 MiB room on its own.
    const big = await fillAndDrop(server, 3, 200_000);
    await server.proc.waitFor(
      /"err":"a record of \d+ characters is over the in-memory store's 1048576[^"]*","msg":"resume save failed"/,
      'the refusal, with its reason, at the worker',
    );
    const errors = metricValue(await scrape(server.url), 'troupe_resume_store_errors_total', {
      op: 'save',
    });
    // Each write of it is refused: its last item's, written at once, and the close's.
    expect(errors).toBeGreaterThanOrEqual(1);
    expect(errors).toBeLessThanOrEqual(2);
    const messages = server.logs().map((l) => l.msg);
    expect(messages).not.toContain('unhandled rejection (server kept running)');
    // Not an older state of it either: the client is told.
    const refused = await connect(`${server.wsUrl}?resume=${big}`);
    await refused.next('session.created');
    expect((await refused.next('error')).error).toMatchObject({ code: 'resume_failed' });
    await refused.close();
    // The sessions after it are saved as ever.
    const token = await fillAndDrop(server, 1, 10);
    const again = await connect(`${server.wsUrl}?resume=${token}`);
    await again.next('session.created');
    await again.next('conversation.item.added');
    expect(again.events.map((e) => e.type)).not.toContain('error');
    await again.close();
  });
});
