/**
 * Speech of one response: clauses spoken by the TTS engine, paced to a playback clock, each word
 * of transcript sent as its audio plays — so a barge-in knows exactly what the user heard.
 */
import type { Logger } from 'pino';
import { SpeechProviderError } from '../errors.js';
import { PCM16_SAMPLE_RATE } from '../voice/audio/pcm.js';
import { createResampler, type Resampler } from '../voice/audio/resample.js';
import { SpeechChunker } from '../voice/chunker.js';
import type { TtsEvent, TtsProvider, TtsStream } from '../voice/types.js';
import type { ServerEvent } from './events.js';
import { timingOf, type SpokenTiming } from './spoken-timing.js';

/** Where an item stands in its response. */
export interface SpeechPlace {
  response_id: string;
  item_id: string;
  output_index: number;
}

/** How an item's speech ended. */
export interface SpokenItem {
  /** What was spoken and heard (all of it unless interrupted). */
  transcript: string;
  /** The text the item was given (cleaned for speech). */
  fullText: string;
  interrupted: boolean;
  /** Ms of the item's audio played by the server's clock. */
  playedMs: number;
}

/** Options of {@link SpeechOutput}. */
export interface SpeechOutputOptions {
  tts: TtsProvider;
  /** The provider's voice (the character's `voice[tts.name]`); unset = the provider's default. */
  voice: string | undefined;
  /** Speaking speed for the engine (`audio.output.speed`). @defaultValue 1 */
  speed?: number;
  /** The response's signal (cancel, barge-in). */
  signal: AbortSignal;
  /** Audio sent ahead of the playback clock. @defaultValue 300 */
  leadMs: number;
  /**
   * The wire's sample rate: the engine's audio is resampled to it, and
   * frames, playback and `audio_end_ms` count its samples. @defaultValue 24000
   */
  sampleRate?: number;
  /** Encodes PCM at `sampleRate` for the wire (base64 PCM16, G.711 or Ogg/Opus pages). */
  encode: (pcm: Int16Array) => string;
  /**
   * Frames are padded with silence to a multiple of this many samples when
   * the playback would otherwise run dry (Opus needs whole 20 ms frames). @defaultValue 1
   */
  padTo: number;
  /** Audio per message when the queue is full (100 ms for PCM, whole Ogg pages for Opus). */
  frameSamples: number;
  send: (event: ServerEvent) => void;
  log: Logger;
  /** First audio of an item came out of the engine, `ms` after its first text went in. */
  onTtsFirstAudio?: (ms: number) => void;
  /** Audio went to the client (first call = the response's first audio byte). */
  onAudioSent?: (samples: number) => void;
  /** The engine failed: the rest of the text is sent as transcript only. */
  onTtsError?: (error: Error) => void;
}

/** Below this much queued playback the last partial frame goes out padded. */
const STARVE_MS = 40;

interface Piece {
  text: string;
  /** Where it starts in the item's audio (wire-rate samples, padding included); null until known. */
  at: number | null;
}

interface Segment {
  text: string;
  pieces: Piece[];
  /** Item sample of its first audio; null before it came. */
  start: number | null;
  /** Engine-timeline sample (wire rate) of its first audio, for word times. */
  synthStart: number;
  samples: number;
  words: number[];
}

interface ItemSpeech {
  place: SpeechPlace;
  stream: TtsStream | undefined;
  chunker: SpeechChunker;
  segments: Segment[];
  /** Segments pushed to the engine, awaiting their audio. */
  waiting: Segment[];
  current: Segment | undefined;
  /** Audio not yet sent (wire rate). */
  pending: Int16Array[];
  pendingSamples: number;
  resampler: Resampler;
  /** The engine's own timeline, resampled to the wire's rate: where word times point. */
  synthSamples: number;
  /** Played-timeline sample of the item's first audio sent; null before. */
  audioStart: number | null;
  /**
   * Wall time (performance.now) when the item has played: the end of its
   * last frame sent, or, for an item without audio, the end of the items
   * before it; -1 until the item is reached. An item ends then, not when
   * the whole response has played.
   */
  playEnd: number;
  /** Whether the engine has given any audio for the item. */
  heardEngine: boolean;
  sentSamples: number;
  emitted: string;
  emittedPieces: number;
  fullText: string;
  textDone: boolean;
  audioDone: boolean;
  failed: boolean;
  firstTextAt: number | null;
  finished: boolean;
  /** Where the client cut its audio (`conversation.item.truncate`), if it did. */
  truncatedMs?: number;
  resolve: (spoken: SpokenItem) => void;
  done: Promise<SpokenItem>;
}

