/**
 * Speech output: a response's voice (engine, encoding, metrics, errors), the
 * newest speech a late truncate reads against, and what the user heard of it.
 */
import type { Logger } from 'pino';
import type { LoadedCharacter } from '../characters/types.js';
import type { ChatMessage } from '../llm/chunk.js';
import type { SessionMetrics } from '../metrics/index.js';
import { encodeG711, G711_SAMPLE_RATE, type G711Law } from '../voice/audio/g711.js';
import { OggOpusEncoder } from '../voice/audio/ogg-opus.js';
import { encodePcm16Base64, PCM16_SAMPLE_RATE } from '../voice/audio/pcm.js';
import type { Item, MessageItem, ServerEvent, VoiceTimings } from './events.js';
import { heardText, round } from './items.js';
import type { SpokenRound } from './conversation.js';
import type { RunningResponse } from './response-queue.js';
import type { SpokenEntry } from './response-writer.js';
import type { SessionConfig } from './session-settings.js';
import { SpeechOutput } from './speech-output.js';
import type { SessionVoice } from './voice-settings.js';

/** Options of {@link VoiceOutput}. */
export interface VoiceOutputOptions {
  kit: SessionVoice;
  send: (event: ServerEvent) => void;
  config: SessionConfig;
  character: () => LoadedCharacter;
  metrics?: SessionMetrics['voice'] | undefined;
}

/** The session's speech: one {@link SpeechOutput} per spoken response. */
export class VoiceOutput {
  readonly #o: VoiceOutputOptions;
  #ogg: OggOpusEncoder | undefined;
  #last: SpeechOutput | undefined;

  constructor(options: VoiceOutputOptions) {
    this.#o = options;
  }

  /** Whether replies can be spoken at all (a TTS engine is configured). */
  get canSpeak(): boolean {
    return this.#o.kit.tts != null;
  }

  /** The newest response's speech: a late `conversation.item.truncate` is read against it. */
  get lastSpeech(): SpeechOutput | undefined {
    return this.#last;
  }

  /** Ogg/Opus pages: one stream for the whole session, as Unmute's player expects. */
  #encodeOgg = (pcm: Int16Array): string => {
    this.#ogg ??= new OggOpusEncoder({ sampleRate: PCM16_SAMPLE_RATE });
    return Buffer.from(this.#ogg.push(pcm)).toString('base64');
  };

  /**
   * A response's encoder and rate, fixed when it starts: its frames are
   * counted at that rate, so a format changed mid-reply applies from the next one.
   */
  #wireFor(): { encode: (pcm: Int16Array) => string; sampleRate: number } {
    switch (this.#o.config.current.outputEncoding) {
      case 'pcm16':
        return { encode: encodePcm16Base64, sampleRate: PCM16_SAMPLE_RATE };
      case 'ogg_opus':
        return { encode: this.#encodeOgg, sampleRate: PCM16_SAMPLE_RATE };
      case 'g711_ulaw':
        return { encode: (pcm) => g711Base64(pcm, 'mulaw'), sampleRate: G711_SAMPLE_RATE };
      case 'g711_alaw':
        return { encode: (pcm) => g711Base64(pcm, 'alaw'), sampleRate: G711_SAMPLE_RATE };
    }
  }

