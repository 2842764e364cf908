import { describe, expect, it } from 'vitest';
import { createToneTts, createTtsRecorder } from '../../../src/testing/fake-tts.js';

describe('the in-process tone TTS', () => {
  it('speaks each segment as a tone as long as its text, with its text and words', async () => {
    const tts = createToneTts({ msPerChar: 10 });
    expect(tts.sampleRate).toBe(24_000);
    const rec = createTtsRecorder();
    const stream = tts.open({ signal: new AbortController().signal, onEvent: rec.onEvent });
    stream.push('Hi there.');
    stream.push('  ');
    stream.push('Bye.');
    // Nothing is given out inside push(), as with a real engine.
    expect(rec.events).toEqual([]);
    await stream.end();
    expect(rec.segments()).toEqual([
      { text: 'Hi there.', startSample: 0 },
      { text: 'Bye.', startSample: 9 * 240 },
    ]);
    expect(rec.pcm().length).toBe(13 * 240);
    expect(rec.words()).toEqual([
      { text: 'Hi', startSample: 0 },
      { text: 'there.', startSample: 3 * 240 },
      { text: 'Bye.', startSample: 9 * 240 },
    ]);
    // Every word follows the chunk its speech starts in.
    let heard = 0;
    for (const event of rec.events) {
      if (event.type === 'audio') heard += event.pcm.length;
      if (event.type === 'word') expect(event.startSample).toBeLessThan(heard);
    }
  });

  it('takes its name and rate from the options', () => {
    const tts = createToneTts({ name: 'espeak', sampleRate: 22_050 });
    expect([tts.name, tts.sampleRate]).toEqual(['espeak', 22_050]);
  });

  it('gives out nothing once the signal has fired', async () => {
    const tts = createToneTts();
    const controller = new AbortController();
    const rec = createTtsRecorder();
    const stream = tts.open({ signal: controller.signal, onEvent: rec.onEvent });
    stream.push('This will not be heard.');
    controller.abort();
    await stream.end();
    expect(rec.events).toEqual([]);
  });
});
