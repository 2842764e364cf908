/**
 * Every test checks the resume store's cached history JSON: a group changed
 * in place without `History.touch` would give a resume an old copy of it.
 */
import { afterEach, expect } from 'vitest';
import { History } from '../../src/session/history.js';

History.verifyJson = true;

afterEach(() => {
  expect(History.staleJson.splice(0), 'history groups changed without History.touch()').toEqual([]);
});
