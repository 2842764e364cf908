/**
 * The word timing of a spoken item, kept after its response ended so a late
 * `conversation.item.truncate` can still cut it to what was heard.
 */

/** When each word of an item's speech starts in its audio, and how much audio the client has. */
export interface SpokenTiming {
  /** The item's words in order, each with the space before it. */
  text: string;
  /** Where each word ends in `text`. */
  ends: Uint32Array;
  /** The sample of the item's audio where each word starts (only words placed in its audio). */
  starts: Float64Array;
  /** Samples a millisecond of the item's audio holds (its wire rate). */
  samplesPerMs: number;
  /** Ms of audio the client has: what was sent, or less once it was truncated. */
  ms: number;
}

/** A word of an item's speech and the sample its audio starts at (null: never placed). */
export interface TimedWord {
  text: string;
  at: number | null;
}

/**
 * The timing of words spoken in an item, compact: the text once and two
 * numbers a word. `audioStarted` false: the client got none of its audio,
 * so it heard none of its words.
 */
export function timingOf(
  words: Iterable<TimedWord>,
  audioStarted: boolean,
  samplesPerMs: number,
  ms: number,
): SpokenTiming {
  let text = '';
  const ends: number[] = [];
  const starts: number[] = [];
  if (audioStarted) {
    for (const word of words) {
      // Words are heard in order: one never placed, and all after it, are not.
      if (word.at === null) break;
      text += word.text;
      ends.push(text.length);
      starts.push(word.at);
    }
  }
  return {
    text,
    ends: Uint32Array.from(ends),
    starts: Float64Array.from(starts),
    samplesPerMs,
    ms,
  };
}

/**
 * What the listener heard of an item whose audio was cut at `audioEndMs`:
 * the words that started before it (as `SpeechOutput.heardUntil` says of
 * an item still speaking).
 */
export function heardBy(timing: SpokenTiming, audioEndMs: number): string {
  const cut = audioEndMs * timing.samplesPerMs;
  let end = 0;
  for (const [k, start] of timing.starts.entries()) {
    if (start >= cut) break;
    end = timing.ends[k]!;
  }
  return timing.text.slice(0, end).trimEnd();
}
