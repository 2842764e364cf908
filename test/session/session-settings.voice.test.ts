/**
 * The voice a session speaks with: OpenAI's names mapped to the engine's
 * voices, an unknown one falling back with a warning in the session object.
 */
import { describe, expect, it } from 'vitest';
import type { CharacterOpening } from '../../src/characters/conversation.js';
import type { LoadedCharacter } from '../../src/characters/types.js';
import { SessionConfig, defaultSettings } from '../../src/session/session-settings.js';
import type { SessionVoice } from '../../src/session/voice-settings.js';
import type { TtsProvider } from '../../src/voice/types.js';

const kit = {
  stt: null,
  tts: { name: 'flite', voiceEngine: 'flite', defaultVoice: 'rms' } as unknown as TtsProvider,
  vad: {},
  settings: {},
} as unknown as SessionVoice;

const character = { voice: { flite: 'rms:0.9' } } as unknown as LoadedCharacter;

/** A character that names no voice, and what it opens with. */
const voiceless = {
  id: 'quiet',
  name: 'Quiet',
  voice: {},
  llm: {},
  toolNames: [],
} as unknown as LoadedCharacter;
const opening = { variant: 'default', systemPrompt: 'Be brief.' } as CharacterOpening;

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

  it("shows the engine's default voice when neither the client nor the character names one", () => {
    const shown = configWith(null).sessionObject('sess_1', voiceless, opening, {});
    // What speaks is the engine's default, and the session says which.
    expect(shown.audio.output.voice).toBe('rms');
  });

  it('shows no voice on a server without text-to-speech', () => {
    const config = new SessionConfig(defaultSettings(undefined), undefined);
    const shown = config.sessionObject('sess_1', voiceless, opening, {});
    expect(shown.audio.output).not.toHaveProperty('voice');
  });
});
