import { afterEach, describe, expect, it } from 'vitest';
import {
  callsTool,
  says,
  testCharacter,
  type CharacterTestSession,
} from '../../src/testing/index.js';

const GLASGOW = { location: 'Glasgow, Scotland' };

const script = [
  {
    when: { user: 'weather in glasgow', round: 0 },
    reply: says('Do you want celsius or fahrenheit?'),
  },
  {
    when: { user: 'both units', round: 0 },
    reply: callsTool('get_current_weather', { ...GLASGOW, format: 'celsius' }, [
      'get_current_weather',
      { ...GLASGOW, format: 'fahrenheit' },
    ]),
  },
  {
    when: { user: '3 days', round: 0 },
    reply: callsTool('get_n_day_weather_forecast', { ...GLASGOW, format: 'celsius', num_days: 3 }),
  },
  {
    when: { user: 'a month', round: 0 },
    reply: callsTool('get_n_day_weather_forecast', { ...GLASGOW, format: 'celsius', num_days: 30 }),
  },
  // After the rules above: their messages may name a unit too, and the first match wins.
  {
    when: { user: 'celsius', round: 0 },
    reply: callsTool('get_current_weather', { ...GLASGOW, format: 'celsius' }),
  },
  { when: { user: 'somewhere', round: 0 }, reply: callsTool('get_current_weather', GLASGOW) },
  { when: { toolResult: 'Error:' }, reply: says('Sorry, I could not get that.') },
  { when: { toolResult: '"days":' }, reply: says('Here is the forecast for Glasgow.') },
  { when: { toolResult: 'Glasgow' }, reply: says('Here is the weather in Glasgow.') },
];

/** The JSON a weather tool call returned. */
function parsed(output: string | undefined): Record<string, unknown> {
  return JSON.parse(output ?? 'null') as Record<string, unknown>;
}

describe('the weather character', () => {
  let chat: CharacterTestSession | undefined;
  afterEach(async () => chat?.close());

  it('sends the clarification instruction verbatim as its system prompt', async () => {
    chat = await testCharacter('characters/weather.ts', { script });
    expect(chat.systemPrompt).toBe(
      "Don't make assumptions about what values to plug into functions. " +
        'Ask for clarification if a user request is ambiguous.',
    );
  });

  it('asks for the unit first, then calls get_current_weather with it', async () => {
    chat = await testCharacter('characters/weather.ts', { script });

    const question = await chat.say("What's the weather in Glasgow?");
    expect(question.toolCalls).toEqual([]);
    expect(question.text).toBe('Do you want celsius or fahrenheit?');

    const answer = await chat.say('celsius');
    expect(answer.toolCalls).toMatchObject([
      {
        name: 'get_current_weather',
        args: { location: 'Glasgow, Scotland', format: 'celsius' },
        outcome: 'ok',
      },
    ]);
    const weather = parsed(answer.toolCalls[0]?.output);
    expect(weather).toMatchObject({ location: 'Glasgow, Scotland', format: 'celsius' });
    expect(weather.temperature).toEqual(expect.any(Number));
    expect(weather.conditions).toEqual(expect.any(String));
    expect(answer.text).toBe('Here is the weather in Glasgow.');
  });

  it('gives the same place the same weather, with Fahrenheit converted from Celsius', async () => {
    chat = await testCharacter('characters/weather.ts', { script });
    const first = await chat.say('Glasgow in both units please');
    const again = await chat.say('And once more, in both units');
    expect(again.toolCalls.map((c) => c.output)).toEqual(first.toolCalls.map((c) => c.output));

    const [celsius, fahrenheit] = first.toolCalls.map((c) => parsed(c.output));
    expect(fahrenheit).toMatchObject({ format: 'fahrenheit', conditions: celsius?.conditions });
    expect(fahrenheit?.temperature).toBeCloseTo(((celsius?.temperature as number) * 9) / 5 + 32);
  });

  it('forecasts num_days days', async () => {
    chat = await testCharacter('characters/weather.ts', { script });
    const turn = await chat.say('Forecast for the next 3 days in Glasgow, in celsius');
    expect(turn.toolCalls).toMatchObject([
      {
        name: 'get_n_day_weather_forecast',
        args: { location: 'Glasgow, Scotland', format: 'celsius', num_days: 3 },
        outcome: 'ok',
      },
    ]);
    const forecast = parsed(turn.toolCalls[0]?.output);
    expect(forecast).toMatchObject({ location: 'Glasgow, Scotland', format: 'celsius' });
    expect(forecast.days).toEqual([1, 2, 3].map((day) => expect.objectContaining({ day })));
    expect(turn.text).toBe('Here is the forecast for Glasgow.');
  });

  it('refuses a forecast longer than 14 days before the handler runs', async () => {
    chat = await testCharacter('characters/weather.ts', { script });
    const turn = await chat.say('Forecast for a month, celsius');
    expect(turn.toolCalls).toMatchObject([
      { name: 'get_n_day_weather_forecast', outcome: 'invalid_args' },
    ]);
    expect(turn.toolCalls[0]?.output).toContain('num_days');
    expect(turn.text).toBe('Sorry, I could not get that.');
  });

  it('refuses a call without the required format before the handler runs', async () => {
    chat = await testCharacter('characters/weather.ts', { script });
    const turn = await chat.say("What's it like somewhere nice?");
    const [call] = turn.toolCalls;
    expect(call).toMatchObject({
      name: 'get_current_weather',
      outcome: 'invalid_args',
      handlerMs: 0,
    });
    expect(call?.args).toBeUndefined();
    expect(call?.output).toContain('invalid arguments for get_current_weather: format');
    expect(turn.text).toBe('Sorry, I could not get that.');
  });
});
