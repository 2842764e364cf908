import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { createTtsProvider } from '../../../src/voice/tts/index.js';

describe('createTtsProvider', () => {
  it('gives no provider for none (text only)', () => {
    expect(createTtsProvider({ provider: 'none' })).toBeNull();
  });

  it('creates each engine with its own rate, starting nothing until used', async () => {
    const flite = createTtsProvider({ provider: 'flite', voice: 'slt', workers: 1 });
    const espeak = createTtsProvider({ provider: 'espeak', voice: 'en-gb', workers: 1 });
    const openai = createTtsProvider({ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1' });
    const kyutai = createTtsProvider({ provider: 'kyutai', baseURL: 'ws://127.0.0.1:1' });
    expect([flite?.name, flite?.sampleRate]).toEqual(['flite', 16_000]);
    expect([espeak?.name, espeak?.sampleRate]).toEqual(['espeak', 22_050]);
    expect([openai?.name, openai?.sampleRate]).toEqual(['openai', 24_000]);
    expect([kyutai?.name, kyutai?.sampleRate]).toEqual(['kyutai', 24_000]);
    await Promise.all([flite?.close(), espeak?.close(), openai?.close(), kyutai?.close()]);
  });

  it('names the voice each engine speaks with when a stream names none', async () => {
    const flite = createTtsProvider({ provider: 'flite', workers: 1 });
    const espeak = createTtsProvider({ provider: 'espeak', voice: 'en-gb', workers: 1 });
    const openai = createTtsProvider({ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1' });
    const kyutai = createTtsProvider({ provider: 'kyutai', baseURL: 'ws://127.0.0.1:1' });
    const named = createTtsProvider({
      provider: 'kyutai',
      baseURL: 'ws://127.0.0.1:1',
      voice: 'expresso/ex03.wav',
    });
    expect(flite?.defaultVoice).toBe('rms');
    expect(espeak?.defaultVoice).toBe('en-gb');
    expect(openai?.defaultVoice).toBe('alloy');
    // Kyutai's server picks its own voice, which it does not name.
    expect(kyutai?.defaultVoice).toBeUndefined();
    expect(named?.defaultVoice).toBe('expresso/ex03.wav');
    await Promise.all([flite, espeak, openai, kyutai, named].map((p) => p?.close()));
  });

  it('says what to set when a remote engine has no base URL', () => {
    expect(() => createTtsProvider({ provider: 'openai' })).toThrow(ConfigError);
    expect(() => createTtsProvider({ provider: 'kyutai', baseURL: ' ' })).toThrow(
      /needs a base URL \(e\.g\. ws:\/\/127\.0\.0\.1:8089\)/,
    );
  });

  it('rejects an unknown provider name from untyped configuration', () => {
    const config = { provider: 'festival' } as unknown as Parameters<typeof createTtsProvider>[0];
    expect(() => createTtsProvider(config)).toThrow(/Unknown TTS provider "festival"/);
  });
});