  /** A response's speech, wired to metrics and the client; `from` starts its first-audio clock. */
  speechFor(response: RunningResponse, log: Logger, from: number): SpeechOutput {
    const { kit, send, config } = this.#o;
    const metrics = this.#o.metrics;
    const tts = kit.tts!;
    const ogg = config.current.outputEncoding === 'ogg_opus';
    const { encode, sampleRate } = this.#wireFor();
    let first = true;
    const speech = new SpeechOutput({
      tts,
      voice: config.ttsVoice(this.#o.character()),
      speed: config.current.ga?.speed ?? 1,
      signal: response.controller.signal,
      leadMs: kit.settings.audioLeadMs,
      sampleRate,
      encode,
      // Opus pages hold two 20 ms frames: only whole pages go out. Others send 100 ms at a time.
      padTo: ogg ? 1920 : 1,
      frameSamples: ogg ? 3840 : sampleRate / 10,
      send,
      log,
      onTtsFirstAudio: (ms) => metrics?.ttsFirstAudio.observe({ provider: tts.name }, ms / 1000),
      onAudioSent: (samples) => {
        metrics?.audioSeconds.inc({ direction: 'out', provider: tts.name }, samples / sampleRate);
        if (!first) return;
        first = false;
        response.firstAudioMs = performance.now() - from;
        metrics?.speechToAudio.observe(
          { stt: kit.stt?.name ?? 'none', tts: tts.name },
          response.firstAudioMs / 1000,
        );
      },
      onTtsError: (error) => {
        metrics?.errors.inc({ kind: 'tts', provider: tts.name });
        send({
          type: 'error',
          error: {
            type: 'server_error',
            code: 'tts_failed',
            message: `${error.message} The rest of the reply is sent as transcript only.`,
            param: null,
            event_id: null,
          },
        });
      },
    });
    response.speech = speech;
    this.#last = speech;
    return speech;
  }

  close(): void {
    this.#ogg?.close();
  }
}

function g711Base64(pcm: Int16Array, law: G711Law): string {
  return Buffer.from(encodeG711(pcm, law).buffer).toString('base64');
}

/**
 * The model's messages cut to what the user heard: a reply interrupted (or
 * truncated by the client) keeps the words that played, so the model knows
 * what was actually said. Tells `record` which message holds each spoken item.
 */
export function keepHeard(
  messages: ChatMessage[],
  entries: readonly SpokenEntry[],
  truncations: ReadonlyMap<string, string>,
  record: (itemId: string, round: SpokenRound) => void,
): ChatMessage[] {
  // Fillers (round -1) are not the model's words.
  const rounds = byRound(entries.filter((e) => e.round >= 0));
  const out = [...messages];
  const used = new Set<ChatMessage>();
  for (const list of rounds) {
    const raw = list.map((e) => e.raw).join('');
    const message = out.find((m) => m.role === 'assistant' && !used.has(m) && m.content === raw);
    if (!message) continue;
    used.add(message);
    const spoken: SpokenRound = { message, items: [] };
    let whole = true;
    for (const e of list) {
      const cut = truncations.get(e.item.id);
      if (cut !== undefined) {
        e.item.content = [{ type: 'output_audio', transcript: cut }];
        e.item.status = 'incomplete';
      }
      if (cut !== undefined || e.spoken.interrupted) whole = false;
      spoken.items.push({ item: e.item, transcript: cut ?? e.spoken.transcript });
      record(e.item.id, spoken);
    }
    if (whole) continue;
    const heard = heardText(spoken.items.map((i) => i.transcript));
    if (heard === '' && !makesCalls(message)) {
      out.splice(out.indexOf(message), 1);
      continue;
    }
    message.content = heard;
  }
  return out;
}

/** A stretch of a spoken reply's text: its item, the model's words and their round. */
export interface SpokenStretch {
  item: MessageItem;
  text: string;
  round: number;
}

/**
 * A spoken reply under way as history would keep it if it were cut now:
 * the turn's messages so far (`said`) with each spoken round's text cut to
 * what has played (`items`: copies, each spoken item's transcript what
 * played of it, all of it once it has ended). A round that spoke nothing
 * (its calls only) stays as it is. Undefined when a round's message is not
 * its words as spoken (prompt-based tools keep their call lines in it).
 */
export function heardSoFar(
  said: readonly ChatMessage[],
  stretches: readonly SpokenStretch[],
  items: readonly Item[],
): ChatMessage[] | undefined {
  const out = said.slice();
  // Rounds in order, each message after the one before.
  let from = 0;
  for (const list of byRound(stretches)) {
    const raw = list.map((s) => s.text).join('');
    const index = out.findIndex((m, i) => i >= from && m.role === 'assistant' && m.content === raw);
    if (index === -1) return undefined;
    const ids = new Set(list.map((s) => s.item.id));
    const heard = heardText(
      items
        .flatMap((i) => (i.type === 'message' && ids.has(i.id) ? i.content : []))
        .map((part) => (part.type === 'output_audio' ? part.transcript : '')),
    );
    const message = out[index]!;
    if (heard === '' && !makesCalls(message)) {
      out.splice(index, 1);
      from = index;
    } else {
      out[index] = { ...message, content: heard } as ChatMessage;
      from = index + 1;
    }
  }
  return out;
}

/** Spoken pieces gathered by round, the rounds in the order they first came. */
export function byRound<T extends { round: number }>(pieces: readonly T[]): T[][] {
  const rounds = new Map<number, T[]>();
  for (const p of pieces) {
    const list = rounds.get(p.round);
    if (list) list.push(p);
    else rounds.set(p.round, [p]);
  }
  return [...rounds.values()];
}

/** Whether a model's message makes calls: it stays in history with no words heard. */
function makesCalls(message: ChatMessage): boolean {
  return 'tool_calls' in message || 'function_call' in message;
}

/**
 * Where a spoken response's time to first audio went: STT (end of speech →
 * transcript), LLM (request → the first clause complete), TTS (clause → its
 * first audio), and what is left: Troupe's own share.
 */
export function voiceTimings(
  response: RunningResponse,
  speech: SpeechOutput,
  requestAt: number | undefined,
): VoiceTimings {
  const { firstTextAt, firstEngineAudioAt } = speech.timings;
  const stt = response.sttMs ?? 0;
  const llm = requestAt !== undefined && firstTextAt !== undefined ? firstTextAt - requestAt : null;
  const tts =
    firstTextAt !== undefined && firstEngineAudioAt !== undefined
      ? firstEngineAudioAt - firstTextAt
      : null;
  const total = response.firstAudioMs;
  return {
    stt_ms: response.sttMs === undefined ? null : round(stt),
    llm_ms: llm === null ? null : round(llm),
    tts_ms: tts === null ? null : round(tts),
    troupe_ms:
      total === undefined || llm === null || tts === null
        ? null
        : round(Math.max(0, total - stt - llm - tts)),
  };
}
