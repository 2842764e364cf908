/**
 * A reply long enough to be cut mid-stream (the simulator's `stall` fault
 * stops it after a few chunks), for the suites of a reply under way.
 */
import type { SimScript } from '../../src/testing/index.js';

export const STORY =
  'Once upon a time a lighthouse keeper counted the waves every night, until the sea itself learned his name and answered.';

/** A line that names a story gets {@link STORY}. */
export const STORY_SCRIPT: SimScript = {
  rules: [{ when: { user: 'story' }, reply: { parts: [{ text: STORY }] } }],
  fallback: { parts: [{ text: 'Go on.' }] },
};
