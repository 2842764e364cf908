/**
 * Handoffs and state: each character keeps its own `ctx.session.state`
 * (restored when the user is handed back, and after a resume), and a user
 * turn allows a bounded number of transfers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_HANDOFFS_PER_TURN } from '../../src/session/handoff.js';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { character, characterDir, type CharacterDir } from '../helpers/characters.js';
import { connect, say, type Received, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, openSession, textOf } from '../helpers/session.js';

const call = (name: string, args: Record<string, unknown> = {}): SimReply => ({
  parts: [{ toolCall: { name, arguments: args } }],
});
const says = (text: string): SimReply => ({ parts: [{ text }] });

const DESK = 'You are the desk.';
const COUNTER = 'You are the counter.';

const script: SimScript = {
  rules: [
    {
      when: { system: DESK, user: 'count', round: 0 },
      reply: call('transfer_to_counter', { reason: 'counting' }),
    },
    { when: { system: COUNTER, user: 'count', round: 0 }, reply: call('bump') },
    { when: { system: COUNTER, user: 'count' }, reply: says('Count is {{toolResult}}.') },
    {
      when: { system: COUNTER, user: 'back', round: 0 },
      reply: call('transfer_to_desk', { reason: 'done' }),
    },
    { when: { system: DESK, user: 'back' }, reply: says('Desk here.') },
    // A loop: each hands the user to the other until the limit says no.
    {
      when: { system: DESK, user: 'loop', toolResult: 'Error:' },
      reply: says('I will answer you myself.'),
    },
    {
      when: { system: DESK, user: 'loop' },
      reply: call('transfer_to_counter', { reason: 'loop' }),
    },
    {
      when: { system: COUNTER, user: 'loop' },
      reply: call('transfer_to_desk', { reason: 'loop' }),
    },
    {
      when: { system: DESK, user: 'moody', round: 0 },
      reply: call('transfer_to_moody', { reason: 'mood' }),
    },
  ],
  fallback: says('Hm?'),
};

const bump = `tools: [defineTool({
    name: 'bump',
    description: 'Adds one to the count and returns it.',
    parameters: z.object({}),
    handler: (_args, ctx) => {
      ctx.session.state.count = ((ctx.session.state.count as number | undefined) ?? 0) + 1;
      return String(ctx.session.state.count);
    },
  })],`;

let chars: CharacterDir;
let t: TestServer;
beforeAll(async () => {
  chars = await characterDir({
    'desk.ts': character({ name: 'Desk', prompt: DESK, extra: "handoffs: ['counter', 'moody']," }),
    // Its prompt generator works at load (the sample session) and fails in sessions.
    'moody.ts': character({
      name: 'Moody',
      extra: `makeSystemPrompt: (_i, ctx) => {
        if (ctx.sessionId !== 'load-check') {
          throw new Error('no postgres://admin:hunter2@db.internal/users (sk-abcdef1234567890) access_token=zz9981 {"token":"js0n5ecret"}\\nat x');
        }
        return 'You are moody.';
      },`,
    }),
    'counter.ts': character({
      name: 'Counter',
      prompt: COUNTER,
      extra: `handoffs: ['desk'], voice: { flite: 'kal' }, ${bump}`,
    }),
  });
  t = await startTestServer({ script, env: { CHARACTERS_DIR: chars.dir } });
});
afterAll(async () => {
  await t?.close();
  await chars?.cleanup();
});

/** Events up to the `response.done` of the response the new character gives (after `count` handoffs). */
async function through(c: TestClient, text: string, handoffs = 1): Promise<Received[]> {
  say(c, text);
  const events: Received[] = [];
  for (let i = 0; i <= handoffs; i++) events.push(...(await c.untilDone()));
  return events;
}

function characterOf(e: Received | undefined): string | undefined {
  return (e?.session as { character?: string } | undefined)?.character;
}

describe('handoffs and state', () => {
  it('keeps each character its own state, restored when the user is handed back', async () => {
    const c = await openSession(t, 'character=desk');
    expect(textOf(await through(c, 'count please'))).toBe('Count is 1.');
    // The counter serves now: no handoff this time.
    expect(textOf(await through(c, 'count again', 0))).toBe('Count is 2.');
    const back = await through(c, 'back to the desk');
    expect(characterOf(back.find((e) => e.type === 'session.updated'))).toBe('desk');
    expect(textOf(back)).toBe('Desk here.');
    // The counter's state waited for it.
    expect(textOf(await through(c, 'count once more'))).toBe('Count is 3.');
    await c.close();
  });

  it(`allows ${MAX_HANDOFFS_PER_TURN} transfers per user turn; past that the model gets a tool error`, async () => {
    const c = await openSession(t, 'character=desk');
    const events = await through(c, 'loop', MAX_HANDOFFS_PER_TURN);
    const dones = events.filter((e) => e.type === 'response.done');
    expect(dones).toHaveLength(MAX_HANDOFFS_PER_TURN + 1);
    const last = doneOf(events.slice(events.indexOf(dones.at(-2)!) + 1));
    const refused = last.output.find((i) => i.type === 'mcp_call');
    expect(refused).toMatchObject({ name: 'transfer_to_counter', server_label: 'desk' });
    expect(JSON.stringify(refused!.error ?? refused!.output)).toMatch(
      /handed over 2 times since their last message/,
    );
    expect(textOf(events.slice(events.indexOf(dones.at(-2)!) + 1))).toBe(
      'I will answer you myself.',
    );
    expect(last.status).toBe('completed');
    // A new user message starts the count again.
    expect(textOf(await through(c, 'count'))).toBe('Count is 1.');
    await c.close();
  });

  it('keeps the old character when the new one cannot start, and says so', async () => {
    const c = await openSession(t, 'character=desk');
    say(c, 'moody please');
    await c.untilDone();
    const error = await c.next('error');
    expect(error.error).toMatchObject({ type: 'server_error', code: 'handoff_failed' });
    expect(JSON.stringify(error.error)).toContain('Desk goes on');
    // Still the desk: no handoff, its own answer.
    expect(textOf(await through(c, 'back', 0))).toBe('Desk here.');
    await c.close();
  });

  it('refuses a session whose prompt generator fails, in one line without its secrets', async () => {
    const c = await connect(`${t.wsUrl}?character=moody`);
    const error = await c.next('error');
    expect(error.error).toMatchObject({ type: 'server_error', code: 'character_unavailable' });
    const message = (error.error as { message: string }).message;
    expect(message).toMatch(/^Character "moody" could not start a session: .*makeSystemPrompt/);
    expect(message).toContain(
      'postgres://[redacted]@db.internal/users ([redacted]) access_token=[redacted] {"token":"[redacted]"}',
    );
    expect(message).not.toMatch(/hunter2|sk-abc|zz9981|js0n5ecret|\n/);
    expect((await c.closed).code).toBe(1011);
  });

  it('resumes a handed-off session with the new character and every character state', async () => {
    const first = await connect(`${t.wsUrl}?character=desk`);
    const created = await first.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    expect(textOf(await through(first, 'count'))).toBe('Count is 1.');
    await through(first, 'back');
    expect(textOf(await through(first, 'count'))).toBe('Count is 2.');
    await first.close();

    const again = await connect(`${t.wsUrl}?resume=${token}`);
    const resumed = await again.next('session.created');
    expect(characterOf(resumed)).toBe('counter');
    say(again, 'count');
    const next = await again.untilDone();
    expect(textOf(next)).toBe('Count is 3.');
    expect(textOf(await through(again, 'back'))).toBe('Desk here.');
    await again.close();
  });
});
