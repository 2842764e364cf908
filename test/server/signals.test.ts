import { describe, expect, it } from 'vitest';
import { REPEAT_SIGNAL_MS, signalRepeats } from '../../src/server/signals.js';

describe('signalRepeats', () => {
  it('takes stop signals delivered together as one, and a later one as new', () => {
    let now = 0;
    const fresh = signalRepeats(() => now);
    expect(fresh('SIGINT')).toBe(true);
    now = 3;
    expect(fresh('SIGINT')).toBe(false);
    // Any stop signal: a process manager's SIGTERM, then its SIGINT or SIGHUP.
    expect(fresh('SIGTERM')).toBe(false);
    expect(fresh('SIGHUP')).toBe(false);
    // A request of another kind is another request.
    expect(fresh('primary')).toBe(true);
    // Measured from the first delivery, not from the repeat.
    now = REPEAT_SIGNAL_MS + 1;
    expect(fresh('SIGTERM')).toBe(true);
  });
});
