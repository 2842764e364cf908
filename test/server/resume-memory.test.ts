/**
 * The in-memory resume store within RESUME_MEMORY_MB: clients that fill
 * conversations and drop them one after another cannot fill the server's
 * memory; the oldest records are let go.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { metricValue, scrape } from '../helpers/http.js';
import { connect } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

describe('the in-memory resume store under conversations that fill it', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /** A session that adds two items of 150,000 characters, then drops; its resume token. */
  async function fillAndDrop(server: TestServer): Promise<string> {
    const c = await connect(`${server.wsUrl}?character=plain&greeting=0`);
    const created = await c.next('session.created');
    for (let i = 0; i < 2; i++) {
      c.send({
        type: 'conversation.item.create',
        item: {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: `${i}`.repeat(150_000) }],
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
  }, 60_000);
});
