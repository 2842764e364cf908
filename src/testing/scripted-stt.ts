/**
 * An in-process STT engine that hears nothing and answers from a script:
 * each committed utterance with audio gets the next line. For tests of
 * turn taking, barge-in and the answer path, where recognition itself is
 * not what is tested.
 */
import type { SttOpenOptions, SttProvider, SttStream } from '../voice/types.js';

/** Options of {@link createScriptedStt}. */
export interface ScriptedSttOptions {
  /** Transcripts in order, or a function of the utterance (its ms of audio and its index). */
  transcripts: readonly string[] | ((utterance: { ms: number; index: number }) => string);
  /** @defaultValue 16000 */
  sampleRate?: number;
  /** Delay of each commit, ms (an engine's own latency). @defaultValue 0 */
  delayMs?: number;
  /** @defaultValue scripted */
  name?: string;
}

/** A scripted STT engine plus what it was given. */
export interface ScriptedStt extends SttProvider {
  /** Ms of audio per committed utterance, in order. */
  readonly utterances: number[];
}

/**
 * @example
 * const stt = createScriptedStt({ transcripts: ['what is the weather in paris'] });
 * await startServer({ config, voice: { session: { stt, tts, vad, settings }, … } });
 */
export function createScriptedStt(options: ScriptedSttOptions): ScriptedStt {
  const sampleRate = options.sampleRate ?? 16000;
  const utterances: number[] = [];
  const next = (ms: number): string => {
    const index = utterances.length;
    utterances.push(ms);
    const t = options.transcripts;
    return typeof t === 'function' ? t({ ms, index }) : (t[index] ?? '');
  };
  return {
    name: options.name ?? 'scripted',
    sampleRate,
    continuous: false,
    reportsPauses: false,
    utterances,
    open(open: SttOpenOptions): SttStream {
      let samples = 0;
      return {
        write(pcm) {
          if (!open.signal.aborted) samples += pcm.length;
        },
        async commit() {
          const ms = (samples * 1000) / sampleRate;
          samples = 0;
          if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
          return ms > 0 ? next(ms) : '';
        },
        clear() {
          samples = 0;
        },
        close() {},
      };
    },
    async health() {
      return { ok: true };
    },
    async close() {},
  };
}
