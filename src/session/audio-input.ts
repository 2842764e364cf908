/**
 * Audio input: client audio decoded to 24 kHz (G.711's 8 kHz resampled up), watched by the turn detector (server VAD) and
 * fed to STT (speech with prefix padding for per-utterance engines, everything for streaming).
 */
import type { Logger } from 'pino';
import { AudioFormatError } from '../errors.js';
import { decodeG711Base64, G711_SAMPLE_RATE } from '../voice/audio/g711.js';
import { OggOpusDecoder } from '../voice/audio/ogg-opus.js';
import { Pcm16Decoder, PCM16_SAMPLE_RATE } from '../voice/audio/pcm.js';
import { createResampler, type Resampler } from '../voice/audio/resample.js';
import { TurnDetector } from '../voice/turn-detector.js';
import type { VadEngine } from '../voice/vad.js';
import { VAD_SAMPLE_RATE } from '../voice/vad.js';
import type { SttEvent, SttProvider, SttStream } from '../voice/types.js';
import type { AudioEncoding } from './voice-settings.js';

/** Server VAD settings in effect (`null` = the client commits turns itself). */
export interface VadSettings {
  threshold: number;
  prefixPaddingMs: number;
  silenceDurationMs: number;
}

/** What the input side tells its session. */
export type AudioInputEvent =
  /** `audioStartMs` includes the prefix padding (the wire's); `speechStartMs` is the first sound. */
  | { type: 'speech_started'; audioStartMs: number; speechStartMs: number }
  | { type: 'speech_stopped'; audioEndMs: number; by: 'vad' | 'stt_pause' }
  /** Transcript text of the utterance in progress (streaming engines). */
  | { type: 'transcript'; text: string; startMs: number | undefined }
  | { type: 'stt_error'; error: Error };

/** Options of {@link AudioInput}. */
export interface AudioInputOptions {
  stt: SttProvider | null;
  vad: VadEngine;
  /** Server VAD defaults; `turnDetection(null)` switches to manual commits. */
  vadSettings: VadSettings;
  /** Pause probability that ends a turn, for engines that report pauses. @defaultValue 0.6 */
  pauseThreshold: number;
  /** Longest utterance kept; appends beyond it are refused. @defaultValue 60000 */
  maxUtteranceMs: number;
  log: Logger;
  onEvent: (event: AudioInputEvent) => void;
}

/** Audio kept before speech starts, beyond the prefix padding (the VAD confirms speech a little late). */
const PREROLL_SLACK_MS = 500;

/**
 * Decodes, detects and transcribes one session's input audio.
 *
 * @example
 * const input = new AudioInput({ stt, vad, vadSettings, pauseThreshold: 0.6, maxUtteranceMs: 60_000, log, onEvent });
 * input.append(base64Pcm16); // → onEvent({type:'speech_started', …}) … speech_stopped
 * const text = await input.commit();
 */
export class AudioInput {
  readonly #options: AudioInputOptions;
  #encoding: AudioEncoding = 'pcm16';
  #pcm = new Pcm16Decoder();
  #ogg: OggOpusDecoder | undefined;
  /** G.711's 8 kHz up to 24 kHz; made on the first G.711 append. */
  #fromG711: Resampler | undefined;
  #toVad: Resampler = createResampler(PCM16_SAMPLE_RATE, VAD_SAMPLE_RATE);
  #toStt: Resampler | undefined;
  #detector: TurnDetector | null;
  #vadSettings: VadSettings | null;
  #stream: SttStream | undefined;
  #streamCtl = new AbortController();
  /** Recent STT-rate audio with its place on the input clock, for the prefix padding. */
  #recent: Array<{ startMs: number; pcm: Int16Array }> = [];
  /** Ms of input audio received (the input clock). */
  #clockMs = 0;
  /** Ms of audio in the current utterance (what `commit()` would send). */
  #utteranceMs = 0;
  #speaking = false;
  #closed = false;
  /** Input audio seconds by this session, for metrics. */
  totalMs = 0;

  constructor(options: AudioInputOptions) {
    this.#options = options;
    this.#vadSettings = options.vadSettings;
    this.#detector = new TurnDetector(options.vad, detectorOptions(options.vadSettings));
    const stt = options.stt;
    if (stt && stt.sampleRate !== PCM16_SAMPLE_RATE && stt.sampleRate !== VAD_SAMPLE_RATE) {
      this.#toStt = createResampler(PCM16_SAMPLE_RATE, stt.sampleRate);
    }
  }

