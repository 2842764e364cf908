/**
 * The frame gate: a client's lone event is handled at once, frames that
 * come back to back yield a turn of the event loop once they have had
 * their slice, and a flood past the bound is refused.
 */
import { describe, expect, it } from 'vitest';
import {
  FRAME_SLICE_MS,
  FrameGate,
  PEEK_EVENT_ID_BYTES,
  peekEventId,
} from '../../src/server/socket-guards.js';

/** Whether `next` let the frame through before a turn of the event loop. */
async function passedAtOnce(gate: FrameGate, size: number): Promise<boolean> {
  let turned = false;
  const immediate = setImmediate(() => (turned = true));
  await gate.next(size);
  clearImmediate(immediate);
  return !turned;
}

describe('frame gate', () => {
  it('lets a frame that finds none waiting through at once, however long the socket has been open', async () => {
    let now = 0;
    const gate = new FrameGate(8, () => now);
    // The client speaks seconds apart: each event starts a slice of its own.
    for (let i = 0; i < 3; i++) {
      now += 1_000;
      expect(gate.admit(10)).toBeUndefined();
      expect(await passedAtOnce(gate, 10)).toBe(true);
    }
  });

  it('yields a turn of the event loop once frames waiting together have used their slice', async () => {
    let now = 0;
    const gate = new FrameGate(8, () => now);
    for (let i = 0; i < 3; i++) expect(gate.admit(10)).toBeUndefined();
    expect(await passedAtOnce(gate, 10)).toBe(true);
    now += FRAME_SLICE_MS;
    expect(await passedAtOnce(gate, 10)).toBe(false);
    // A new slice began with the yield.
    expect(await passedAtOnce(gate, 10)).toBe(true);
  });

  it('refuses a frame past the bound with too_many_pending_events', () => {
    const gate = new FrameGate(2, () => 0);
    expect(gate.admit(1)).toBeUndefined();
    expect(gate.admit(1)).toBeUndefined();
    const refused = gate.admit(1);
    expect(refused?.wireCode).toBe('too_many_pending_events');
    expect(refused?.message).toContain('at most 2');
  });

  it("finds a refused frame's event_id without parsing the frame", () => {
    const frame = (o: object) => Buffer.from(JSON.stringify(o));
    expect(peekEventId(frame({ type: 'response.create', event_id: 'ev_1' }))).toBe('ev_1');
    expect(peekEventId(frame({ type: 'x', event_id: 'a "quoted" \\ id' }))).toBe(
      'a "quoted" \\ id',
    );
    expect(peekEventId(frame({ type: 'response.create' }))).toBeNull();
    expect(peekEventId(Buffer.from('{"type":"x","event_id":"cut'))).toBeNull();
    // Only where clients put it: near the start.
    const late = frame({ type: 'x', audio: 'A'.repeat(PEEK_EVENT_ID_BYTES), event_id: 'late' });
    expect(peekEventId(late)).toBeNull();
    const gate = new FrameGate(0, () => 0);
    expect(gate.admit(1, () => 'ev_2')?.eventId).toBe('ev_2');
  });
});
