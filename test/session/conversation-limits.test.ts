/**
 * A client that floods the conversation with items between responses: the
 * session refuses past its caps with a clear error and keeps working.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MAX_CONVERSATION_BYTES, MAX_CONVERSATION_ITEMS } from '../../src/session/conversation.js';
import type * as Memory from '../../src/session/memory.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, nextError, openSession, turn, userMessage } from '../helpers/session.js';

/** The memory's share of its limit as the session sees it: the real one unless a test sets it. */
const memory = vi.hoisted(() => ({ share: undefined as number | undefined }));
vi.mock('../../src/session/memory.js', async (importOriginal) => {
  const real = await importOriginal<typeof Memory>();
  return { ...real, memoryShare: () => memory.share ?? real.memoryShare() };
});

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

describe('conversation caps', () => {
  it('refuses items past the most a session keeps, and takes one again after a delete', async () => {
    const c = await openSession(t, 'character=plain');
    const batch = 100;
    // Every item counts, the greeting too: send one more than fits.
    for (let sent = 0; sent <= MAX_CONVERSATION_ITEMS; sent += batch) {
      const end = Math.min(sent + batch, MAX_CONVERSATION_ITEMS + 1);
      for (let i = sent; i < end; i++) c.send(userMessage(`m${i}`, { id: `item_${i}` }));
      if (end <= MAX_CONVERSATION_ITEMS - batch) {
        // A bounded backlog: wait for the batch's last item before the next one.
        const id = `item_${end - 1}`;
        await c.next('conversation.item.done', (e) => (e.item as { id: string }).id === id);
      }
    }
    const refused = await nextError(c, 'conversation_full');
    expect(refused.message).toContain(`${MAX_CONVERSATION_ITEMS} items`);
    expect(refused.message).toContain('conversation.item.delete');
    const accepted = c.events.filter(
      (e) =>
        e.type === 'conversation.item.done' &&
        String((e.item as { id: string }).id).startsWith('item_'),
    ).length;
    expect(accepted).toBeGreaterThan(MAX_CONVERSATION_ITEMS - batch);
    expect(accepted).toBeLessThanOrEqual(MAX_CONVERSATION_ITEMS);

    c.send({ type: 'conversation.item.delete', item_id: 'item_0' });
    await c.next('conversation.item.deleted');
    c.send(userMessage('room again', { id: 'item_again' }));
    await c.next('conversation.item.done', (e) => (e.item as { id: string }).id === 'item_again');
    c.close();
  });

  it('refuses items past the byte cap, and a response still runs', async () => {
    const c = await openSession(t, 'character=plain');
    const text = 'x'.repeat(900 * 1024);
    const fits = Math.floor(MAX_CONVERSATION_BYTES / text.length);
    for (let i = 0; i < fits - 1; i++) {
      c.send(userMessage(text, { id: `big_${i}` }));
      await c.next('conversation.item.done', (e) => (e.item as { id: string }).id === `big_${i}`);
    }
    c.send(userMessage(text));
    c.send(userMessage(text));
    const refused = await nextError(c, 'conversation_full');
    expect(refused.message).toContain('MiB');
    // The model is not asked about 30 MB of x: each response trims history to the
    // context budget; what matters is that the session still answers.
    const events = await turn(c, 'Hello?');
    expect(doneOf(events).status).toBe('completed');
    c.close();
  });

  it("refuses items while the process's heap is near its limit, and takes them again after", async () => {
    const c = await openSession(t, 'character=plain');
    memory.share = 0.95;
    try {
      c.send(userMessage('one more line', { id: 'while_full' }));
      const refused = await nextError(c, 'server_memory_full');
      expect(refused.message).toContain('95% of its limit');
      expect(refused.message).toContain('nothing was added');
    } finally {
      memory.share = undefined;
    }
    c.send(userMessage('one more line', { id: 'after' }));
    await c.next('conversation.item.done', (e) => (e.item as { id: string }).id === 'after');
    expect(
      c.events.some(
        (e) =>
          e.type === 'conversation.item.done' && (e.item as { id: string }).id === 'while_full',
      ),
    ).toBe(false);
    c.close();
  });
});
