import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, nextError, openSession, userMessage } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

const pairs = (n: number) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));

describe('response.metadata limits', () => {
  it.each([
    ['17 pairs', pairs(17), 'response.metadata', 'expected at most 16 key-value pairs'],
    [
      'a key of 65 characters',
      { ['k'.repeat(65)]: 'v' },
      'response.metadata',
      'expected keys of at most 64 characters',
    ],
    [
      'a value of 513 characters',
      { note: 'v'.repeat(513) },
      'response.metadata.note',
      'expected a value of at most 512 characters',
    ],
  ])('refuses %s, naming the field', async (_, metadata, param, problem) => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'response.create', event_id: 'evt_meta', response: { metadata } });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param, event_id: 'evt_meta' });
    expect(error.message).toContain(problem);
    await c.close();
  });

  it('takes 16 pairs at the longest and echoes them', async () => {
    const c = await openSession(t, 'character=plain');
    const metadata = { ...pairs(15), ['k'.repeat(64)]: 'v'.repeat(512) };
    c.send({ type: 'response.create', response: { metadata } });
    expect(doneOf(await c.untilDone()).metadata).toEqual(metadata);
    await c.close();
  });
});

describe('content parts of a message', () => {
  it('refuses a message of more than 64 parts', async () => {
    const c = await openSession(t, 'character=plain');
    const content = Array.from({ length: 65 }, () => ({ type: 'input_text', text: 'a' }));
    c.send({
      ...(userMessage('x') as object),
      event_id: 'evt_parts',
      item: { type: 'message', role: 'user', content },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'item.content', event_id: 'evt_parts' });
    expect(error.message).toContain('expected at most 64 content parts');
    await c.close();
  });
});

describe('voice names', () => {
  it.each([{ voice: 'v'.repeat(257) }, { audio: { output: { voice: 'v'.repeat(257) } } }])(
    'refuses a voice of more than 256 characters under either name: %#',
    async (session) => {
      const c = await openSession(t, 'character=plain');
      c.send({ type: 'session.update', event_id: 'evt_voice', session });
      const error = await nextError(c, 'invalid_value');
      expect(error.event_id).toBe('evt_voice');
      expect(error.param).toMatch(/voice$/);
      await c.close();
    },
  );
});
