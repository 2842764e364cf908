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

/**
 * A character file (`booker.ts`) whose `book_table` runs until whoever
 * holds its process calls `globalThis.__troupeBookGate` (a test in the same
 * process); in a server of its own it runs until its 60 s timeout.
 */
export const BOOKER = character({
  name: 'Booker',
  extra: `tools: [
    defineTool({
      name: 'book_table',
      description: 'Books a table.',
      parameters: z.object({ people: z.number() }),
      timeoutMs: 60_000,
      handler: () =>
        new Promise((resolve) => {
          (globalThis as unknown as { __troupeBookGate?: () => void }).__troupeBookGate = () =>
            resolve(${JSON.stringify(BOOKED)});
        }),
    }),
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
      when: { user: 'book me a table', round: 0 },
      reply: { parts: [{ toolCall: { name: 'book_table', arguments: { people: 2 } } }] },
    },
    { when: { user: 'story' }, reply: { parts: [{ text: STORY }] } },
  ],
  fallback: { parts: [{ text: 'Go on.' }] },
};
