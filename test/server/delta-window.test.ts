/**
 * The send window of text deltas (DELTA_BATCH_MS): an item's first delta
 * leaves at once, the deltas after it within the window leave joined as one
 * event, in order, before any other event, and nothing waits longer than
 * the window.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createDeltaWindow } from '../../src/server/delta-window.js';
import type { ServerEvent } from '../../src/session/events.js';
import { connect } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { textOf, turn } from '../helpers/session.js';
import { within } from '../helpers/wait.js';

function delta(delta: string, itemId = 'item_a', responseId = 'resp_1'): ServerEvent {
  return {
    type: 'response.output_text.delta',
    response_id: responseId,
    item_id: itemId,
    output_index: 0,
    content_index: 0,
    delta,
  };
}

function textDone(text: string, itemId = 'item_a'): ServerEvent {
  return {
    type: 'response.output_text.done',
    response_id: 'resp_1',
    item_id: itemId,
    output_index: 0,
    content_index: 0,
    text,
  };
}

/** What went out: a delta's text, or another event's type. */
function seen(events: ServerEvent[]): string[] {
  return events.map((e) => (e.type === 'response.output_text.delta' ? e.delta : e.type));
}

describe('delta window', () => {
  it('sends every event at once when the window is 0', () => {
    const out: ServerEvent[] = [];
    const w = createDeltaWindow(0, (e) => out.push(e));
    w.send(delta('a'));
    w.send(delta('b'));
    w.send(delta('c'));
    expect(seen(out)).toEqual(['a', 'b', 'c']);
  });

  it('sends an item’s first delta at once and joins the next ones until another event', () => {
    const out: ServerEvent[] = [];
    // A window far longer than the test: only events end it here.
    const w = createDeltaWindow(60_000, (e) => out.push(e));
    w.send(delta('Hel'));
    expect(seen(out)).toEqual(['Hel']);
    w.send(delta('lo'));
    w.send(delta(', '));
    w.send(delta('"wo\\rld"\n'));
    expect(seen(out)).toEqual(['Hel']);
    w.send(textDone('Hello, "wo\\rld"\n'));
    expect(seen(out)).toEqual(['Hel', 'lo, "wo\\rld"\n', 'response.output_text.done']);
    // The joined event keeps the item's place.
    expect(out[1]).toEqual(delta('lo, "wo\\rld"\n'));
    // The deltas that went out make the item's text.
    const text = out.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    expect(text.join('')).toBe('Hello, "wo\\rld"\n');
    w.close();
  });

  it('sends a new item’s first delta at once, after what the last item held', () => {
    const out: ServerEvent[] = [];
    const w = createDeltaWindow(60_000, (e) => out.push(e));
    w.send(delta('a1', 'item_a'));
    w.send(delta('a2', 'item_a'));
    w.send(delta('b1', 'item_b'));
    expect(out.map((e) => [(e as { item_id: string }).item_id, seen([e])[0]])).toEqual([
      ['item_a', 'a1'],
      ['item_a', 'a2'],
      ['item_b', 'b1'],
    ]);
    w.send(delta('b2', 'item_b'));
    w.flush();
    expect(seen(out)).toEqual(['a1', 'a2', 'b1', 'b2']);
    w.close();
  });

  it('lets a held delta go when the window ends', async () => {
    const out: ServerEvent[] = [];
    let all!: () => void;
    const arrived = new Promise<void>((resolve) => (all = resolve));
    const w = createDeltaWindow(5, (e) => {
      out.push(e);
      if (seen(out).join('') === 'abc') all();
    });
    w.send(delta('a'));
    w.send(delta('b'));
    w.send(delta('c'));
    // Either joined (held, then sent by the clock) or sent as they came on a
    // slow machine: all arrive, in order, without another event to push them.
    await within(arrived, 'the held deltas');
    expect(out.length).toBeLessThanOrEqual(3);
    w.close();
  });

  it('drops what it holds once closed', () => {
    const out: ServerEvent[] = [];
    const w = createDeltaWindow(60_000, (e) => out.push(e));
    w.send(delta('a'));
    w.send(delta('b'));
    w.close();
    w.flush();
    expect(seen(out)).toEqual(['a']);
  });
});

describe('delta window on a server (DELTA_BATCH_MS)', () => {
  let t: TestServer | undefined;
  afterAll(() => t?.close());

  it('sends each item’s first delta alone and the rest joined, complete and in order', async () => {
    // A window far longer than the turn: the held deltas leave with the item's end.
    t = await startTestServer({ env: { DELTA_BATCH_MS: '1000' } });
    for (const dialect of ['openai', 'openai-beta']) {
      const deltaType = dialect === 'openai' ? 'response.output_text.delta' : 'response.text.delta';
      const doneType = dialect === 'openai' ? 'response.output_text.done' : 'response.text.done';
      const c = await connect(`${t.wsUrl}?character=weather&dialect=${dialect}`);
      await c.next('session.created');
      const events = await turn(c, 'Celsius, please.');
      const done = events.filter((e) => e.type === doneType);
      expect(done.map((e) => e.text)).toEqual([
        'Checking Glasgow. ',
        "It's 5 °C and windy in Glasgow right now.",
      ]);
      for (const end of done) {
        const at = events.indexOf(end);
        const deltas = events.filter((e) => e.type === deltaType && e.item_id === end.item_id);
        // Every delta of the item before its done event, and they make its text.
        expect(deltas.every((d) => events.indexOf(d) < at)).toBe(true);
        expect(deltas.map((d) => d.delta).join('')).toBe(end.text);
        // The first alone (not held), the rest in one frame at most.
        expect(deltas.length).toBeGreaterThanOrEqual(1);
        expect(deltas.length).toBeLessThanOrEqual(2);
        expect((deltas[0]!.delta as string).length).toBeLessThan((end.text as string).length);
      }
      expect(textOf(events, deltaType)).toBe(done.map((e) => e.text).join(''));
      await c.close();
    }
  });
});