  /** The encoding `append()` reads. */
  get encoding(): AudioEncoding {
    return this.#encoding;
  }

  set encoding(encoding: AudioEncoding) {
    if (encoding === this.#encoding) return;
    this.#encoding = encoding;
    this.#ogg?.close();
    this.#ogg = undefined;
    this.#fromG711 = undefined;
    this.#pcm = new Pcm16Decoder();
  }

  /** Whether the user is speaking (server VAD). */
  get speaking(): boolean {
    return this.#speaking;
  }

  /** How long the current speech has sounded so far (ms, hangover and silence excluded). */
  speechSoFar(speechStartMs: number): number {
    const last = this.#detector?.lastSpeechMs ?? -1;
    return last < 0 ? 0 : Math.max(0, last - speechStartMs);
  }

  /** Ms of audio the next `commit()` covers. */
  get utteranceMs(): number {
    return this.#utteranceMs;
  }

  /** The input clock: ms of audio received so far. */
  get clockMs(): number {
    return this.#clockMs;
  }

  /** Server VAD settings, or null for manual turns. */
  get turnDetection(): VadSettings | null {
    return this.#vadSettings;
  }

  set turnDetection(settings: VadSettings | null) {
    this.#vadSettings = settings;
    if (settings === null) {
      this.#detector?.free();
      this.#detector = null;
      this.#speaking = false;
      return;
    }
    if (this.#detector) this.#detector.update(detectorOptions(settings));
    else this.#detector = new TurnDetector(this.#options.vad, detectorOptions(settings));
  }

  /**
   * Takes one `input_audio_buffer.append`. Throws {@link AudioFormatError}
   * when the audio cannot be read or the utterance would pass its limit;
   * the input stays usable either way.
   */
  append(base64: string): void {
    if (this.#closed) return;
    const { pcm, ms } = this.#decode(base64);
    if (ms === 0) return;
    const manual = this.#detector === null;
    if (manual && this.#utteranceMs + ms > this.#options.maxUtteranceMs) {
      throw new AudioFormatError(
        `the input audio buffer holds ${Math.round(this.#utteranceMs)} ms, and the limit is ${this.#options.maxUtteranceMs} ms; commit or clear it (input_audio_buffer.commit / .clear) before sending more.`,
      );
    }
    const startMs = this.#clockMs;
    this.#clockMs += ms;
    this.totalMs += ms;

    const sttPcm = this.#forStt(pcm);
    const stt = this.#options.stt;
    if (sttPcm && sttPcm.length > 0 && stt) {
      this.#recent.push({ startMs, pcm: sttPcm });
      const keepFrom = this.#clockMs - (this.#vadSettings?.prefixPaddingMs ?? 0) - PREROLL_SLACK_MS;
      while (this.#recent.length > 1 && this.#recent[1]!.startMs <= keepFrom) this.#recent.shift();
    }
    // Streaming engines hear everything; others hear what the user says.
    if (sttPcm && (stt?.continuous || manual || this.#speaking)) this.#write(sttPcm, ms);

    if (!this.#detector) return;
    for (const e of this.#detector.push(this.#toVad.push(pcm))) {
      if (e.type === 'speech_started') {
        this.#speaking = true;
        // The wire's audio_start_ms includes the prefix padding, as Realtime's does.
        if (!stt?.continuous) this.#writePreroll(e.prerollStartMs);
        this.#options.onEvent({
          type: 'speech_started',
          audioStartMs: e.prerollStartMs,
          speechStartMs: e.audioStartMs,
        });
      } else {
        this.#speaking = false;
        this.#options.onEvent({ type: 'speech_stopped', audioEndMs: e.audioEndMs, by: 'vad' });
      }
    }
    // Endless speech (or noise): end the turn at the limit rather than grow without bound.
    if (this.#speaking && this.#utteranceMs >= this.#options.maxUtteranceMs) {
      this.#options.log.warn({ ms: Math.round(this.#utteranceMs) }, 'utterance hit its limit');
      this.#speaking = false;
      this.#detector.reset();
      this.#options.onEvent({ type: 'speech_stopped', audioEndMs: this.#clockMs, by: 'vad' });
    }
  }

  /** Ends the utterance: its transcript ('' when nothing was heard). */
  async commit(): Promise<string> {
    this.#utteranceMs = 0;
    if (!this.#stream) return '';
    return this.#stream.commit();
  }

  /** Drops the current utterance (`input_audio_buffer.clear`). */
  clear(): void {
    this.#utteranceMs = 0;
    // Half a sample of cleared audio must not shift what comes next, nor the resampler's tail of it play.
    this.#pcm.reset();
    this.#fromG711?.flush();
    this.#speaking = false;
    this.#detector?.reset();
    this.#stream?.clear();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#streamCtl.abort();
    this.#stream?.close();
    this.#ogg?.close();
    this.#detector?.free();
  }

  /**
   * One append as 24 kHz PCM, and how long it lasts. G.711's duration is its
   * bytes at 8 kHz: the resampler holds back a few ms of it until more comes,
   * which must not slow the input clock.
   */
  #decode(base64: string): { pcm: Int16Array; ms: number } {
    switch (this.#encoding) {
      case 'pcm16':
        return withMs(this.#pcm.push(base64));
      case 'g711_ulaw':
      case 'g711_alaw': {
        const pcm8k = decodeG711Base64(base64, this.#encoding === 'g711_ulaw' ? 'mulaw' : 'alaw');
        this.#fromG711 ??= createResampler(G711_SAMPLE_RATE, PCM16_SAMPLE_RATE);
        return { pcm: this.#fromG711.push(pcm8k), ms: (pcm8k.length * 1000) / G711_SAMPLE_RATE };
      }
      case 'ogg_opus': {
        this.#ogg ??= new OggOpusDecoder({ sampleRate: PCM16_SAMPLE_RATE });
        const bytes = Buffer.from(base64, 'base64');
        return withMs(
          this.#ogg.push(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)),
        );
      }
    }
  }

  /** The audio at the STT's rate (null without STT). */
  #forStt(pcm24k: Int16Array): Int16Array | null {
    const stt = this.#options.stt;
    if (!stt) return null;
    if (stt.sampleRate === PCM16_SAMPLE_RATE) return pcm24k;
    if (this.#toStt) return this.#toStt.push(pcm24k);
    // 16 kHz engines share the VAD's rate; resample once more rather than couple the two.
    this.#toStt = createResampler(PCM16_SAMPLE_RATE, stt.sampleRate);
    return this.#toStt.push(pcm24k);
  }

  /** Writes the audio from the start of the prefix padding up to now (not yet written). */
  #writePreroll(from: number): void {
    const rate = this.#options.stt!.sampleRate;
    for (const chunk of this.#recent) {
      const ms = (chunk.pcm.length * 1000) / rate;
      if (chunk.startMs + ms > from) this.#write(chunk.pcm, ms);
    }
  }

  #write(pcm: Int16Array, ms: number): void {
    const stream = this.#open();
    if (!stream) return;
    this.#utteranceMs += ms;
    if (pcm.length > 0) stream.write(pcm);
  }

  #open(): SttStream | undefined {
    const stt = this.#options.stt;
    if (!stt || this.#closed) return undefined;
    if (this.#stream) return this.#stream;
    this.#stream = stt.open({
      signal: this.#streamCtl.signal,
      onEvent: (e) => this.#sttEvent(e),
    });
    return this.#stream;
  }

  #sttEvent(e: SttEvent): void {
    if (this.#closed) return;
    switch (e.type) {
      case 'text':
        this.#options.onEvent({ type: 'transcript', text: e.text, startMs: e.startMs });
        return;
      case 'pause':
        // The engine hears the end of the turn before the VAD's silence window runs out.
        if (
          this.#speaking &&
          this.#options.stt?.reportsPauses &&
          e.probability >= this.#options.pauseThreshold
        ) {
          this.#speaking = false;
          this.#detector?.reset();
          this.#options.onEvent({
            type: 'speech_stopped',
            audioEndMs: this.#clockMs,
            by: 'stt_pause',
          });
        }
        return;
      case 'error':
        // A broken stream is replaced on the next utterance.
        this.#stream?.close();
        this.#stream = undefined;
        this.#options.onEvent({ type: 'stt_error', error: e.error });
        return;
    }
  }
}

function withMs(pcm24k: Int16Array): { pcm: Int16Array; ms: number } {
  return { pcm: pcm24k, ms: (pcm24k.length * 1000) / PCM16_SAMPLE_RATE };
}

function detectorOptions(s: VadSettings) {
  return {
    threshold: s.threshold,
    prefixPaddingMs: s.prefixPaddingMs,
    silenceDurationMs: s.silenceDurationMs,
  };
}
