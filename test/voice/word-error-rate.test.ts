import { describe, expect, it } from 'vitest';
import { normaliseWords, wordErrors } from '../../src/voice/word-error-rate.js';

describe('normaliseWords', () => {
  it('lower-cases, drops punctuation and writes contractions out', () => {
    expect(normaliseWords("Hi! You're — ‘late’, aren't you?")).toEqual([
      'hi',
      'you',
      'are',
      'late',
      'are',
      'not',
      'you',
    ]);
  });
});

describe('wordErrors', () => {
  it('counts substitutions, deletions and insertions over the reference words', () => {
    expect(wordErrors('the cat sat', 'the hat sat down')).toEqual({
      words: 3,
      errors: 2,
      rate: 2 / 3,
    });
    expect(wordErrors('one two three four', 'one three four')).toMatchObject({ errors: 1 });
  });

  it('is zero for the same words however they are written', () => {
    expect(wordErrors('Welcome to the quiz!', 'welcome to the quiz').rate).toBe(0);
    expect(wordErrors('', '').rate).toBe(0);
    expect(wordErrors('', 'noise').rate).toBe(Infinity);
  });
});
