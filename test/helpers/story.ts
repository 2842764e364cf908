/**
 * A reply long enough to be cut mid-stream (the simulator's `stall` fault
 * stops it after a few chunks), for the suites of a reply under way.
 */
import type { SimScript } from '../../src/testing/index.js';

export const STORY =
  'Once upon a time a lighthouse keeper counted the waves every night, until the sea itself learned his name and answered.';

/** A line for the `weather` character: a round of its tool first, then {@link STORY}. */
export const WEATHER_STORY_LINE = 'What is the weather in Glasgow? Then a story.';

/**
 * A line that names a story gets {@link STORY}; one that names the weather
 * first calls `get_current_weather` (the `weather` character's tool).
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
    { when: { user: 'story' }, reply: { parts: [{ text: STORY }] } },
  ],
  fallback: { parts: [{ text: 'Go on.' }] },
};
