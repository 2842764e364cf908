/**
 * Word error rate: how far a transcript is from the text that was spoken,
 * as word substitutions + deletions + insertions over the words spoken
 * (word-level Levenshtein distance). Used to check that a voice is easy to
 * understand: its speech is transcribed back and compared.
 */

/** Contractions written out, so that "you're" and "you are" count as the same words. */
const CONTRACTIONS: Readonly<Record<string, string>> = {
  "i'm": 'i am',
  "you're": 'you are',
  "we're": 'we are',
  "they're": 'they are',
  "it's": 'it is',
  "that's": 'that is',
  "what's": 'what is',
  "there's": 'there is',
  "let's": 'let us',
  "i'll": 'i will',
  "you'll": 'you will',
  "i've": 'i have',
  "you've": 'you have',
  "i'd": 'i would',
  "don't": 'do not',
  "can't": 'cannot',
  "won't": 'will not',
  "isn't": 'is not',
  "aren't": 'are not',
  "doesn't": 'does not',
};

/**
 * Lower-cases, writes contractions out, spells out what TTS engines read aloud differently from how
 * it is written, and splits into words: punctuation goes, apostrophes stay
 * inside words (`don't`), hyphens and slashes separate.
 *
 * @example normaliseWords("Hi! Who'd you like—me to greet?") // ['hi', 'who', 'would', 'you', 'like', 'me', 'to', 'greet']
 */
export function normaliseWords(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[‘’]/g, "'")
    .replace(/&/g, ' and ')
    .replace(/[^a-z0-9']+/g, ' ')
    .split(' ')
    .map((w) => w.replace(/^'+|'+$/g, ''))
    .flatMap((w) => (CONTRACTIONS[w] ?? w).split(' '))
    .filter((w) => w !== '');
}

/** The counts behind a word error rate. */
export interface WordErrors {
  /** Words in the reference. */
  words: number;
  /** Substitutions + deletions + insertions (the edit distance). */
  errors: number;
  /** errors / words (0 when both are empty; Infinity for words heard in silence). */
  rate: number;
}

/**
 * Compares a transcript with the reference text.
 *
 * @example wordErrors('the cat sat', 'the hat sat down').errors // 2
 */
export function wordErrors(reference: string, hypothesis: string): WordErrors {
  const ref = normaliseWords(reference);
  const hyp = normaliseWords(hypothesis);
  let previous = Array.from({ length: hyp.length + 1 }, (_, j) => j);
  for (let i = 1; i <= ref.length; i++) {
    const row = [i];
    for (let j = 1; j <= hyp.length; j++) {
      const substitution = previous[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1);
      row.push(Math.min(substitution, previous[j]! + 1, row[j - 1]! + 1));
    }
    previous = row;
  }
  const errors = previous[hyp.length]!;
  const rate = ref.length === 0 ? (errors === 0 ? 0 : Infinity) : errors / ref.length;
  return { words: ref.length, errors, rate };
}
