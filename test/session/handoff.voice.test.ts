/**
 * A handoff in a voice session: the character taking over answers in its
 * own voice, and `session.updated` shows that voice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToneTts } from '../../src/testing/index.js';
import type { TtsProvider } from '../../src/voice/types.js';
import { character } from '../helpers/characters.js';
import { say } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { openSession } from '../helpers/session.js';
import { fakeVoice, spokenText, startVoiceServer } from '../helpers/voice.js';

/** The tone engine, recording the voice each response's speech was opened with. */
function recordingTts(voices: string[]): TtsProvider {
  const tts = createToneTts({ msPerChar: 5 });
  return {
    ...tts,
    open(options) {
      voices.push(options.voice ?? '(default)');
      return tts.open(options);
    },
  };
}

const voices: string[] = [];
let t: TestServer;
beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice({ tts: recordingTts(voices) }),
    characters: {
      'desk.ts': character({
        name: 'Desk',
        prompt: 'You are the desk.',
        extra: "handoffs: ['teller'], voice: { tone: 'alto' },",
      }),
      'teller.ts': character({
        name: 'Teller',
        prompt: 'You are the teller.',
        extra: "voice: { tone: 'bass' },",
      }),
    },
    script: {
      rules: [
        {
          when: { system: 'You are the desk.', user: 'story' },
          reply: {
            parts: [
              { text: 'One moment. ' },
              { toolCall: { name: 'transfer_to_teller', arguments: { reason: 'a story' } } },
            ],
          },
        },
        {
          when: { system: 'You are the teller.' },
          reply: { parts: [{ text: 'Once upon a time.' }] },
        },
      ],
    },
  });
});
afterAll(() => t?.close());

describe('a handoff in a voice session', () => {
  it('speaks the new character in its voice', async () => {
    const c = await openSession(t, 'character=desk');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    say(c, 'Tell me a story.');
    const first = await c.untilDone();
    const second = await c.untilDone();
    expect(spokenText(first)).toBe('One moment.');
    expect(spokenText(second)).toBe('Once upon a time.');
    const updated = second.find((e) => e.type === 'session.updated')!.session as {
      character: string;
      audio: { output: { voice: string } };
    };
    expect(updated.character).toBe('teller');
    expect(updated.audio.output.voice).toBe('bass');
    expect(voices).toEqual(['alto', 'bass']);
    await c.close();
  });
});
