/**
 * A session's metadata through a real socket: `?metadata=` and
 * `session.update {session: {troupe: {metadata}}}` reach the character's
 * prompt generator (`ctx.metadata`), and so the LLM's system prompt; bad
 * values are refused and change nothing; the metadata follows the session
 * to another character, through a handoff and a resume, and is never logged.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { character, characterDir, type CharacterDir } from '../helpers/characters.js';
import { connect, say, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { chatBodies, lastChat, nextError, openSession, turn } from '../helpers/session.js';
import { within } from '../helpers/wait.js';

/** A prompt generator that reads `ctx.metadata.userName`, and throws on one that is not a string. */
const byName = (role: string): string => `makeSystemPrompt: (instructions, ctx) => {
    const name = ctx.metadata.userName;
    if (name !== undefined && typeof name !== 'string') throw new Error('userName must be a string\\n(see the token=abc123 docs)');
    return ${JSON.stringify(role)} + ' The user is ' + (name ?? 'unknown') + '.';
  },`;

const HOST = character({
  name: 'Host',
  extra: `handoffs: ['guide'],\n  ${byName('You are the host.')}`,
});
const GUIDE = character({ name: 'Guide', extra: byName('You are the guide.') });

const speak = (text: string): SimReply => ({ parts: [{ text }] });
const SCRIPT: SimScript = {
  rules: [
    {
      when: { user: 'guide', round: 0 },
      reply: {
        parts: [{ toolCall: { name: 'transfer_to_guide', arguments: { reason: 'asked' } } }],
      },
    },
  ],
  fallback: speak('Okay.'),
};

/** A value no log line may carry. */
const SECRET = 'Ada-4f1c';
const metadataQuery = (value: unknown): string =>
  `metadata=${encodeURIComponent(JSON.stringify(value))}`;

let chars: CharacterDir;
let t: TestServer;
beforeAll(async () => {
  chars = await characterDir({ 'host.ts': HOST, 'guide.ts': GUIDE });
  t = await startTestServer({ script: SCRIPT, env: { CHARACTERS_DIR: chars.dir } });
});
afterAll(async () => {
  await t?.close();
  await chars?.cleanup();
});
beforeEach(() => t.simulator.clearRequests());

const systemPrompt = (): unknown => lastChat(t.simulator).messages[0]?.content;
const troupeOf = (event: Record<string, unknown>) =>
  (event.session as { troupe: { metadata: unknown; resume_token: string } }).troupe;
const instructionsOf = (event: Record<string, unknown>): string =>
  (event.session as { instructions: string }).instructions;

function update(c: TestClient, session: Record<string, unknown>, eventId?: string): void {
  c.send({ type: 'session.update', ...(eventId ? { event_id: eventId } : {}), session });
}

describe('metadata on the URL', () => {
  it("reaches the prompt generator's ctx.metadata, and so the model's system prompt", async () => {
    const c = await connect(`${t.wsUrl}?character=host&${metadataQuery({ userName: SECRET })}`);
    const created = await c.next('session.created');
    expect(troupeOf(created).metadata).toEqual({ userName: SECRET });
    expect(instructionsOf(created)).toBe(`You are the host. The user is ${SECRET}.`);
    await turn(c, 'Hello there!');
    expect(systemPrompt()).toBe(`You are the host. The user is ${SECRET}.`);
    await c.close();
  });

  it('is {} without the parameter', async () => {
    const c = await connect(`${t.wsUrl}?character=host`);
    const created = await c.next('session.created');
    expect(troupeOf(created).metadata).toEqual({});
    expect(instructionsOf(created)).toBe('You are the host. The user is unknown.');
    await c.close();
  });

  it('refuses a value that is not a JSON object within the limits, as an unknown variant is', async () => {
    const tooMany = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, SECRET]));
    for (const query of [
      'metadata=%7BuserName',
      metadataQuery([SECRET]),
      metadataQuery(tooMany),
      metadataQuery({ note: 'x'.repeat(5000) }),
    ]) {
      const c = await connect(`${t.wsUrl}?character=host&${query}`);
      const error = (await c.next('error')).error as Record<string, unknown>;
      expect(error).toMatchObject({
        type: 'invalid_request_error',
        code: 'invalid_metadata',
        param: 'metadata',
      });
      expect(error.message).toMatch(/^\?metadata=: expected /);
      expect((await within(c.closed, 'the close after invalid_metadata')).code).toBe(1008);
      expect(c.events.map((e) => e.type)).not.toContain('session.created');
    }
  });
});

