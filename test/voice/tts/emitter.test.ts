import { describe, expect, it } from 'vitest';
import { createTtsRecorder } from '../../../src/testing/fake-tts.js';
import { createMemoryLogger } from '../../../src/testing/memory-logger.js';
import { TtsEmitter } from '../../../src/voice/tts/emitter.js';

function pcm(length: number, value = 1): Int16Array {
  return new Int16Array(length).fill(value);
}

function setup(signal = new AbortController().signal) {
  const rec = createTtsRecorder();
  const out = new TtsEmitter({ provider: 'test', signal, onEvent: rec.onEvent });
  return { rec, out };
}

describe('TtsEmitter', () => {
  it('puts a segment’s text on the next chunk when it has no position', () => {
    const { rec, out } = setup();
    out.audio(pcm(10));
    out.label('Second.');
    out.audio(pcm(5));
    out.audio(pcm(5));
    expect(rec.events.map((e) => (e.type === 'audio' ? [e.pcm.length, e.text] : e.type))).toEqual([
      [10, undefined],
      [5, 'Second.'],
      [5, undefined],
    ]);
  });

  it('splits a chunk where a positioned segment starts inside it', () => {
    const { rec, out } = setup();
    out.label('One.');
    out.label('Two.', 7);
    out.label('Three.', 9);
    out.audio(pcm(12));
    expect(rec.segments()).toEqual([
      { text: 'One.', startSample: 0 },
      { text: 'Two.', startSample: 7 },
      { text: 'Three.', startSample: 9 },
    ]);
    expect(rec.pcm().length).toBe(12);
  });

  it('puts a segment placed in the past on the next chunk, joining texts due together', () => {
    const { rec, out } = setup();
    out.audio(pcm(10));
    out.label('Late.', 3);
    out.label('Later.', 8);
    out.audio(pcm(4));
    expect(rec.texts()).toEqual(['Late. Later.']);
  });

  it('gives a word out right after the chunk in which it starts', () => {
    const { rec, out } = setup();
    out.word('hello', 0);
    out.word('world', 15);
    expect(rec.events).toEqual([]);
    out.audio(pcm(10));
    out.audio(pcm(10));
    expect(rec.events.map((e) => e.type)).toEqual(['audio', 'word', 'audio', 'word']);
    out.word('past', 3);
    expect(rec.events.at(-1)).toEqual({ type: 'word', text: 'past', startSample: 3 });
  });

  it('gives out the words still held back when the stream finishes', async () => {
    const { rec, out } = setup();
    out.word('tail', 100);
    out.audio(pcm(10));
    out.finish();
    await out.done;
    expect(rec.words()).toEqual([{ text: 'tail', startSample: 100 }]);
  });

  it('gives out nothing after an error, and resolves done once', async () => {
    const { rec, out } = setup();
    out.fail(new Error('broken'));
    out.audio(pcm(10));
    out.word('x', 0);
    out.fail(new Error('again'));
    out.finish();
    await out.done;
    expect(rec.events.map((e) => e.type)).toEqual(['error']);
    expect(out.live).toBe(false);
  });

  it('stops at once when the signal fires and tells the provider', async () => {
    const controller = new AbortController();
    const rec = createTtsRecorder();
    let stopped = 0;
    const out = new TtsEmitter({
      provider: 'test',
      signal: controller.signal,
      onEvent: rec.onEvent,
      onAbort: () => stopped++,
    });
    out.audio(pcm(4));
    controller.abort();
    out.audio(pcm(4));
    out.finish();
    await out.done;
    expect(rec.events).toHaveLength(1);
    expect(stopped).toBe(1);
  });

  it('is over from the start when the signal has already fired', async () => {
    const controller = new AbortController();
    controller.abort();
    const { rec, out } = setup(controller.signal);
    out.audio(pcm(4));
    await out.done;
    expect(rec.events).toEqual([]);
  });

  it('stops the stream, logging, when the listener throws', async () => {
    const log = createMemoryLogger();
    let stopped = 0;
    const out = new TtsEmitter({
      provider: 'test',
      signal: new AbortController().signal,
      onEvent: () => {
        throw new Error('listener bug');
      },
      onAbort: () => stopped++,
      log,
    });
    expect(() => out.audio(pcm(4))).not.toThrow();
    await out.done;
    expect(out.live).toBe(false);
    expect(stopped).toBe(1);
    expect(log.entries[0]?.level).toBe('error');
  });
});
