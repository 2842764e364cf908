/**
 * A weather assistant ported from an Unmute character: its tools are in the
 * OpenAI JSON format (plain objects, no zod) and one `handleToolCall` serves
 * them all. Shows authors that the JSON Schema is enforced (required fields,
 * enums, integers) before the handler runs, and that a handler may return an
 * object, which the model gets as JSON. The weather itself is made up, but
 * deterministic: the same place always gets the same weather.
 */
import { defineCharacter } from '../src/index.js';

const FORMAT = {
  type: 'string',
  enum: ['celsius', 'fahrenheit'],
  description: 'The temperature unit to use.',
} as const;

const LOCATION = {
  type: 'string',
  description: 'The city and country, e.g. Glasgow, Scotland',
} as const;

const CONDITIONS = [
  'sunny',
  'partly cloudy',
  'cloudy',
  'light rain',
  'heavy rain',
  'windy',
  'snow',
];

type Format = 'celsius' | 'fahrenheit';

/** FNV-1a: a small, stable hash, so a place's weather is the same on every call. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (const ch of text.toLowerCase()) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** A made-up reading for a place (and a day from now): whole degrees Celsius from -5 to 29. */
function reading(location: string, day: number, format: Format) {
  const h = hash(`${location}#${day}`);
  const celsius = (h % 35) - 5;
  // °F = °C × 9/5 + 32, in tenths so whole °C give exact one-decimal °F (1 °C → 33.8 °F).
  const temperature = format === 'celsius' ? celsius : (celsius * 18 + 320) / 10;
  return { temperature, conditions: CONDITIONS[(h >>> 8) % CONDITIONS.length]! };
}

export default defineCharacter({
  name: 'Weather',
  description: 'Tells the (made-up) weather and forecasts; asks when a request is ambiguous.',
  voice: { flite: 'rms:0.9', espeak: 'en-us', openai: 'nova' },
  instructions: {
    prompt:
      "Don't make assumptions about what values to plug into functions. " +
      'Ask for clarification if a user request is ambiguous.',
    language: 'en',
  },
  makeSystemPrompt: (instructions) => instructions.prompt,
  tools: [
    {
      type: 'function',
      function: {
        name: 'get_current_weather',
        description: 'Get the current weather',
        parameters: {
          type: 'object',
          properties: { location: LOCATION, format: FORMAT },
          required: ['location', 'format'],
        },
      },
    },
    {
      type: 'function',
      function: {
        name: 'get_n_day_weather_forecast',
        description: 'Get an N-day weather forecast',
        parameters: {
          type: 'object',
          properties: {
            location: LOCATION,
            format: FORMAT,
            num_days: {
              type: 'integer',
              minimum: 1,
              maximum: 14,
              description: 'The number of days to forecast, 1 to 14',
            },
          },
          required: ['location', 'format', 'num_days'],
        },
      },
    },
  ],
  // The arguments were validated against the schemas above before this runs,
  // so the casts only restate what the schemas guarantee.
  handleToolCall: (name, args) => {
    const location = args.location as string;
    const format = args.format as Format;
    switch (name) {
      case 'get_current_weather':
        return { location, format, ...reading(location, 0, format) };
      case 'get_n_day_weather_forecast': {
        const days = Array.from({ length: args.num_days as number }, (_, i) => ({
          day: i + 1,
          ...reading(location, i + 1, format),
        }));
        return { location, format, days };
      }
      default:
        throw new Error(`weather has no tool named ${name}`);
    }
  },
  greeting: 'Hi! Ask me about the weather anywhere.',
});
