/**
 * Text-to-speech providers behind the {@link TtsProvider} interface, and the
 * factory that picks one from configuration.
 */
import { ConfigError } from '../../errors.js';
import type { TtsProvider } from '../types.js';
import type { TtsLogger } from './emitter.js';
import { createEspeakTts } from './espeak.js';
import { createFliteTts } from './flite.js';
import { createKyutaiTts } from './kyutai.js';
import { createOpenAiTts } from './openai.js';

export * from './emitter.js';
export * from './espeak.js';
export * from './flite.js';
export * from './kyutai.js';
export * from './openai.js';
export * from './pcm.js';

/** Which engine speaks, and how to reach it. */
export type TtsConfig = {
  provider: 'flite' | 'espeak' | 'openai' | 'kyutai' | 'none';
  /** `openai`: the base URL up to `/v1`; `kyutai`: the server, `ws://host:8089`. */
  baseURL?: string;
  /** `openai`: the bearer key; `kyutai`: the `kyutai-api-key` header. */
  apiKey?: string;
  /** `openai` only. @defaultValue 'tts-1' */
  model?: string;
  /** The voice when the character names none (each provider has its own default). */
  voice?: string;
  /** `flite` and `espeak`: worker threads. @defaultValue one per core */
  workers?: number;
  /** `openai`: the rate audio is given out at (asked for with `sample_rate`; other rates are resampled). @defaultValue 24000 */
  sampleRate?: number;
  /** `openai`: whose voice names the server takes. @defaultValue 'openai' */
  voiceSet?: 'openai' | 'kokoro' | 'piper';
  /** `openai`: ask for raw `pcm` or `wav`. @defaultValue 'pcm' */
  responseFormat?: 'pcm' | 'wav';
};

/** Options of {@link createTtsProvider}. */
export interface CreateTtsProviderOptions {
  /** A pino logger (or anything with its four methods). */
  log?: TtsLogger;
}

/**
 * Creates the configured TTS provider, or null for `none` (text-only).
 * Throws a {@link ConfigError} when a remote provider has no `baseURL`.
 *
 * @example
 * const tts = createTtsProvider({ provider: 'flite', voice: 'rms' }, { log });
 * const tts2 = createTtsProvider({ provider: 'openai', baseURL: 'https://api.openai.com/v1', apiKey });
 */
export function createTtsProvider(
  config: TtsConfig,
  options: CreateTtsProviderOptions = {},
): TtsProvider | null {
  const log = options.log;
  switch (config.provider) {
    case 'none':
      return null;
    case 'flite':
      return createFliteTts({ voice: config.voice, workers: config.workers, log });
    case 'espeak':
      return createEspeakTts({ voice: config.voice, workers: config.workers, log });
    case 'openai':
      return createOpenAiTts({
        baseURL: required(config, 'http://127.0.0.1:8880/v1'),
        apiKey: config.apiKey,
        model: config.model,
        voice: config.voice,
        ...(config.sampleRate ? { sampleRate: config.sampleRate } : {}),
        ...(config.voiceSet ? { voiceSet: config.voiceSet } : {}),
        ...(config.responseFormat ? { responseFormat: config.responseFormat } : {}),
        log,
      });
    case 'kyutai':
      return createKyutaiTts({
        url: required(config, 'ws://127.0.0.1:8089'),
        apiKey: config.apiKey,
        voice: config.voice,
        log,
      });
    default: {
      const provider: never = config.provider;
      throw new ConfigError(
        `Unknown TTS provider "${String(provider)}"; use flite, espeak, openai, kyutai or none.`,
      );
    }
  }
}

function required(config: TtsConfig, example: string): string {
  if (config.baseURL === undefined || config.baseURL.trim() === '') {
    throw new ConfigError(
      `The ${config.provider} TTS provider needs a base URL (e.g. ${example}); ` +
        'set it, or choose provider flite for offline speech.',
    );
  }
  return config.baseURL;
}
