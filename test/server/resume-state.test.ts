/**
 * A character's `ctx.session.state` holding what JSON cannot keep (a BigInt,
 * a circular reference, a Map): the conversation still resumes, with the
 * rest of the state, and the log names each value left out, once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import { character, characterDir, type CharacterDir } from '../helpers/characters.js';
import { connect, say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { textOf } from '../helpers/session.js';

const call = (name: string): SimReply => ({ parts: [{ toolCall: { name, arguments: {} } }] });
const says = (text: string): SimReply => ({ parts: [{ text }] });

const script: SimScript = {
  rules: [
    { when: { user: 'keep', round: 0 }, reply: call('keep') },
    { when: { user: 'peek', round: 0 }, reply: call('peek') },
    { when: { user: 'peek' }, reply: says('State {{toolResult}}.') },
  ],
  fallback: says('Kept.'),
};

const tools = `tools: [
  defineTool({
    name: 'keep',
    description: 'Keeps things in the session state.',
    parameters: z.object({}),
    handler: (_args, ctx) => {
      const loop: Record<string, unknown> = { name: 'loop' };
      loop.self = loop;
      Object.assign(ctx.session.state, {
        count: 3,
        big: 10n,
        loop,
        seen: new Map([['a', 1]]),
        list: [1, 2n, 'three'],
      });
      return 'kept';
    },
  }),
  defineTool({
    name: 'peek',
    description: 'Says what the session state holds.',
    parameters: z.object({}),
    handler: (_args, ctx) => Object.keys(ctx.session.state).sort().join(' '),
  }),
],`;

let chars: CharacterDir;
let t: TestServer;
beforeAll(async () => {
  chars = await characterDir({ 'keeper.ts': character({ name: 'Keeper', extra: tools }) });
  t = await startTestServer({ script, env: { CHARACTERS_DIR: chars.dir } });
});
afterAll(async () => {
  await t?.close();
  await chars?.cleanup();
});

describe('a session state JSON cannot keep whole', () => {
  it('resumes the conversation with the rest of the state, and logs each value left out once', async () => {
    const first = await connect(`${t.wsUrl}?character=keeper&greeting=0`);
    const created = await first.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    say(first, 'keep this');
    await first.untilDone();
    say(first, 'hello');
    await first.untilDone();
    await first.close();

    const again = await connect(`${t.wsUrl}?resume=${token}`);
    await again.next('session.created');
    await again.next('conversation.item.added', (e) => JSON.stringify(e.item).includes('hello'));
    expect(again.events.map((e) => e.type)).not.toContain('error');
    say(again, 'peek');
    expect(textOf(await again.untilDone())).toBe('State count list loop.');
    await again.close();

    const warned = t
      .logs()
      .filter((l) =>
        l.msg?.toString().startsWith('ctx.session.state holds a value JSON cannot keep'),
      )
      .map((l) => `${String(l.key)}: ${String(l.kind)}`);
    expect(warned.sort()).toEqual([
      'big: a BigInt',
      'list[1]: a BigInt',
      'loop.self: a circular reference',
      'seen: a Map',
    ]);
  });
});
