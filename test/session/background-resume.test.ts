/**
 * Background calls across a dropped connection and `?resume=`: resumed in
 * the same process, the call still running (or already ended) reaches the
 * resumed session; resumed on another instance, where it cannot be running,
 * it ends as interrupted. Either way: exactly one outcome in history, one
 * `troupe.background_tool.done`, and a follow-up that tells the user.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryResumeStore } from '../../src/server/resume-store.js';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { character } from '../helpers/characters.js';
import { metricValue, scrape } from '../helpers/http.js';
import { connect, type Received, type TestClient } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { chatBodies, userMessage } from '../helpers/session.js';
import { within } from '../helpers/wait.js';
import { startVoiceServer } from '../helpers/voice.js';

type Gate = { name: string; open: (value: string) => void };
const g = globalThis as unknown as {
  __troupeResumeGates?: Gate[];
  __troupeResumeWaiters?: Set<() => void>;
};

/** Opens the next running `lookup` call with `value`. */
function nextGate(): Promise<(value: string) => void> {
  const waiters = (g.__troupeResumeWaiters ??= new Set());
  return within(
    new Promise((resolve) => {
      const take = () => {
        const gate = (g.__troupeResumeGates ??= []).shift();
        if (!gate) return;
        waiters.delete(take);
        resolve(gate.open);
      };
      waiters.add(take);
      take();
    }),
    'a running lookup call',
  );
}

const AGENT = character({
  name: 'Agent',
  extra: `tools: [
    defineTool({
      name: 'lookup',
      description: 'Looks things up, slowly, in the background.',
      parameters: z.object({ query: z.string() }),
      background: true,
      handler: (_args, ctx) =>
        new Promise((resolve, reject) => {
          const g = globalThis;
          (g.__troupeResumeGates ??= []).push({ name: 'lookup', open: resolve });
          for (const w of [...(g.__troupeResumeWaiters ?? [])]) w();
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    }),
  ],`,
});

const say = (text: string): SimReply => ({ parts: [{ text }] });
const SCRIPT: SimScript = {
  rules: [
    { when: { background: true }, reply: say('Back: {{toolResult}}') },
    {
      when: { user: 'look', round: 0 },
      reply: { parts: [{ toolCall: { name: 'lookup', arguments: { query: 'trains' } } }] },
    },
    { when: { user: 'look' }, reply: say('On it.') },
  ],
  fallback: say('Okay.'),
};

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function server(resumeStore = createMemoryResumeStore()): Promise<TestServer> {
  const t = await startVoiceServer({
    characters: { 'agent.ts': AGENT },
    script: SCRIPT,
    resumeStore,
  });
  servers.push(t);
  return t;
}

/** A session whose lookup is running, closed by its client; its resume token and call id. */
async function dropDuringLookup(t: TestServer): Promise<{ token: string; callId: string }> {
  const c = await connect(`${t.wsUrl}?character=agent`);
  const created = await c.next('session.created');
  const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
  c.send(userMessage('Please look up trains.'));
  c.send({ type: 'response.create' });
  const started = await c.next('troupe.tool_call.result', (e) => e.background === 'started');
  await c.next('response.done');
  // The connection drops (no close frame): the conversation may come back.
  c.ws.terminate();
  await c.closed;
  await t.waitForLog('session closed');
  return { token, callId: started.call_id as string };
}

async function resume(t: TestServer, token: string): Promise<TestClient> {
  const c = await connect(`${t.wsUrl}?resume=${token}`);
  await c.next('session.created');
  return c;
}

/** The one `troupe.background_tool.done` for `callId`, its follow-up's text, and the item. */
async function outcomeOf(c: TestClient, callId: string) {
  const done = await c.next('troupe.background_tool.done', (e) => e.call_id === callId);
  const item = c.events.find(
    (e) => e.type === 'conversation.item.done' && (e.item as { id: string }).id === done.item_id,
  ) as Received;
  const text = await c.next('response.output_text.done');
  await c.next('response.done');
  return { done, item: item.item as Record<string, unknown>, text: text.text as string };
}

