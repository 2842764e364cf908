/**
 * Speech-to-text providers behind the `SttProvider` interface, and the
 * factory that picks one from configuration.
 */
import { ConfigError } from '../../errors.js';
import { KyutaiSttProvider } from './kyutai.js';
import { OpenAiSttProvider } from './openai.js';
import { PocketsphinxSttProvider } from './pocketsphinx.js';
import type { SttProvider } from '../types.js';
import type { SttLogger } from './common.js';

export { SILENT_LOGGER } from './common.js';
export type { SttLogger } from './common.js';
export * from './kyutai.js';
export * from './openai.js';
export * from './pocketsphinx.js';
export {
  DEFAULT_KYUTAI_API_KEY,
  KYUTAI_FRAME_SAMPLES,
  KYUTAI_SAMPLE_RATE_HZ,
  KYUTAI_PAUSE_PRS_INDEX,
} from './kyutai-protocol.js';

/** Which engine, and where (the shape of `config.voice.stt`). */
export type SttConfig = {
  provider: 'pocketsphinx' | 'openai' | 'kyutai' | 'none';
  /** `openai`: base URL ending in /v1; `kyutai`: the server's ws:// root. */
  baseURL?: string;
  apiKey?: string;
  /** `openai` only. @defaultValue 'whisper-1' */
  model?: string;
  /** Language hint for engines that take one (`openai`). */
  language?: string;
  /** `pocketsphinx` only: most worker threads. @defaultValue one per core */
  workers?: number;
  /** `pocketsphinx` only: partial hypotheses every this many ms of speech; 0 = off. @defaultValue 0 */
  partialEveryMs?: number;
};

/** Options of {@link createSttProvider}. */
export interface CreateSttOptions {
  /** A pino logger (or anything of its shape). @defaultValue silent */
  log?: SttLogger;
}

/**
 * Creates the configured engine; `none` gives null (a text-only server).
 * Engines connect or load lazily, on first use; `health()` says whether
 * they can.
 *
 * @example
 * const stt = createSttProvider({ provider: 'kyutai', baseURL: 'ws://127.0.0.1:8090' }, { log });
 * const stream = stt?.open({ signal, onEvent });
 */
export function createSttProvider(
  config: SttConfig,
  options: CreateSttOptions = {},
): SttProvider | null {
  const log = options.log;
  switch (config.provider) {
    case 'none':
      return null;
    case 'pocketsphinx':
      return new PocketsphinxSttProvider({
        ...(config.workers ? { maxWorkers: config.workers } : {}),
        ...(config.partialEveryMs ? { partialEveryMs: config.partialEveryMs } : {}),
        ...(log ? { log } : {}),
      });
    case 'openai':
      return new OpenAiSttProvider({
        ...(config.baseURL ? { baseURL: config.baseURL } : {}),
        ...(config.apiKey ? { apiKey: config.apiKey } : {}),
        ...(config.model ? { model: config.model } : {}),
        ...(config.language ? { language: config.language } : {}),
        ...(log ? { log } : {}),
      });
    case 'kyutai':
      return new KyutaiSttProvider({
        ...(config.baseURL ? { url: config.baseURL } : {}),
        ...(config.apiKey ? { apiKey: config.apiKey } : {}),
        ...(log ? { log } : {}),
      });
    default:
      // Reached only from untyped callers (JavaScript, a hand-built config).
      throw new ConfigError(
        `unknown STT provider "${String((config as { provider: unknown }).provider)}"; use pocketsphinx, openai, kyutai or none.`,
      );
  }
}
