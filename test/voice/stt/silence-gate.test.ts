import { describe, expect, it } from 'vitest';
import { SilenceGate } from '../../../src/voice/stt/silence-gate.js';

/** 20 ms at 16 kHz, silent or a loud square wave. */
const silence = () => new Int16Array(320);
const sound = () => Int16Array.from({ length: 320 }, (_, i) => (i % 20 < 10 ? 4000 : -4000));

describe('SilenceGate', () => {
  it('passes sound and the first 250 ms of each silence, and drops the rest', () => {
    const gate = new SilenceGate({ sampleRate: 16_000 });
    const passed = [sound(), ...Array.from({ length: 25 }, silence), sound(), silence()].map((c) =>
      gate.pass(c),
    );
    // 250 ms = 12.5 chunks of 20 ms: 13 silent chunks pass, 12 are dropped.
    expect(passed.slice(1, 26).filter(Boolean)).toHaveLength(13);
    expect(passed[0]).toBe(true);
    expect(passed[26]).toBe(true); // sound again
    expect(passed[27]).toBe(true); // and the silence after it counts from zero
    expect(gate.dropped).toBe(12 * 320);
  });

  it('starts counting again for a new utterance', () => {
    const gate = new SilenceGate({ sampleRate: 16_000, keepMs: 20 });
    expect([gate.pass(silence()), gate.pass(silence())]).toEqual([true, false]);
    gate.reset();
    expect(gate.pass(silence())).toBe(true);
    expect(gate.dropped).toBe(0);
  });
});
