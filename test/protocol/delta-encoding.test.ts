/**
 * Text deltas take a fast path in the encoder (pre-built JSON before the
 * delta text): the frames must be exactly what serialising the event gives.
 */
import { describe, expect, it } from 'vitest';
import { createEncoder } from '../../src/protocol/index.js';
import type { ServerEvent } from '../../src/session/events.js';

const TEXTS = [
  'Hello',
  '',
  ' "quoted" \\ back\\slash\n\ttab',
  'émoji 🌧️ and 中文',
  '\u2028\u2029 separators, a lone \ud800 surrogate',
  '</script>{"type":"fake"}',
];

function delta(item: string, outputIndex: number, text: string): ServerEvent {
  return {
    type: 'response.output_text.delta',
    response_id: 'resp_1',
    item_id: item,
    output_index: outputIndex,
    content_index: 0,
    delta: text,
  };
}

describe('text delta frames', () => {
  for (const [dialect, type] of [
    ['openai', 'response.output_text.delta'],
    ['openai-beta', 'response.text.delta'],
  ] as const) {
    it(`are the event's JSON with its event id last (${dialect})`, () => {
      const encoder = createEncoder(dialect);
      const ids = new Set<string>();
      // Two stretches of text (a tool call between them), and back to the first shape.
      const events = [
        ...TEXTS.map((t) => delta('item_a', 0, t)),
        ...TEXTS.map((t) => delta('item_b', 2, t)),
        delta('item_a', 0, 'again'),
      ];
      for (const event of events) {
        const frame = encoder.encode(event)!;
        const parsed = JSON.parse(frame) as Record<string, unknown>;
        const { type: _type, ...rest } = event;
        expect(parsed).toEqual({ type, ...rest, event_id: parsed.event_id });
        // Same members in the same order as serialising the event would give.
        expect(Object.keys(parsed)).toEqual([
          'type',
          'response_id',
          'item_id',
          'output_index',
          'content_index',
          'delta',
          'event_id',
        ]);
        expect(frame).toBe(JSON.stringify(parsed));
        ids.add(parsed.event_id as string);
      }
      expect(ids.size).toBe(events.length);
    });
  }

  it('are not sent in the unmute dialect as Realtime deltas', () => {
    const encoder = createEncoder('unmute');
    const frame = encoder.encode(delta('item_a', 0, 'Hi'));
    if (frame !== null) expect(JSON.parse(frame).type).not.toBe('response.output_text.delta');
  });
});