/**
 * Speaks a response's items one after another, paced to the listener.
 *
 * @example
 * const speech = new SpeechOutput({ tts, voice, signal, leadMs: 300, encode, padTo: 1, frameSamples: 2400, send, log });
 * speech.begin(place);            // an assistant message item
 * speech.text('Hello there. How');
 * const spoken = await speech.end(); // when its last word has played (or the signal fired)
 */
export class SpeechOutput {
  readonly #o: SpeechOutputOptions;
  readonly #rate: number;
  readonly #samplesPerMs: number;
  #items: ItemSpeech[] = [];
  /** The item text goes to. */
  #open: ItemSpeech | undefined;
  /** Played timeline: samples sent so far (silence padding included). */
  #sentTotal = 0;
  /** Sent frames: where each starts on the timeline and on the wall clock. */
  #frames: Array<{ start: number; samples: number; playAt: number }> = [];
  /** Wall time (performance.now) when all sent audio has played. */
  #playEnd = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /**
   * When (performance.now) the response's first text went to the engine and
   * its first audio came back: with the LLM's and STT's times, what is left
   * of the path to the first audio byte is Troupe's own.
   */
  readonly timings: { firstTextAt?: number; firstEngineAudioAt?: number } = {};

  constructor(options: SpeechOutputOptions) {
    this.#o = options;
    this.#rate = options.sampleRate ?? PCM16_SAMPLE_RATE;
    this.#samplesPerMs = this.#rate / 1000;
    options.signal.addEventListener('abort', () => this.#stop(), { once: true });
  }

  /** Starts an item: text from now on is its speech. */
  begin(place: SpeechPlace): void {
    this.#open = this.#newItem(place);
  }

  /** Adds reply text to the open item (cleaned and cut into clauses here). */
  text(delta: string): void {
    const item = this.#open;
    if (!item || this.#stopped) return;
    for (const segment of item.chunker.push(delta)) this.#push(item, segment);
  }

  /**
   * Closes the open item: resolves once its last word has played, or at
   * once with what was heard when the signal fires.
   */
  end(): Promise<SpokenItem> {
    const item = this.#open;
    this.#open = undefined;
    if (!item)
      return Promise.resolve({ transcript: '', fullText: '', interrupted: false, playedMs: 0 });
    for (const segment of item.chunker.flush()) this.#push(item, segment);
    item.textDone = true;
    this.#closeStream(item);
    this.#pump();
    return item.done;
  }

  /** Speaks a whole text as one item (a greeting, a filler line). */
  say(place: SpeechPlace, text: string): Promise<SpokenItem> {
    this.begin(place);
    this.text(text);
    return this.end();
  }

  /**
   * What the listener heard of an item when its audio was cut at
   * `audioEndMs` (from the item's first audio): the client's own account,
   * from `conversation.item.truncate`. Undefined for an unknown item.
   */
  heardUntil(itemId: string, audioEndMs: number): string | undefined {
    const item = this.#item(itemId);
    if (!item) return undefined;
    return this.#heard(item, audioEndMs);
  }

  /**
   * An item's audio as the client has it: the ms sent (or, once it was
   * truncated, kept), and whether more of it is still to come. Undefined
   * for an unknown item.
   */
  audioOf(itemId: string): { ms: number; speaking: boolean } | undefined {
    const item = this.#item(itemId);
    if (!item) return undefined;
    const sent = item.sentSamples / this.#samplesPerMs;
    return { ms: Math.min(sent, item.truncatedMs ?? sent), speaking: !item.finished };
  }

  /**
   * The client played an item only up to `audioEndMs`: it keeps that much,
   * and its transcript when it ends is what played by then.
   */
  truncate(itemId: string, audioEndMs: number): void {
    const item = this.#item(itemId);
    if (item) item.truncatedMs = audioEndMs;
  }

  /** An item's word timing as it stands, to keep once its response has ended. */
  timingOf(itemId: string): SpokenTiming | undefined {
    const item = this.#item(itemId);
    const audio = this.audioOf(itemId);
    if (!item || !audio) return undefined;
    const words = item.segments.flatMap((s) => s.pieces);
    return timingOf(words, item.audioStart !== null, this.#samplesPerMs, audio.ms);
  }

  /** What the listener heard of each item the client truncated (`conversation.item.truncate`). */
  truncations(): ReadonlyMap<string, string> {
    const heard = new Map<string, string>();
    for (const item of this.#items) {
      if (item.truncatedMs !== undefined) {
        heard.set(item.place.item_id, this.#heard(item, item.truncatedMs));
      }
    }
    return heard;
  }

  #item(itemId: string): ItemSpeech | undefined {
    return this.#items.find((i) => i.place.item_id === itemId);
  }

  #heard(item: ItemSpeech, audioEndMs: number): string {
    if (item.audioStart === null) return '';
    const cut = audioEndMs * this.#samplesPerMs;
    let text = '';
    for (const segment of item.segments) {
      for (const piece of segment.pieces) {
        if (piece.at === null || piece.at >= cut) return text.trimEnd();
        text += piece.text;
      }
    }
    return text.trimEnd();
  }

  /** Ms of an item's audio that the server's clock says has played. */
  playedMs(itemId: string): number {
    const item = this.#item(itemId);
    if (!item || item.audioStart === null) return 0;
    const played = Math.min(this.#playedIn(item, performance.now()), item.sentSamples);
    return Math.max(0, played / this.#samplesPerMs);
  }

  // ── engine side ──

  #newItem(place: SpeechPlace): ItemSpeech {
    let resolve!: (s: SpokenItem) => void;
    const done = new Promise<SpokenItem>((r) => (resolve = r));
    const item: ItemSpeech = {
      place,
      stream: undefined,
      chunker: new SpeechChunker({ unit: this.#o.tts.segmentUnit }),
      segments: [],
      waiting: [],
      current: undefined,
      pending: [],
      pendingSamples: 0,
      resampler: createResampler(this.#o.tts.sampleRate, this.#rate),
      synthSamples: 0,
      audioStart: null,
      playEnd: -1,
      heardEngine: false,
      sentSamples: 0,
      emitted: '',
      emittedPieces: 0,
      fullText: '',
      textDone: false,
      audioDone: false,
      failed: false,
      firstTextAt: null,
      finished: false,
      resolve,
      done,
    };
    this.#items.push(item);
    return item;
  }

  #push(item: ItemSpeech, text: string): void {
    if (this.#stopped) return;
    const separator = item.fullText === '' ? '' : ' ';
    item.fullText += separator + text;
    const words = (separator + text).match(/\s*\S+/g) ?? [];
    const segment: Segment = {
      text,
      pieces: words.map((w) => ({ text: w, at: null })),
      start: null,
      synthStart: 0,
      samples: 0,
      words: [],
    };
    item.segments.push(segment);
    if (item.failed) {
      this.#placeSilently(item, segment);
      return this.#pump();
    }
    item.waiting.push(segment);
    item.firstTextAt ??= performance.now();
    this.timings.firstTextAt ??= item.firstTextAt;
    item.stream ??= this.#o.tts.open({
      ...(this.#o.voice !== undefined ? { voice: this.#o.voice } : {}),
      ...(this.#o.speed !== undefined && this.#o.speed !== 1 ? { speed: this.#o.speed } : {}),
      signal: this.#o.signal,
      onEvent: (e) => this.#ttsEvent(item, e),
    });
    item.stream.push(text);
  }

  #closeStream(item: ItemSpeech): void {
    if (!item.stream) {
      item.audioDone = true;
      return;
    }
    item.stream.end().then(
      () => this.#audioDone(item),
      (err: unknown) => this.#ttsFailed(item, err as Error),
    );
  }

  #audioDone(item: ItemSpeech): void {
    if (item.audioDone) return;
    const tail = item.resampler.flush();
    if (tail.length > 0) this.#enqueue(item, tail);
    this.#completeSegment(item);
    // Segments that never made a sound (the engine skipped them) are said in text.
    for (const segment of item.waiting) this.#placeSilently(item, segment);
    item.waiting = [];
    item.audioDone = true;
    this.#pump();
  }

  #ttsEvent(item: ItemSpeech, e: TtsEvent): void {
    if (this.#stopped || item.failed) return;
    switch (e.type) {
      case 'audio': {
        if (e.text !== undefined || !item.current) {
          this.#completeSegment(item);
          const next = item.waiting.shift();
          if (next) {
            next.start = this.#timelineEnd(item);
            next.synthStart = item.synthSamples;
            next.pieces[0]!.at = next.start;
            item.current = next;
          }
          if (item.firstTextAt !== null && !item.heardEngine) {
            item.heardEngine = true;
            this.timings.firstEngineAudioAt ??= performance.now();
            this.#o.onTtsFirstAudio?.(performance.now() - item.firstTextAt);
          }
        }
        const pcm = item.resampler.push(e.pcm);
        item.synthSamples += pcm.length;
        this.#enqueue(item, pcm);
        this.#pump();
        return;
      }
      case 'word':
        item.current?.words.push(Math.round((e.startSample * this.#rate) / this.#o.tts.sampleRate));
        return;
      case 'error':
        this.#ttsFailed(item, e.error);
        return;
    }
  }

  #ttsFailed(item: ItemSpeech, error: Error): void {
    if (item.failed || this.#stopped) return;
    item.failed = true;
    this.#o.log.warn({ err: error.message, provider: this.#o.tts.name }, 'speech synthesis failed');
    this.#o.onTtsError?.(
      error instanceof SpeechProviderError
        ? error
        : new SpeechProviderError('tts', this.#o.tts.name, error.message, { cause: error }),
    );
    this.#audioDone(item);
  }

  /** A segment without audio: its words are given at the end of what is queued. */
  #placeSilently(item: ItemSpeech, segment: Segment): void {
    const at = this.#timelineEnd(item);
    segment.start = at;
    for (const piece of segment.pieces) piece.at = at;
  }

  /** Fixes the word times of the segment whose audio is complete. */
  #completeSegment(item: ItemSpeech): void {
    const segment = item.current;
    if (!segment || segment.start === null) return;
    item.current = undefined;
    segment.samples = this.#timelineEnd(item) - segment.start;
    const exact = segment.words.length === segment.pieces.length;
    const chars = segment.pieces.reduce((n, p) => n + p.text.length, 0) || 1;
    let offset = 0;
    for (const [k, piece] of segment.pieces.entries()) {
      piece.at = exact
        ? segment.start + Math.max(0, segment.words[k]! - segment.synthStart)
        : segment.start + Math.round((offset / chars) * segment.samples);
      offset += piece.text.length;
    }
  }

  /** Where the item's next audio lands in its own audio (padding included). */
  #timelineEnd(item: ItemSpeech): number {
    return item.sentSamples + item.pendingSamples;
  }

  #enqueue(item: ItemSpeech, pcm: Int16Array): void {
    if (pcm.length === 0) return;
    item.pending.push(pcm);
    item.pendingSamples += pcm.length;
  }

  // ── listener side ──

  /** Sends what the playback clock allows, gives out due words, finishes items. */
  #pump(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const now = performance.now();
    for (const item of this.#items) {
      if (item.finished) continue;
      // Reached: every item before it is all sent, and it plays when they end.
      if (item.playEnd < 0) item.playEnd = this.#playEnd;
      this.#send(item, now);
      this.#words(item, now);
      if (this.#finishIfDone(item, now)) continue;
      // Items play in order: the next one waits until this one is out.
      if (item.pendingSamples > 0 || !item.audioDone) break;
    }
    this.#schedule(now);
  }

  #send(item: ItemSpeech, now: number): void {
    while (item.pendingSamples > 0) {
      const ahead = this.#playEnd - now;
      if (ahead >= this.#o.leadMs) return;
      let take: number;
      const frame = this.#o.frameSamples;
      if (item.pendingSamples >= frame) take = frame;
      else if (item.audioDone || ahead < STARVE_MS) take = item.pendingSamples;
      else return;
      this.#sendFrame(item, this.#take(item, take), now);
    }
  }

  #take(item: ItemSpeech, n: number): Int16Array {
    const pad = this.#o.padTo;
    const out = new Int16Array(Math.ceil(n / pad) * pad);
    let filled = 0;
    while (filled < n) {
      const head = item.pending[0]!;
      const want = n - filled;
      if (head.length <= want) {
        out.set(head, filled);
        filled += head.length;
        item.pending.shift();
      } else {
        out.set(head.subarray(0, want), filled);
        item.pending[0] = head.subarray(want);
        filled += want;
      }
    }
    item.pendingSamples -= n;
    return out;
  }

  #sendFrame(item: ItemSpeech, pcm: Int16Array, now: number): void {
    const playAt = Math.max(now, this.#playEnd);
    item.audioStart ??= this.#sentTotal;
    this.#frames.push({ start: this.#sentTotal, samples: pcm.length, playAt });
    if (this.#frames.length > 512) this.#frames.splice(0, 256);
    this.#playEnd = playAt + pcm.length / this.#samplesPerMs;
    item.playEnd = this.#playEnd;
    this.#sentTotal += pcm.length;
    // Padding shifts later audio: keep the item's own timeline in step.
    item.sentSamples += pcm.length;
    this.#o.send({
      type: 'response.output_audio.delta',
      ...item.place,
      content_index: 0,
      delta: this.#o.encode(pcm),
    });
    this.#o.onAudioSent?.(pcm.length);
  }

  /**
   * How far into the item's audio the listener is. An item that never had
   * audio (the engine failed or said nothing) is all "heard" once the items
   * before it have played: its words go out as text.
   */
  #playedIn(item: ItemSpeech, now: number): number {
    if (item.audioStart === null) {
      return item.audioDone && item.pendingSamples === 0 && item.playEnd <= now ? Infinity : -1;
    }
    return this.#playedAt(now) - item.audioStart;
  }

