import { describe, expect, it } from 'vitest';
import { REPEAT_SIGNAL_MS, signalRepeats } from '../../src/server/signals.js';

describe('signalRepeats', () => {
  it('takes a signal delivered twice at once as one, and a later one as new', () => {
    let now = 0;
    const fresh = signalRepeats(() => now);
    expect(fresh('SIGINT')).toBe(true);
    now = 3;
    expect(fresh('SIGINT')).toBe(false);
    // Another kind is another request.
    expect(fresh('SIGTERM')).toBe(true);
    // Measured from the first delivery, not from the repeat.
    now = REPEAT_SIGNAL_MS + 1;
    expect(fresh('SIGINT')).toBe(true);
  });
});
