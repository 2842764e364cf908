import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { afterEach, describe, expect, it } from 'vitest';
import { defineCharacter, defineTool } from '../../src/index.js';
import {
  DEMO_SCRIPT,
  argumentsFor,
  parseSimScript,
  selectReply,
  summarizeToolResult,
  testCharacter,
  type CharacterTestSession,
} from '../../src/testing/index.js';

const WEATHER_PARAMS = {
  type: 'object',
  properties: {
    location: { type: 'string', description: 'The city and country' },
    format: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    num_days: { type: 'integer', minimum: 1, maximum: 14 },
  },
  required: ['location', 'format', 'num_days'],
};

const rollDice = defineTool({
  name: 'roll_dice',
  description: 'Roll dice. Returns each die and the total.',
  parameters: z.object({
    count: z.number().int().min(1).max(10).default(1).describe('How many dice'),
    sides: z.number().int().min(2).max(100).default(6).describe('Sides per die'),
  }),
  handler: ({ count, sides }) => {
    const rolls = Array.from({ length: count }, (_, i) => 1 + ((i * 7) % sides));
    return { rolls, total: rolls.reduce((a, b) => a + b, 0) };
  },
});

const dice = defineCharacter({
  name: 'Dice',
  instructions: { prompt: 'You roll dice.' },
  tools: [rollDice],
});

describe('argumentsFor', () => {
  it('takes an enum value and a place named in the text, and a number in range', () => {
    expect(argumentsFor(WEATHER_PARAMS, 'Forecast for 3 days in Glasgow, in fahrenheit')).toEqual({
      location: 'Glasgow',
      format: 'fahrenheit',
      num_days: 3,
    });
  });

  it('uses the first enum value and the minimum when the text names neither', () => {
    expect(argumentsFor(WEATHER_PARAMS, 'What is the weather like in Oslo? 99 degrees?')).toEqual({
      location: 'Oslo',
      format: 'celsius',
      num_days: 1,
    });
  });

  it('reads numbers written as words and leaves optional parameters out', () => {
    const schema = {
      type: 'object',
      properties: {
        count: { type: 'integer', minimum: 1, maximum: 10 },
        sides: { type: 'integer', minimum: 2, maximum: 100 },
      },
      required: ['count'],
    };
    expect(argumentsFor(schema, 'Roll two dice')).toEqual({ count: 2 });
  });
});

describe('summarizeToolResult', () => {
  it('says a JSON result as key-value words, and keeps other text as it is', () => {
    expect(summarizeToolResult('{"temperature":5,"conditions":"light rain"}')).toBe(
      'temperature 5, conditions light rain',
    );
    expect(summarizeToolResult('{"rolls":[3,4],"total":7}')).toBe('rolls (3, 4), total 7');
    expect(summarizeToolResult('Hello, Ada.')).toBe('Hello, Ada');
  });
});

describe('an improvising script', () => {
  let chat: CharacterTestSession | undefined;
  afterEach(async () => {
    await chat?.close();
    chat = undefined;
  });

  it("calls the tool the user's words name, with valid arguments, and answers from its result", async () => {
    chat = await testCharacter(dice, { script: { rules: [], improvise: true } });
    const turn = await chat.say('Roll three dice with 20 sides, please');
    expect(turn.toolCalls).toHaveLength(1);
    expect(turn.toolCalls[0]).toMatchObject({
      name: 'roll_dice',
      args: { count: 3, sides: 20 },
      outcome: 'ok',
    });
    expect(turn.text).toBe('Here is what I found: rolls (1, 8, 15), total 24.');
  });

  it('names the tools when the words match none of them', async () => {
    chat = await testCharacter(dice, {
      script: { rules: [], improvise: true, fallback: { parts: [{ text: 'Offline demo.' }] } },
    });
    const turn = await chat.say('Tell me a joke');
    expect(turn.toolCalls).toEqual([]);
    expect(turn.text).toBe(
      "Offline demo. This character's tools: roll_dice (Roll dice. Returns each die and the total.). Name one to see it used.",
    );
  });

  it('lets the demo improvise for a character it has no lines for', async () => {
    chat = await testCharacter(dice, { script: DEMO_SCRIPT });
    const turn = await chat.say('Roll 2 dice');
    expect(turn.toolCalls[0]).toMatchObject({ name: 'roll_dice', outcome: 'ok' });
    expect(turn.text).toMatch(/^Here is what I found: rolls \(\d+, \d+\), total \d+\.$/);
  });

  it('does not improvise unless the script asks to', () => {
    const facts = [{ role: 'user' as const, content: 'Roll two dice' }];
    const tools = [{ name: 'roll_dice', description: '', parameters: {} }];
    expect(selectReply({ rules: [] }, facts, true, tools).reply.parts).toEqual([
      { text: expect.stringContaining('no script rule matched') },
    ]);
  });
});

describe('scripted replies', () => {
  it('put the tool results received in place of {{toolResult}}', () => {
    const script = parseSimScript({
      rules: [{ when: { round: 1 }, reply: { parts: [{ text: 'It is {{toolResult}}.' }] } }],
    });
    const messages = [
      { role: 'user' as const, content: 'weather?' },
      {
        role: 'assistant' as const,
        content: null,
        tool_calls: [
          { id: 'c1', type: 'function' as const, function: { name: 'w', arguments: '{}' } },
        ],
      },
      {
        role: 'tool' as const,
        tool_call_id: 'c1',
        content: '{"temperature":5,"conditions":"snow"}',
      },
    ];
    expect(selectReply(script, messages).reply.parts).toEqual([
      { text: 'It is temperature 5, conditions snow.' },
    ]);
  });

  it('has an example script whose weather call fits the seed weather character', async () => {
    const file = new URL('../../src/testing/scripts/example.json', import.meta.url);
    const script = parseSimScript(JSON.parse(await readFile(file, 'utf8')), 'example.json');
    const chat = await testCharacter('characters/weather.ts', { script });
    try {
      const turn = await chat.say('What is the weather in Paris?');
      expect(turn.toolCalls[0]).toMatchObject({ name: 'get_current_weather', outcome: 'ok' });
      expect(turn.text).toMatch(/Paris/);
      expect(turn.text).toMatch(/-?\d+ °C/);
    } finally {
      await chat.close();
    }
  });
});
