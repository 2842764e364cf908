/**
 * A reply long enough to be cut mid-stream (the simulator's `stall` fault
 * stops it after a few chunks), for the suites of a reply under way.
 */
import type { SimScript } from '../../src/testing/index.js';
import { character } from './characters.js';

export const STORY =
  'Once upon a time a lighthouse keeper counted the waves every night, until the sea itself learned his name and answered.';

/** A line for the `weather` character: a round of its tool first, then {@link STORY}. */
export const WEATHER_STORY_LINE = 'What is the weather in Glasgow? Then a story.';

/** A line for {@link BOOKER}: a round of `book_table` first, then {@link STORY}. */
export const BOOK_STORY_LINE = 'Book me a table for two, then a story.';

/** What `book_table` answers once its gate is called. */
export const BOOKED = 'Booked: table 4 at 8 pm.';

/** A line for {@link BOOKER}: `order_wine` and `book_table` in one round, then {@link STORY}. */
export const WINE_BOOK_STORY_LINE = 'Order wine, book me a table, then a story.';

/** What `order_wine` answers once its gate is called. */
export const WINE_ORDERED = 'Ordered: a bottle of Rioja.';

/** A tool of {@link BOOKER}'s that answers `output` once `globalThis[gate]` is called. */
function gatedTool(name: string, gate: string, output: string): string {
  return `defineTool({
      name: ${JSON.stringify(name)},
      description: 'Runs until its test lets it answer.',
      parameters: z.object({ people: z.number().optional() }),
      timeoutMs: 60_000,
      handler: () =>
        new Promise((resolve) => {
          (globalThis as unknown as Record<string, () => void>)[${JSON.stringify(gate)}] = () =>
            resolve(${JSON.stringify(output)});
        }),
    })`;
}

/**
 * A character file (`booker.ts`) whose `book_table` and `order_wine` run
 * until whoever holds its process calls `globalThis.__troupeBookGate` or
 * `__troupeWineGate` (a test in the same process); in a server of its own
 * they run until their 60 s timeout.
 */
export const BOOKER = character({
  name: 'Booker',
  extra: `tools: [
    ${gatedTool('book_table', '__troupeBookGate', BOOKED)},
    ${gatedTool('order_wine', '__troupeWineGate', WINE_ORDERED)},
  ],`,
});

/**
 * A line that names a story gets {@link STORY}; one that names the weather
 * first calls `get_current_weather` (the `weather` character's tool), and
 * one that books a table first calls `book_table` ({@link BOOKER}'s).
 */
export const STORY_SCRIPT: SimScript = {
  rules: [
    {
      when: { user: 'weather', round: 0 },
      reply: {
        parts: [
          {
            toolCall: {
              name: 'get_current_weather',
              arguments: { location: 'Glasgow, Scotland', format: 'celsius' },
            },
          },
        ],
      },
    },
    {
      when: { user: 'order wine', round: 0 },
      reply: {
        parts: [
          { toolCall: { name: 'order_wine', arguments: {} } },
          { toolCall: { name: 'book_table', arguments: { people: 2 } } },
        ],
      },
    },
    {
      when: { user: 'book me a table', round: 0 },
      reply: { parts: [{ toolCall: { name: 'book_table', arguments: { people: 2 } } }] },
    },
    { when: { user: 'story' }, reply: { parts: [{ text: STORY }] } },
  ],
  fallback: { parts: [{ text: 'Go on.' }] },
};
