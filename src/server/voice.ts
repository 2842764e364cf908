/**
 * The server's speech engines, made from config once and shared by every
 * session: STT, TTS and the VAD. Engines load in the background: the server
 * listens at once, and `/health` tells when they are ready.
 */
import type { Logger } from 'pino';
import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { VoiceConfig } from '../config/index.js';
import type { SessionVoice } from '../session/voice-settings.js';
import { PocketsphinxSttProvider, createSttProvider } from '../voice/stt/index.js';
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
export async function createServerVoice(
  config: VoiceConfig,
  log: Logger,
  registry?: Registry,
): Promise<ServerVoice> {
  const stt = createSttProvider(config.stt, { log: log.child({ part: 'stt' }) });
  if (registry && stt instanceof PocketsphinxSttProvider) registerSttCapacity(registry, stt);
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
  void warmEngines([stt, tts], warming.signal, log);
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

/** An engine that may warm up. */
type Warmable = Pick<SttProvider, 'name' | 'warm'>;

/**
 * Starts each engine's warm-up (its models and workers) and logs how each
 * ended. One stopped by `signal` (the server closing during start-up, e.g.
 * Ctrl+C) is not a failure and is not warned about. Settles when every
 * warm-up has ended; never rejects.
 *
 * @example void warmEngines([stt, tts], warming.signal, log);
 */
export async function warmEngines(
  engines: ReadonlyArray<Warmable | null>,
  signal: AbortSignal,
  log: Pick<Logger, 'info' | 'warn' | 'debug'>,
): Promise<void> {
  await Promise.all(
    engines.map(async (engine) => {
      if (!engine?.warm) return;
      try {
        await engine.warm(signal);
        log.info({ provider: engine.name }, 'speech engine warm');
      } catch (err) {
        if (signal.aborted) {
          log.debug({ provider: engine.name }, 'speech engine warm-up stopped');
          return;
        }
        log.warn(
          { provider: engine.name, err: (err as Error).message },
          'speech engine warm-up failed',
        );
      }
    }),
  );
}

/**
 * Gauges of the embedded STT's capacity, read when `/metrics` is scraped:
 * whether it keeps up with the speakers, or audio waits to be decoded.
 */
export function registerSttCapacity(registry: Registry, stt: PocketsphinxSttProvider): void {
  // With workers each has its own STT: ratios and the worst case are the
  // worst worker's (max), counts are summed.
  const gauge = (
    name: string,
    help: string,
    read: () => number,
    aggregator: 'max' | 'sum' = 'max',
  ): void => {
    new Gauge({
      name,
      help,
      aggregator,
      labelNames: ['provider'],
      registers: [registry],
      collect() {
        this.set({ provider: stt.name }, read());
      },
    });
  };
  gauge(
    'troupe_stt_real_time_factor',
    'Decode time / audio time per stream, over the last 20 utterances (above 1: a stream cannot keep up).',
    () => stt.stats().recentRealTimeFactor,
  );
  gauge(
    'troupe_stt_backlog_seconds',
    'Audio sent to the STT decoders and not decoded yet (the worst worker), in seconds.',
    () => stt.stats().backlogMs / 1000,
  );
  gauge(
    'troupe_stt_streams_waiting',
    'Speakers waiting for a free STT decoder.',
    () => stt.stats().waiting,
    'sum',
  );
  gauge('troupe_stt_workers', 'STT worker threads running.', () => stt.stats().workers, 'sum');
  gauge(
    'troupe_stt_saturated',
    '1 while the STT cannot keep up: speakers wait for a decoder or audio waits over 1 s to be decoded.',
    () => (stt.stats().saturated ? 1 : 0),
  );
}
