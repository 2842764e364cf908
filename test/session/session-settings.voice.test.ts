/**
 * The voice a session speaks with: OpenAI's names mapped to the engine's
 * voices, an unknown one falling back with a warning in the session object.
 */
import { describe, expect, it } from 'vitest';
import type { LoadedCharacter } from '../../src/characters/types.js';
import { SessionConfig, defaultSettings } from '../../src/session/session-settings.js';
import type { SessionVoice } from '../../src/session/voice-settings.js';
import type { TtsProvider } from '../../src/voice/types.js';

const kit = {
  stt: null,
  tts: { name: 'flite', voiceEngine: 'flite' } as unknown as TtsProvider,
  vad: {},
  settings: {},
} as unknown as SessionVoice;

const character = { voice: { flite: 'rms:0.9' } } as unknown as LoadedCharacter;

function configWith(voice: string | null): SessionConfig {
  const state = defaultSettings(kit);
  state.voice = voice;
  return new SessionConfig(state, kit);
}

describe('SessionConfig voices', () => {
  it("speaks with the character's voice when the client names none", () => {
    expect(configWith(null).resolvedVoice(character)).toEqual({ voice: 'rms:0.9' });
  });

  it("maps an OpenAI voice name to one of the engine's voices", () => {
    const r = configWith('alloy').resolvedVoice(character);
    expect(r.warning).toBeUndefined();
    expect(r.voice).toBeTruthy();
    expect(r.voice).not.toBe('alloy');
  });

  it("falls back to the character's voice with a warning for a voice the engine lacks", () => {
    const r = configWith('no-such-voice').resolvedVoice(character);
    expect(r.voice).toBe('rms:0.9');
    expect(r.warning).toContain('no-such-voice');
  });
});