describe('session.update session.troupe.metadata', () => {
  it('makes the prompt again for the next response and echoes the metadata', async () => {
    const c = await openSession(t, 'character=host');
    await turn(c, 'Hello there!');
    expect(systemPrompt()).toBe('You are the host. The user is unknown.');

    update(c, { troupe: { metadata: { userName: SECRET, plan: 'pro' } } });
    const updated = await c.next('session.updated');
    expect(troupeOf(updated).metadata).toEqual({ userName: SECRET, plan: 'pro' });
    expect(instructionsOf(updated)).toBe(`You are the host. The user is ${SECRET}.`);
    await turn(c, 'Hello again!');
    expect(systemPrompt()).toBe(`You are the host. The user is ${SECRET}.`);
    // The conversation goes on: the earlier exchange is still in what the model reads.
    expect(JSON.stringify(lastChat(t.simulator).messages)).toContain('Hello there!');
    await c.close();
  });

  it("leaves the client's own instructions in place of the character's prompt", async () => {
    const c = await openSession(t, 'character=host');
    update(c, { instructions: 'Answer in French.' });
    await c.next('session.updated');
    update(c, { troupe: { metadata: { userName: 'Bea' } } });
    expect(instructionsOf(await c.next('session.updated'))).toBe('Answer in French.');
    await turn(c, 'Hello!');
    expect(systemPrompt()).toBe('Answer in French.');
    // Given back, the character's prompt is the one made with the new metadata.
    update(c, { instructions: '' });
    expect(instructionsOf(await c.next('session.updated'))).toBe(
      'You are the host. The user is Bea.',
    );
    await c.close();
  });

  it('refuses a bad value naming the field, and the whole update changes nothing', async () => {
    const c = await connect(`${t.wsUrl}?character=host&${metadataQuery({ userName: 'Ada' })}`);
    await c.next('session.created');
    update(c, { temperature: 0.3, troupe: { metadata: ['Bea'] } }, 'evt_meta_1');
    const refused = await nextError(c, 'invalid_value');
    expect(refused).toMatchObject({ param: 'session.troupe.metadata', event_id: 'evt_meta_1' });
    expect(refused.message).toContain('expected a JSON object');

    // Its prompt generator throws on this one: refused too, the old prompt kept.
    update(c, { temperature: 0.3, troupe: { metadata: { userName: 7 } } }, 'evt_meta_2');
    const failed = await nextError(c, 'character_unavailable');
    expect(failed).toMatchObject({ param: 'session.troupe.metadata', event_id: 'evt_meta_2' });
    expect(failed.message).toContain('userName must be a string');
    // One line, as a tool's error: the rest (and anything secret in it) stays in the log.
    expect(failed.message).not.toMatch(/\n|abc123/);
    // Its author learns of it from the log.
    const logged = await t.waitForLog('prompt generator failed on session.update');
    expect(logged).toMatchObject({
      to: 'host',
      err: { message: expect.stringContaining('userName must be a string') },
    });

    update(c, {});
    const updated = await c.next('session.updated');
    expect(troupeOf(updated).metadata).toEqual({ userName: 'Ada' });
    // The refused updates' temperature was not taken: the session still sets none.
    expect(updated.session).not.toHaveProperty('temperature');
    await turn(c, 'Hello!');
    expect(systemPrompt()).toBe('You are the host. The user is Ada.');
    await c.close();
  });

  it('goes with the session to the character it picks in the same update', async () => {
    const c = await connect(`${t.wsUrl}?character=host&${metadataQuery({ userName: 'Ada' })}`);
    await c.next('session.created');
    update(c, { character: 'guide' });
    expect(instructionsOf(await c.next('session.updated'))).toBe(
      'You are the guide. The user is Ada.',
    );
    update(c, { character: 'host', troupe: { metadata: { userName: 'Bea' } } });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({ character: 'host' });
    expect(instructionsOf(updated)).toBe('You are the host. The user is Bea.');
    await c.close();
  });
});

describe('metadata kept by the session', () => {
  it('is the new character’s after a handoff', async () => {
    const c = await connect(`${t.wsUrl}?character=host&${metadataQuery({ userName: 'Ada' })}`);
    await c.next('session.created');
    update(c, { troupe: { metadata: { userName: 'Bea' } } });
    await c.next('session.updated');
    say(c, 'Put the guide on, please.');
    await c.untilDone();
    await c.untilDone();
    const bodies = chatBodies(t.simulator);
    expect(bodies.map((b) => b.messages[0]?.content)).toEqual([
      'You are the host. The user is Bea.',
      'You are the guide. The user is Bea.',
    ]);
    await c.close();
  });

  it('comes back with a resumed conversation, as it was last set', async () => {
    const first = await connect(`${t.wsUrl}?character=host&${metadataQuery({ userName: 'Ada' })}`);
    const token = troupeOf(await first.next('session.created')).resume_token;
    update(first, { troupe: { metadata: { userName: 'Bea' } } });
    await first.next('session.updated');
    await first.close();

    const again = await connect(`${t.wsUrl}?resume=${token}`);
    const resumed = await again.next('session.created');
    expect(troupeOf(resumed).metadata).toEqual({ userName: 'Bea' });
    expect(instructionsOf(resumed)).toBe('You are the host. The user is Bea.');
    await turn(again, 'Do you remember me?');
    expect(systemPrompt()).toBe('You are the host. The user is Bea.');
    expect(again.events.map((e) => e.type)).not.toContain('error');
    await again.close();
  });

  it('is never written to the log, at any level', async () => {
    const c = await connect(`${t.wsUrl}?character=host&${metadataQuery({ userName: SECRET })}`);
    await c.next('session.created');
    update(c, { troupe: { metadata: { userName: `${SECRET}-2` } } });
    await c.next('session.updated');
    await turn(c, 'Hello!');
    await c.close();
    await t.waitForLog('session metadata changed', (l) => l.keys === 1);
    const lines = t.logs();
    expect(lines.filter((l) => JSON.stringify(l).includes(SECRET))).toEqual([]);
  });
});
