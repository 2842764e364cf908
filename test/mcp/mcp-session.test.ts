/**
 * MCP tools through the public protocol: a real Troupe socket, the simulator
 * scripting the model's call, a real MCP server over streamable HTTP; and the
 * author kit testing a character with MCP tools.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpPool } from '../../src/mcp/pool.js';
import { callsTool, says, testCharacter, type SimRule } from '../../src/testing/index.js';
import { character, characterDir, type CharacterDir } from '../helpers/characters.js';
import type { Received } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, lastChat, openSession, turn } from '../helpers/session.js';
import { startHttpMcpServer, type HttpMcpServer } from '../fixtures/mcp/server.js';

const RULES: SimRule[] = [
  { when: { user: 'echo', round: 0 }, reply: callsTool('echo', { text: 'hi' }) },
  { when: { user: 'roll', round: 0 }, reply: callsTool('roll') },
  { when: { round: 1 }, reply: says('Done: {{toolResult}}') },
];

let web: HttpMcpServer;
let chars: CharacterDir;
let t: TestServer;

beforeAll(async () => {
  web = await startHttpMcpServer();
  chars = await characterDir({
    'helper.ts': character({
      name: 'Helper',
      extra: `tools: [defineTool({ name: 'roll', description: 'Rolls a die.', parameters: z.object({}), handler: () => 4 })],
  mcp: [{ label: 'web', url: ${JSON.stringify(web.url)}, allowedTools: ['echo'], timeoutMs: 60000 }],`,
    }),
  });
  t = await startTestServer({
    script: { rules: RULES },
    env: { CHARACTERS_DIR: chars.dir, CHARACTERS_MCP: 'true' },
  });
});

afterAll(async () => {
  await t?.close();
  await chars?.cleanup();
  await web?.close();
});

function items(events: readonly Received[], type: string): Array<Record<string, unknown>> {
  return events
    .filter((e) => e.type === type)
    .map((e) => e.item as Record<string, unknown>)
    .filter((i) => i.type === 'mcp_call');
}

describe('an MCP tool in a session', () => {
  it('is offered to the model with the server schema and runs as an mcp_call labelled with the server', async () => {
    const c = await openSession(t, 'character=helper');
    const events = await turn(c, 'Please echo something.');
    const offered = lastChat(t.simulator).tools?.map((tool) => tool.function.name);
    expect(offered).toEqual(['roll', 'echo']);
    const echo = lastChat(t.simulator).tools?.find((tool) => tool.function.name === 'echo');
    expect(echo?.function.parameters).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string' } },
      required: ['text'],
    });

    expect(items(events, 'response.output_item.added')).toEqual([
      expect.objectContaining({ type: 'mcp_call', server_label: 'web', name: 'echo' }),
    ]);
    expect(items(events, 'response.output_item.done')).toEqual([
      expect.objectContaining({
        server_label: 'web',
        name: 'echo',
        arguments: '{"text":"hi"}',
        output: 'echo: hi',
        error: null,
      }),
    ]);
    expect(events.map((e) => e.type)).toContain('response.mcp_call.completed');
    expect(doneOf(events)).toMatchObject({
      status: 'completed',
      troupe: { tools: [{ name: 'echo', outcome: 'ok' }] },
    });
    await c.close();
  });

  it("keeps the character's id as the label of its own tools", async () => {
    const c = await openSession(t, 'character=helper');
    const events = await turn(c, 'Roll a die.');
    expect(items(events, 'response.output_item.done')).toEqual([
      expect.objectContaining({ server_label: 'helper', name: 'roll', output: '4' }),
    ]);
    await c.close();
  });

  it('closes its connections when the server shuts down', async () => {
    expect(mcpPool.size).toBe(1);
    await t.close();
    expect(mcpPool.size).toBe(0);
  });
});

describe('the author kit', () => {
  it('tests a character with MCP tools', async () => {
    const chat = await testCharacter(
      {
        name: 'Kit',
        instructions: { prompt: 'You echo.' },
        mcp: [{ label: 'web', url: web.url, timeoutMs: 60000 }],
      },
      { script: RULES },
    );
    try {
      expect(chat.character.toolNames).toContain('echo');
      const turned = await chat.say('echo please');
      expect(turned.toolCalls).toEqual([
        expect.objectContaining({ name: 'echo', outcome: 'ok', output: 'echo: hi' }),
      ]);
      expect(turned.text).toBe('Done: echo: hi');
    } finally {
      await chat.close();
    }
    expect(mcpPool.size).toBe(0);
  });
});
