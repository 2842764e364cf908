/**
 * `audio.output.speed`: the session hands it to the speech engine with each
 * reply (Flite honours it; engines without a speed control ignore it).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToneTts } from '../../src/testing/fake-tts.js';
import type { TtsOpenOptions, TtsProvider } from '../../src/voice/types.js';
import type { TestServer } from '../helpers/server.js';
import { userMessage } from '../helpers/session.js';
import { openVoiceSession, startVoiceServer, voiceOf } from '../helpers/voice.js';

/** The speed each stream the engine opened was asked for (undefined: none given). */
const speeds: Array<number | undefined> = [];

/** The tone engine, noting the speed of each stream it opens. */
function speedRecordingTts(): TtsProvider {
  const tone = createToneTts({ msPerChar: 20 });
  return {
    ...tone,
    open(options: TtsOpenOptions) {
      speeds.push(options.speed);
      return tone.open(options);
    },
  };
}

let t: TestServer;
beforeAll(async () => {
  t = await startVoiceServer({
    voice: await voiceOf({ stt: null, tts: speedRecordingTts() }),
    script: { rules: [], fallback: { parts: [{ text: 'Okay.' }] } },
  });
});
afterAll(() => t?.close());

describe('audio.output.speed', () => {
  it('reaches the speech engine with each reply, and none is asked at 1', async () => {
    const c = await openVoiceSession(t, 'character=quiet', {
      output_modalities: ['audio'],
      audio: { output: { speed: 1.25 } },
    });
    const before = speeds.length;
    c.send(userMessage('Hi.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    expect(speeds.slice(before)).toEqual([1.25]);

    c.send({ type: 'session.update', session: { audio: { output: { speed: 1 } } } });
    await c.next('session.updated');
    c.send(userMessage('Hi again.'));
    c.send({ type: 'response.create' });
    await c.next('response.done');
    expect(speeds.slice(before + 1)).toEqual([undefined]);
    await c.close();
  });
});
