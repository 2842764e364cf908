/**
 * The server's speech engines, made from config once and shared by every
 * session: STT, TTS and the VAD. Engines load in the background: the server
 * listens at once, and `/health` tells when they are ready.
 */
import type { Logger } from 'pino';
import type { VoiceConfig } from '../config/index.js';
import type { SessionVoice } from '../session/voice-settings.js';
import { createSttProvider } from '../voice/stt/index.js';
import { createTtsProvider } from '../voice/tts/index.js';
import type { SttProvider, TtsProvider } from '../voice/types.js';
import { loadVad } from '../voice/vad.js';

/** The speech side of a server. */
export interface ServerVoice {
  /** What sessions get; undefined when both engines are `none` (a text-only server). */
  readonly session: SessionVoice | undefined;
  readonly stt: SttProvider | null;
  readonly tts: TtsProvider | null;
  close(): Promise<void>;
}

/**
 * Creates the configured engines and loads the VAD.
 *
 * @example
 * const voice = await createServerVoice(config.voice, log);
 * createSession({ …, ...(voice.session ? { voice: voice.session } : {}) });
 */
export async function createServerVoice(config: VoiceConfig, log: Logger): Promise<ServerVoice> {
  const stt = createSttProvider(config.stt, { log: log.child({ part: 'stt' }) });
  const tts = createTtsProvider(config.tts, { log: log.child({ part: 'tts' }) });
  const warming = new AbortController();
  const close = async () => {
    warming.abort();
    await Promise.all([stt?.close(), tts?.close()]);
  };
  if (!stt && !tts) return { session: undefined, stt, tts, close };
  const vad = await loadVad();
  // Models and workers load in the background: the server listens at once,
  // and the first speaker does not wait for them.
  for (const engine of [stt, tts]) {
    engine?.warm?.(warming.signal).then(
      () => log.info({ provider: engine.name }, 'speech engine warm'),
      (err: unknown) =>
        log.warn(
          { provider: engine.name, err: (err as Error).message },
          'speech engine warm-up failed',
        ),
    );
  }
  log.info({ stt: stt?.name ?? 'none', tts: tts?.name ?? 'none' }, 'speech engines ready');
  return {
    session: {
      stt,
      tts,
      vad,
      settings: {
        vad: config.vad,
        bargeInMinMs: config.bargeInMinMs,
        pauseThreshold: config.pauseThreshold,
        audioLeadMs: config.audioLeadMs,
        maxUtteranceMs: config.maxUtteranceMs,
      },
    },
    stt,
    tts,
    close,
  };
}