  /** The played-timeline sample the listener is at. */
  #playedAt(now: number): number {
    for (let i = this.#frames.length - 1; i >= 0; i--) {
      const f = this.#frames[i]!;
      if (f.playAt <= now)
        return Math.min(f.start + f.samples, f.start + (now - f.playAt) * this.#samplesPerMs);
    }
    return this.#frames[0]?.start ?? 0;
  }

  #words(item: ItemSpeech, now: number): void {
    const played = this.#playedIn(item, now);
    let index = 0;
    for (const segment of item.segments) {
      for (const piece of segment.pieces) {
        if (index++ < item.emittedPieces) continue;
        if (piece.at === null || piece.at > played) return;
        this.#emitPiece(item, piece.text);
      }
    }
  }

  #emitPiece(item: ItemSpeech, text: string): void {
    item.emittedPieces++;
    item.emitted += text;
    this.#o.send({
      type: 'response.output_audio_transcript.delta',
      ...item.place,
      content_index: 0,
      delta: text,
    });
  }

  #finishIfDone(item: ItemSpeech, now: number): boolean {
    if (!item.textDone || !item.audioDone || item.pendingSamples > 0) return false;
    const total = item.segments.reduce((n, s) => n + s.pieces.length, 0);
    if (item.emittedPieces < total) return false;
    if (item.audioStart !== null && item.playEnd > now) return false;
    this.#finish(item, false);
    return true;
  }

  #finish(item: ItemSpeech, interrupted: boolean): void {
    if (item.finished) return;
    const playedMs = interrupted
      ? this.playedMs(item.place.item_id)
      : item.sentSamples / this.#samplesPerMs;
    item.finished = true;
    const transcript =
      item.truncatedMs === undefined ? item.emitted.trim() : this.#heard(item, item.truncatedMs);
    this.#o.send({ type: 'response.output_audio.done', ...item.place, content_index: 0 });
    this.#o.send({
      type: 'response.output_audio_transcript.done',
      ...item.place,
      content_index: 0,
      transcript,
    });
    item.resolve({
      transcript,
      fullText: item.fullText,
      interrupted,
      playedMs,
    });
  }

  #schedule(now: number): void {
    if (this.#stopped) return;
    let next = Infinity;
    for (const item of this.#items) {
      if (item.finished) continue;
      if (item.pendingSamples > 0) {
        next = Math.min(next, this.#playEnd - this.#o.leadMs, this.#playEnd - STARVE_MS);
      }
      const piece = this.#nextPiece(item);
      if (piece?.at != null && item.audioStart !== null) {
        next = Math.min(next, this.#wallAt(item.audioStart + piece.at) ?? Infinity);
      }
      if (item.textDone && item.audioDone && item.pendingSamples === 0) {
        next = Math.min(next, item.playEnd);
      }
      if (item.pendingSamples > 0 || !item.audioDone) break;
    }
    if (next === Infinity) return;
    this.#timer = setTimeout(() => this.#pump(), Math.max(1, next - now));
  }

  #nextPiece(item: ItemSpeech): Piece | undefined {
    let index = 0;
    for (const segment of item.segments) {
      for (const piece of segment.pieces) {
        if (index++ === item.emittedPieces) return piece;
      }
    }
    return undefined;
  }

  /** When a timeline sample plays, if its audio has been sent. */
  #wallAt(sample: number): number | undefined {
    for (let i = this.#frames.length - 1; i >= 0; i--) {
      const f = this.#frames[i]!;
      if (sample >= f.start) {
        if (sample > f.start + f.samples) return undefined;
        return f.playAt + (sample - f.start) / this.#samplesPerMs;
      }
    }
    return this.#frames[0]?.playAt;
  }

  /** Cancel or barge-in: nothing more is sent; each item keeps what was heard. */
  #stop(): void {
    if (this.#stopped) return;
    // Words already due are heard: give them out before the cut.
    const now = performance.now();
    for (const item of this.#items) if (!item.finished) this.#words(item, now);
    this.#stopped = true;
    clearTimeout(this.#timer);
    for (const item of this.#items) {
      item.pending = [];
      item.pendingSamples = 0;
      this.#finish(item, true);
    }
  }
}

/**
 * Speaks `text` as the one audio part of a server-made item (the greeting,
 * a spoken progress line): `response.content_part.added`, the audio, then
 * `response.content_part.done` with what was said.
 */
export async function speakPart(
  send: (event: ServerEvent) => void,
  speech: SpeechOutput,
  place: SpeechPlace,
  text: string,
): Promise<SpokenItem> {
  send({
    type: 'response.content_part.added',
    ...place,
    content_index: 0,
    part: { type: 'output_audio', transcript: '' },
  });
  const spoken = await speech.say(place, text);
  send({
    type: 'response.content_part.done',
    ...place,
    content_index: 0,
    part: { type: 'output_audio', transcript: spoken.transcript },
  });
  return spoken;
}
