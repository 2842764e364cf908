/**
 * Every test checks the history's cached JSON: a group changed in place
 * without `History.touch` would give a resume an old copy of it, and a
 * message changed so would reach the model as it was.
 */
import { afterEach, expect } from 'vitest';
import { messageJsonCheck } from '../../src/llm/request-body.js';
import { History } from '../../src/session/history.js';

History.verifyJson = true;
messageJsonCheck.verify = true;

afterEach(() => {
  expect(History.staleJson.splice(0), 'history groups changed without History.touch()').toEqual([]);
  expect(
    messageJsonCheck.stale.splice(0),
    'messages changed after their JSON was kept, without History.touch()',
  ).toEqual([]);
});
