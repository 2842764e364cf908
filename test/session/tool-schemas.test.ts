import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { lastChat, nextError, openSession, turn } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

const tool = (parameters: Record<string, unknown>) => ({
  type: 'function',
  name: 'lookup',
  description: 'Looks a thing up',
  parameters,
});

const BAD_SCHEMAS: Array<[string, Record<string, unknown>, string]> = [
  [
    'properties that are not an object',
    { type: 'object', properties: 5 },
    'at /properties: must be object',
  ],
  ['required that is not a list', { type: 'object', required: 'a' }, 'at /required: must be array'],
  [
    'a type no JSON Schema has',
    { type: 'nonsense' },
    'at /type: must be equal to one of the allowed values',
  ],
  [
    'a top level that is not an object',
    { type: 'array', items: { type: 'string' } },
    'the schema\'s type must be "object" (a call\'s arguments are one object), not "array"',
  ],
  [
    'a pattern that is no regular expression',
    { type: 'object', properties: { a: { type: 'string', pattern: '(' } } },
    'pattern is no regular expression',
  ],
  [
    'a $ref that points nowhere',
    { type: 'object', properties: { a: { $ref: '#/definitions/nowhere' } } },
    '$ref "#/definitions/nowhere" points nowhere',
  ],
];

describe('function tool parameters', () => {
  it.each(BAD_SCHEMAS)(
    'refuses a session.update whose tool has %s, naming the tool, and changes nothing',
    async (_, parameters, problem) => {
      const c = await openSession(t, 'character=plain');
      c.send({
        type: 'session.update',
        event_id: 'evt_tools',
        session: { instructions: 'Be brief.', tools: [tool(parameters)] },
      });
      const error = await nextError(c, 'invalid_value');
      expect(error).toMatchObject({ param: 'session.tools[0].parameters', event_id: 'evt_tools' });
      expect(error.message).toContain('function "lookup"');
      expect(error.message).toContain(problem);

      // The session still runs, with neither the tool nor the instructions of the refused update.
      await turn(c, 'Hello');
      const body = lastChat(t.simulator);
      expect(body.tools).toBeUndefined();
      expect(body.messages[0]).not.toEqual({ role: 'system', content: 'Be brief.' });
      await c.close();
    },
  );

  it('refuses a response.create whose response.tools has a bad schema', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'response.create',
      event_id: 'evt_r',
      response: {
        tools: [tool({ type: 'object', properties: { a: { type: 'string', pattern: '[' } } })],
      },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'response.tools[0].parameters', event_id: 'evt_r' });
    expect(error.message).toContain('function "lookup"');
    await c.close();
  });

  it('takes schemas that use $defs, definitions, formats and a $schema of draft 2020-12', async () => {
    const c = await openSession(t, 'character=plain');
    const parameters = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        when: { type: 'string', format: 'date-time' },
        where: { $ref: '#/$defs/place' },
        who: { $ref: '#/definitions/person' },
        code: { type: 'string', pattern: '^[A-Z]{3}$' },
      },
      required: ['when'],
      additionalProperties: false,
      $defs: { place: { type: 'string' } },
      definitions: { person: { type: 'string' } },
    };
    c.send({ type: 'session.update', session: { tools: [tool(parameters)] } });
    const updated = await c.next('session.updated');
    expect((updated.session as { tools: unknown[] }).tools).toEqual([tool(parameters)]);
    await c.close();
  });
});

describe('tool_choice with no tools', () => {
  it('refuses "required" in session.update when the session offers no tools', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'session.update', event_id: 'evt_req', session: { tool_choice: 'required' } });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'session.tool_choice', event_id: 'evt_req' });
    expect(error.message).toContain('offers no tools');
    await c.close();
  });

  it('refuses an update that takes the last tool away from a "required" tool_choice', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({
      type: 'session.update',
      session: { tools: [tool({ type: 'object', properties: {} })], tool_choice: 'required' },
    });
    await c.next('session.updated');
    c.send({ type: 'session.update', event_id: 'evt_none', session: { tools: [] } });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'session.tools', event_id: 'evt_none' });
    await c.close();
  });

  it('refuses "required" or a function name in response.create when no tools are offered', async () => {
    const c = await openSession(t, 'character=plain');
    c.send({ type: 'response.create', event_id: 'evt_a', response: { tool_choice: 'required' } });
    expect(await nextError(c, 'invalid_value')).toMatchObject({
      param: 'response.tool_choice',
      event_id: 'evt_a',
    });
    c.send({
      type: 'response.create',
      event_id: 'evt_b',
      response: { tool_choice: { type: 'function', name: 'lookup' } },
    });
    const error = await nextError(c, 'invalid_value');
    expect(error).toMatchObject({ param: 'response.tool_choice.name', event_id: 'evt_b' });
    expect(error.message).toContain('tools: none');
    await c.close();
  });
});