function outcomes(c: TestClient, callId: string): number {
  return c.events.filter((e) => e.type === 'troupe.background_tool.done' && e.call_id === callId)
    .length;
}

describe('a background call and a resumed conversation', () => {
  it('in the same process: the call still running reports to the resumed session', async () => {
    const t = await server();
    const { token, callId } = await dropDuringLookup(t);
    const again = await resume(t, token);
    (await nextGate())('the 9:15 to Porto');
    const { done, item, text } = await outcomeOf(again, callId);
    expect(done).toMatchObject({ name: 'lookup', outcome: 'ok', output: 'the 9:15 to Porto' });
    expect(item).toMatchObject({ type: 'mcp_call', output: 'the 9:15 to Porto', error: null });
    expect(text).toMatch(/the 9:15 to Porto$/);
    expect(outcomes(again, callId)).toBe(1);
    const metrics = await scrape(t.url);
    expect(
      metricValue(metrics, 'troupe_tool_calls_total', { tool: 'lookup', mode: 'background' }),
    ).toBe(1);
    expect(
      t
        .logs()
        .filter(
          (l) => l.callId === callId && /^background tool call (done|failed)$/.test(String(l.msg)),
        ),
    ).toHaveLength(1);
    await again.close();
  });

  it('in the same process: a call that ended while the client was away is told on resume', async () => {
    const t = await server();
    const { token, callId } = await dropDuringLookup(t);
    (await nextGate())('the 10:40 to Faro');
    await t.waitForLog('background tool call done', (l) => l.callId === callId);
    const again = await resume(t, token);
    const { done, text } = await outcomeOf(again, callId);
    expect(done).toMatchObject({ outcome: 'ok', output: 'the 10:40 to Faro' });
    expect(text).toMatch(/the 10:40 to Faro$/);
    expect(outcomes(again, callId)).toBe(1);
    await again.close();
  });

  it('on another instance: the call is ended as interrupted, once, and the model can offer to retry', async () => {
    const store = createMemoryResumeStore();
    const first = await server(store);
    const second = await server(store);
    const { token, callId } = await dropDuringLookup(first);
    const again = await resume(second, token);
    const { done, item } = await outcomeOf(again, callId);
    expect(done).toMatchObject({ name: 'lookup', outcome: 'cancelled' });
    expect(done.output).toMatch(/^lookup was interrupted: the conversation was resumed/);
    expect(item).toMatchObject({
      type: 'mcp_call',
      output: null,
      error: { type: 'tool_execution_error' },
    });
    // The model read it as a background result (a user-role message after its "Started" tool message).
    const last = chatBodies(second.simulator).at(-1)!.messages.at(-1) as {
      role: string;
      content: string;
    };
    expect(last.role).toBe('user');
    expect(last.content).toContain('offer to run it again');
    expect(
      metricValue(await scrape(second.url), 'troupe_tool_background_interrupted_total', {
        tool: 'lookup',
      }),
    ).toBe(1);
    await second.waitForLog('background tool call lost on resume', (l) => l.callId === callId);
    // Resumed again (from the record the resumed session wrote): nothing is ended twice.
    const token2 = (
      again.events.find((e) => e.type === 'session.created')!.session as {
        troupe: { resume_token: string };
      }
    ).troupe.resume_token;
    await again.close();
    await second.waitForLog('session closed');
    const third = await resume(second, token2);
    await third.next(
      'conversation.item.added',
      (e) => (e.item as { id: string }).id === done.item_id,
    );
    // A round trip: anything the restore sent is here by now.
    third.send({ type: 'session.update', session: { type: 'realtime' } });
    await third.next('session.updated');
    expect(outcomes(third, callId)).toBe(0);
    await third.close();
  });
});
