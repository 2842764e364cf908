/**
 * The kitchen character: its conversions come from the stdio MCP server in
 * characters/mcp/units-server.mjs, started when the character loads. Tested
 * with the author kit and through the public protocol, where its calls are
 * `mcp_call` items labelled `units`; the server's process ends with the
 * registry that started it.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpPool } from '../../src/mcp/pool.js';
import { callsTool, says, testCharacter, type SimRule } from '../../src/testing/index.js';
import { metricValue, scrape } from '../helpers/http.js';
import type { Received } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, lastChat, openSession, turn } from '../helpers/session.js';

const RULES: SimRule[] = [
  {
    when: { user: '350', round: 0 },
    reply: callsTool('convert', { value: 350, from: 'f', to: 'c' }),
  },
  {
    when: { user: 'grams to cups', round: 0 },
    reply: callsTool('convert', { value: 200, from: 'g', to: 'cup' }),
  },
  {
    when: { user: 'scale', round: 0 },
    reply: callsTool('scale_recipe', { amount: 200, servings: 4, wanted: 6 }),
  },
  { when: { toolResult: 'Error:' }, reply: says('Sorry: {{toolResult}}') },
  { when: { round: 1 }, reply: says('That is {{toolResult}}.') },
];

/** Processes of the units server that this test process started. */
function unitsServers(): string[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], {
      encoding: 'utf8',
    });
  } catch {
    // ps exits with 1 when there are no such processes.
  }
  return out.split('\n').filter((line) => line.includes('units-server.mjs'));
}

describe('the kitchen character with the author kit', () => {
  it('converts with the MCP server and scales with its own tool', async () => {
    const chat = await testCharacter('characters/kitchen.ts', { script: RULES });
    try {
      expect(chat.character.toolNames).toEqual(['scale_recipe', 'convert', 'list_units']);
      expect(chat.character.mcpServers).toEqual([
        { label: 'units', tools: ['convert', 'list_units'] },
      ]);

      const hot = await chat.say('Bake at 350 °F: how hot is that?');
      expect(hot.toolCalls).toEqual([
        expect.objectContaining({
          name: 'convert',
          serverLabel: 'units',
          outcome: 'ok',
          output: '350 f = 176.7 c',
        }),
      ]);
      expect(hot.text).toBe('That is 350 f = 176.7 c.');

      // The server's own error (mass to volume) is an `error` outcome the model hears about.
      const wrong = await chat.say('200 grams to cups?');
      expect(wrong.toolCalls).toEqual([
        expect.objectContaining({ name: 'convert', serverLabel: 'units', outcome: 'error' }),
      ]);
      expect(wrong.toolCalls[0]?.output).toMatch(/cannot convert gram \(mass\) to cup \(US\)/);

      const scaled = await chat.say('Scale 200 g from 4 to 6 servings.');
      expect(scaled.toolCalls).toEqual([
        expect.objectContaining({
          name: 'scale_recipe',
          serverLabel: 'kitchen',
          output: '{"amount":300}',
        }),
      ]);
    } finally {
      await chat.close();
    }
    expect(mcpPool.size).toBe(0);
  });
});

describe('the kitchen character through the protocol', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ script: { rules: RULES }, env: { CHARACTERS_MCP: 'true' } });
  });
  afterAll(async () => t?.close());

  function mcpItems(events: readonly Received[]): Array<Record<string, unknown>> {
    return events
      .filter((e) => e.type === 'response.output_item.done')
      .map((e) => e.item as Record<string, unknown>)
      .filter((i) => i.type === 'mcp_call');
  }

  it('offers the server schema and sends the call as an mcp_call labelled units', async () => {
    const c = await openSession(t, 'character=kitchen');
    const events = await turn(c, 'Bake at 350 °F: how hot is that?');
    const convert = lastChat(t.simulator).tools?.find((tool) => tool.function.name === 'convert');
    expect(convert?.function.parameters).toMatchObject({
      type: 'object',
      properties: { value: { type: 'number' }, from: { enum: expect.arrayContaining(['f']) } },
      required: ['value', 'from', 'to'],
    });
    expect(mcpItems(events)).toEqual([
      expect.objectContaining({
        type: 'mcp_call',
        server_label: 'units',
        name: 'convert',
        arguments: '{"value":350,"from":"f","to":"c"}',
        output: '350 f = 176.7 c',
        error: null,
      }),
    ]);
    expect(doneOf(events)).toMatchObject({ status: 'completed' });

    const own = await turn(c, 'Scale 200 g from 4 to 6 servings.');
    expect(mcpItems(own)).toEqual([
      expect.objectContaining({ server_label: 'kitchen', name: 'scale_recipe' }),
    ]);
    await c.close();
  });

  it('counts calls, connections and tools in /metrics, and reconnects after the process dies', async () => {
    const c = await openSession(t, 'character=kitchen');
    await turn(c, '200 grams to cups?');
    let text = await scrape(t.url);
    const units = { server: 'units' };
    expect(metricValue(text, 'troupe_mcp_calls_total', { ...units, outcome: 'ok' })).toBe(1);
    expect(metricValue(text, 'troupe_mcp_calls_total', { ...units, outcome: 'error' })).toBe(1);
    expect(metricValue(text, 'troupe_mcp_calls_total', { ...units, outcome: 'timeout' })).toBe(0);
    expect(metricValue(text, 'troupe_mcp_call_duration_seconds_count', units)).toBe(2);
    expect(metricValue(text, 'troupe_mcp_server_connected', units)).toBe(1);
    expect(metricValue(text, 'troupe_mcp_tools', units)).toBe(2);
    expect(metricValue(text, 'troupe_mcp_connects_total', { ...units, outcome: 'ok' })).toBe(1);

    // The server's process dies: the connection is lost, and the next call starts it again.
    const [pid] = unitsServers().map((line) => Number(line.trim().split(/\s+/, 1)[0]));
    const lost = t.waitForLog('mcp server connection lost', (l) => l.mcp === 'units');
    process.kill(pid!, 'SIGKILL');
    await lost;
    text = await scrape(t.url);
    expect(metricValue(text, 'troupe_mcp_server_connected', units)).toBe(0);
    expect(metricValue(text, 'troupe_mcp_disconnects_total', units)).toBe(1);

    const again = await turn(c, 'Bake at 350 °F: how hot is that?');
    expect(mcpItems(again)).toEqual([expect.objectContaining({ output: '350 f = 176.7 c' })]);
    text = await scrape(t.url);
    expect(metricValue(text, 'troupe_mcp_reconnects_total', units)).toBe(1);
    expect(metricValue(text, 'troupe_mcp_connects_total', { ...units, outcome: 'ok' })).toBe(2);
    expect(metricValue(text, 'troupe_mcp_server_connected', units)).toBe(1);
    expect(metricValue(text, 'troupe_mcp_calls_total', { ...units, outcome: 'ok' })).toBe(2);
    await c.close();
  });

  it('ends the server process when the server shuts down', async () => {
    expect(unitsServers()).toHaveLength(1);
    await t.close();
    expect(unitsServers()).toEqual([]);
  });
});

describe('the kitchen character with CHARACTERS_MCP=false (how other test servers run)', () => {
  it('loads without the MCP tools and starts no process', async () => {
    const t = await startTestServer();
    try {
      const kitchen = t.server.registry.get('kitchen')!;
      expect(kitchen.toolNames).toEqual(['scale_recipe']);
      expect(kitchen.mcpServers).toEqual([
        { label: 'units', tools: [], error: expect.stringContaining('CHARACTERS_MCP=false') },
      ]);
      expect(unitsServers()).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
