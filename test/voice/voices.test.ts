import { describe, expect, it } from 'vitest';
import {
  OPENAI_VOICES,
  VOICE_TABLES,
  resolveVoice,
  voiceEngineOf,
} from '../../src/voice/voices.js';
import { parseFliteVoice } from '../../src/voice/tts/flite.js';

describe('resolveVoice', () => {
  it('maps every OpenAI voice name to a voice of each engine with a table', () => {
    for (const engine of ['openai', 'kokoro', 'piper', 'flite', 'espeak'] as const) {
      for (const name of OPENAI_VOICES) {
        const { voice, warning } = resolveVoice(engine, name, undefined);
        expect(warning, `${engine} ${name}`).toBeUndefined();
        expect(voice, `${engine} ${name}`).toBe(VOICE_TABLES[engine][name]);
      }
    }
    for (const voice of Object.values(VOICE_TABLES.flite)) {
      expect(parseFliteVoice(voice), voice).toBeDefined();
    }
  });

  it('maps the seed characters’ nova and fable for servers that do not have them', () => {
    expect(resolveVoice('kokoro', undefined, 'nova')).toEqual({ voice: 'af_nova' });
    expect(resolveVoice('piper', undefined, 'fable')).toEqual({ voice: 'en_GB-alan-medium' });
    expect(resolveVoice('openai', undefined, 'fable')).toEqual({ voice: 'fable' });
  });

  it('passes an engine’s own voice names through', () => {
    expect(resolveVoice('kokoro', 'bf_emma', undefined)).toEqual({ voice: 'bf_emma' });
    expect(resolveVoice('piper', 'en_US-lessac-high', undefined)).toEqual({
      voice: 'en_US-lessac-high',
    });
    expect(resolveVoice('flite', 'awb:1.1', 'rms')).toEqual({ voice: 'awb:1.1' });
    expect(resolveVoice('espeak', 'fr', undefined)).toEqual({ voice: 'fr' });
    expect(
      resolveVoice('kyutai', 'expresso/ex03-ex01_happy_001_channel1_334s.wav', undefined),
    ).toMatchObject({ voice: 'expresso/ex03-ex01_happy_001_channel1_334s.wav' });
  });

  it('falls back to the character’s voice, with a warning, for a voice the engine lacks', () => {
    expect(resolveVoice('openai', 'klingon', 'nova')).toEqual({
      voice: 'nova',
      warning: 'Voice "klingon" is not one the openai engine has; using "nova".',
    });
    expect(resolveVoice('flite', 'alloy', 'rms:0.9')).toEqual({ voice: 'slt' });
    expect(resolveVoice('kyutai', 'alloy', undefined)).toEqual({
      voice: undefined,
      warning: 'Voice "alloy" is not one the kyutai engine has; using the engine\'s default.',
    });
  });

  it('uses the character’s voice when none is asked for, and says so when the engine lacks it', () => {
    expect(resolveVoice('flite', undefined, 'rms:0.9')).toEqual({ voice: 'rms:0.9' });
    expect(resolveVoice('flite', undefined, undefined)).toEqual({ voice: undefined });
    expect(resolveVoice('flite', '  ', 'bogus')).toEqual({
      voice: undefined,
      warning:
        'The character\'s voice "bogus" is not one the flite engine has; using the engine\'s default.',
    });
  });
});

describe('voiceEngineOf', () => {
  it('names the voice family of each provider', () => {
    expect(voiceEngineOf('openai')).toBe('openai');
    expect(voiceEngineOf('openai', 'kokoro')).toBe('kokoro');
    expect(voiceEngineOf('flite')).toBe('flite');
    expect(voiceEngineOf('tone')).toBeUndefined();
  });
});
