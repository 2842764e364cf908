/**
 * Voice input: audio → utterances → commits → transcripts → user items, and
 * the barge-in decision (speech long enough while the character speaks).
 */
import type { Logger } from 'pino';
import { AudioFormatError, ProtocolError } from '../errors.js';
import type { SessionMetrics } from '../metrics/index.js';
import { AudioInput, type AudioInputEvent, type VadSettings } from './audio-input.js';
import type { Conversation } from './conversation.js';
import type { ClientEvent, ServerEvent } from './events.js';
import { messageItem, newId } from './items.js';
import type { SessionConfig } from './session-settings.js';
import type { SessionVoice } from './voice-settings.js';

/** Options of {@link VoiceInput}. */
export interface VoiceInputOptions {
  kit: SessionVoice;
  send: (event: ServerEvent) => void;
  log: () => Logger;
  content: (text: string) => string | { chars: number };
  config: SessionConfig;
  conversation: Conversation;
  metrics?: SessionMetrics['voice'] | undefined;
  /** Whether a response runs (speech over it may interrupt it). */
  responding: () => boolean;
  /** The user talked over the response: stop it. */
  bargeIn: () => void;
  /** Answers a committed utterance (server VAD); resolves once the response has started. */
  respond: (speechEndedAt: number, sttMs: number | undefined) => Promise<void>;
  /** A user item was added. */
  changed: () => void;
  /** The user's turn is over ({@link VoiceInput.userTurn} went false): held responses may start. */
  userDone?: () => void;
}

/** A user utterance from its first sound to its commit. */
interface Utterance {
  itemId: string;
  /** Where the utterance starts on the input clock, prefix padding included. */
  audioStartMs: number;
  /** Where its first sound is: barge-in measures from here. */
  speechStartMs: number;
  /** Transcript text already sent as deltas (streaming engines). */
  streamed: string;
  /** Ms of audio committed, once it is. */
  committedMs?: number;
}

/** Less audio than this cannot be a turn (the Realtime API's own floor). */
const MIN_COMMIT_MS = 100;

/**
 * What the model reads for a turn the user let pass in silence
 * (`idle_timeout_ms`) when the engine heard no words: Unmute's own marker.
 */
export const SILENCE_MARKER = '...';

/**
 * An `input_audio_buffer.*` event, handled by the session's voice input;
 * without one (no speech engines), the error to send.
 */
export function audioBufferEvent(
  voiceIn: VoiceInput | undefined,
  event: Extract<ClientEvent, { type: `input_audio_buffer.${string}` }>,
  eventId: string | null,
): ProtocolError | undefined {
  if (!voiceIn) {
    return new ProtocolError(
      'audio_not_supported',
      `${event.type}: this server takes no audio (no speech engines are configured); send conversation.item.create with input_text.`,
      { eventId },
    );
  }
  if (event.type === 'input_audio_buffer.append') return voiceIn.append(event.audio, eventId);
  if (event.type === 'input_audio_buffer.commit') return voiceIn.commit(eventId);
  voiceIn.clear();
  return undefined;
}

/** A session's ears: `input_audio_buffer.*` and what server VAD hears. */
export class VoiceInput {
  readonly #o: VoiceInputOptions;
  #input: AudioInput | undefined;
  /** The user's utterance in progress (speech started, not yet committed). */
  #utterance: Utterance | undefined;
  /** Speech that may interrupt the character once it lasts `bargeInMinMs`. */
  #tentative: Utterance | undefined;
  /** Committed utterances are transcribed and answered one after another. */
  #turnChain: Promise<void> = Promise.resolve();
  /** Committed utterances not yet answered (transcribing, or their response not yet asked for). */
  #unanswered = 0;
  /**
   * Committed utterances not yet in the conversation (being transcribed),
   * each with whether turn detection answers it by itself.
   */
  readonly #transcribing = new Set<{ answered: boolean; added: Promise<boolean> }>();
  /**
   * The conversation's newest item when the last utterance came out without
   * words: while it is still the newest, nothing was said since.
   */
  #wordlessAfter: string | null | undefined;
  /** The input clock when the last response ended: `idle_timeout_ms` counts from here. */
  #idleFrom: number | undefined;
  #closed = false;

  constructor(options: VoiceInputOptions) {
    this.#o = options;
  }

  /** The settings changed: the input follows its encoding and turn detection. */
  configure(change: { inputEncoding: boolean; turnDetection: boolean }): void {
    const s = this.#o.config.current;
    if (change.turnDetection && s.turnDetection === null) {
      this.#tentative = undefined;
      this.#utterance = undefined;
    }
    if (!this.#input) return;
    if (change.inputEncoding) this.#input.encoding = s.inputEncoding;
    if (change.turnDetection) this.#input.turnDetection = s.turnDetection && vadOf(s.turnDetection);
  }

  #audioInput(): AudioInput {
    const { kit, config } = this.#o;
    const turn = config.current.turnDetection;
    this.#input ??= new AudioInput({
      stt: kit.stt,
      vad: kit.vad,
      vadSettings: vadOf(turn ?? { ...kit.settings.vad }),
      pauseThreshold: kit.settings.pauseThreshold,
      maxUtteranceMs: kit.settings.maxUtteranceMs,
      log: this.#o.log(),
      onEvent: (e) => this.#onInputEvent(e),
    });
    this.#input.encoding = config.current.inputEncoding;
    if (turn === null) this.#input.turnDetection = null;
    return this.#input;
  }

  /** `input_audio_buffer.append`. */
  append(audio: string, eventId: string | null): ProtocolError | undefined {
    const { kit, metrics } = this.#o;
    if (!kit.stt) {
      return new ProtocolError(
        'audio_not_supported',
        'input_audio_buffer.append: this server has no speech-to-text engine (STT_PROVIDER=none); send conversation.item.create with input_text.',
        { eventId },
      );
    }
    const inp = this.#audioInput();
    const before = inp.totalMs;
    try {
      inp.append(audio);
    } catch (err) {
      if (!(err instanceof AudioFormatError)) throw err;
      metrics?.errors.inc({ kind: 'input_audio', provider: this.#o.config.current.inputEncoding });
      return new ProtocolError(
        'invalid_audio',
        `input_audio_buffer.append: audio: ${err.message}`,
        {
          param: 'audio',
          eventId,
        },
      );
    }
    metrics?.audioSeconds.inc(
      { direction: 'in', provider: kit.stt.name },
      (inp.totalMs - before) / 1000,
    );
    this.#confirmTentative();
    this.#checkIdle();
    return undefined;
  }

  /** A response ended (its speech played): the user's silence is timed from now (`idle_timeout_ms`). */
  responseEnded(): void {
    this.#idleFrom = this.#input?.clockMs ?? 0;
  }

  /**
   * GA's `idle_timeout_ms`: input audio with no speech for that long after
   * a response → `input_audio_buffer.timeout_triggered`, the silent buffer
   * committed as a user item, and (with `create_response`) a response. The
   * time is the input audio's, so it runs with the audio the client sends.
   */
  #checkIdle(): void {
    const from = this.#idleFrom;
    const limit = this.#o.config.current.turnDetection?.idleTimeoutMs;
    const inp = this.#input;
    if (from === undefined || !limit || !inp) return;
    if (this.#utterance || this.#tentative || inp.speaking || this.#o.responding()) return;
    const now = inp.clockMs;
    if (now - from < limit) return;
    this.#idleFrom = undefined;
    const u: Utterance = {
      itemId: newId('item'),
      audioStartMs: from,
      speechStartMs: from,
      streamed: '',
    };
    this.#o.log().info({ silentMs: Math.round(now - from) }, 'idle timeout');
    this.#o.send({
      type: 'input_audio_buffer.timeout_triggered',
      audio_start_ms: Math.round(from),
      audio_end_ms: Math.round(now),
      item_id: u.itemId,
    });
    this.#commitUtterance(u, true, true);
  }
  clear(): void {
    this.#input?.clear();
    this.#utterance = undefined;
    this.#tentative = undefined;
    this.#o.send({ type: 'input_audio_buffer.cleared' });
    this.#maybeDone();
  }

  /** `input_audio_buffer.commit`: the client ends the turn (turn_detection null, or early). */
  commit(eventId: string | null): ProtocolError | undefined {
    const inp = this.#input;
    if (!inp || inp.utteranceMs < MIN_COMMIT_MS) {
      // With server VAD the buffer keeps speech only: silence before it is let go.
      const vad = this.#o.config.current.turnDetection !== null;
      const held = `${Math.round(inp?.utteranceMs ?? 0)} ms of ${vad ? 'speech' : 'audio'}`;
      const why = vad
        ? ' (turn detection keeps only the audio around speech it hears; silence is not kept)'
        : '';
      return new ProtocolError(
        'input_audio_buffer_commit_empty',
        `input_audio_buffer.commit: the buffer holds ${held}${why}; at least ${MIN_COMMIT_MS} ms is needed. Send input_audio_buffer.append first.`,
        { eventId },
      );
    }
    const u = this.#utterance ?? {
      itemId: newId('item'),
      audioStartMs: 0,
      speechStartMs: 0,
      streamed: '',
    };
    this.#utterance = undefined;
    this.#tentative = undefined;
    this.#commitUtterance(u, this.#o.config.current.turnDetection !== null);
    return undefined;
  }

  close(): void {
    this.#closed = true;
    this.#input?.close();
  }

  /**
   * Whether it is the user's turn: they speak (server VAD, a possible
   * barge-in included), or what they said is still being transcribed and
   * answered. A background result is not spoken meanwhile.
   */
  get userTurn(): boolean {
    return this.#utterance !== undefined || this.#tentative !== undefined || this.#unanswered > 0;
  }

  /**
   * What a client's `response.create` waits for before it reads the
   * conversation: every utterance committed so far, in it (or dropped as
   * without words). Undefined when there is nothing to wait for, or when one
   * of them gets an answer of its own (server VAD's `create_response`):
   * that answer waits for the client's response, so the client's cannot
   * wait for it. Resolves to whether any of them had words; false at once
   * when the last utterance, transcribed already, had none and nothing joined
   * the conversation since (the same answer however fast the transcript came).
   */
  transcribed(): Promise<boolean> | undefined {
    const pending = [...this.#transcribing];
    if (pending.length === 0) {
      const nothingSince = this.#wordlessAfter === this.#o.conversation.newestItemId();
      return this.#wordlessAfter !== undefined && nothingSince ? Promise.resolve(false) : undefined;
    }
    if (pending.some((p) => p.answered)) return undefined;
    return Promise.all(pending.map((p) => p.added)).then((words) => words.includes(true));
  }

  #maybeDone(): void {
    if (!this.#closed && !this.userTurn) this.#o.userDone?.();
  }

  #onInputEvent(e: AudioInputEvent): void {
    if (this.#closed) return;
    const { send } = this.#o;
    switch (e.type) {
      case 'speech_started': {
        this.#idleFrom = undefined;
        const u: Utterance = {
          itemId: newId('item'),
          audioStartMs: e.audioStartMs,
          speechStartMs: e.speechStartMs,
          streamed: '',
        };
        this.#utterance = u;
        if (this.#o.responding() && this.#o.config.current.turnDetection?.interruptResponse) {
          // Maybe a cough: it interrupts only once it has lasted bargeInMinMs.
          this.#tentative = u;
          this.#confirmTentative();
          return;
        }
        send({
          type: 'input_audio_buffer.speech_started',
          audio_start_ms: Math.round(e.audioStartMs),
          item_id: u.itemId,
        });
        return;
      }
      case 'speech_stopped': {
        const u = this.#utterance;
        this.#utterance = undefined;
        if (!u) return;
        if (this.#tentative === u) {
          this.#tentative = undefined;
          this.#o
            .log()
            .debug({ ms: Math.round(e.audioEndMs - u.audioStartMs) }, 'false start ignored');
          this.#input?.clear();
          this.#maybeDone();
          return;
        }
        send({
          type: 'input_audio_buffer.speech_stopped',
          audio_end_ms: Math.round(e.audioEndMs),
          item_id: u.itemId,
        });
        this.#commitUtterance(u, true);
        return;
      }
      case 'transcript': {
        const u = this.#utterance ?? this.#tentative;
        if (!u) return;
        u.streamed += e.text;
        send({
          type: 'conversation.item.input_audio_transcription.delta',
          item_id: u.itemId,
          content_index: 0,
          delta: e.text,
          ...(e.startMs !== undefined ? { start_time: e.startMs / 1000 } : {}),
        });
        return;
      }
      case 'stt_error':
        this.#o.metrics?.errors.inc({ kind: 'stt', provider: this.#o.kit.stt?.name ?? 'none' });
        send({
          type: 'error',
          error: {
            type: 'server_error',
            code: 'stt_failed',
            message: `Speech recognition failed: ${e.error.message}`,
            param: null,
            event_id: null,
          },
        });
        return;
    }
  }

  /** The barge-in decision: speech that has lasted long enough while the character speaks interrupts it. */
  #confirmTentative(): void {
    const u = this.#tentative;
    if (!u || !this.#input?.speaking) return;
    if (this.#input.speechSoFar(u.speechStartMs) < this.#o.kit.settings.bargeInMinMs) return;
    this.#tentative = undefined;
    this.#o.send({
      type: 'input_audio_buffer.speech_started',
      audio_start_ms: Math.round(u.audioStartMs),
      item_id: u.itemId,
    });
    this.#o.bargeIn();
  }

  /** Ends an utterance: its item, its transcript, and (server VAD) the answer. */
  #commitUtterance(u: Utterance, auto: boolean, idle = false): void {
    // The user's turn: silence is timed again once it has been answered.
    this.#idleFrom = undefined;
    const speechEndedAt = performance.now();
    this.#o.send({
      type: 'input_audio_buffer.committed',
      previous_item_id: this.#o.conversation.newestItemId(),
      item_id: u.itemId,
    });
    u.committedMs = this.#input!.utteranceMs;
    const transcript = this.#input!.commit();
    this.#unanswered++;
    let added = (_words: boolean): void => undefined;
    const pending = {
      answered: auto && this.#o.config.current.turnDetection?.createResponse === true,
      // Whether its words joined the conversation (false: none were found, or it failed).
      added: new Promise<boolean>((resolve) => (added = resolve)),
    };
    this.#transcribing.add(pending);
    const inConversation = (words = false): void => {
      this.#transcribing.delete(pending);
      added(words);
    };
    this.#turnChain = this.#turnChain
      .then(() => this.#finishUtterance(u, transcript, auto, speechEndedAt, idle, inConversation))
      .catch((err: unknown) => this.#o.log().error({ err }, 'utterance handling failed'))
      .finally(() => {
        inConversation();
        this.#unanswered--;
        this.#maybeDone();
      });
  }

  async #finishUtterance(
    u: Utterance,
    pending: Promise<string>,
    auto: boolean,
    speechEndedAt: number,
    idle: boolean,
    inConversation: (words: boolean) => void,
  ): Promise<void> {
    const { send, conversation } = this.#o;
    // `transcript: null` until the transcript exists: what OpenAI's API sends
    // in its own conversation.item.added (beta: .created), though its typings
    // say `transcript?: string`; clients built against it expect the null.
    const item = messageItem(
      'user',
      [{ type: 'input_audio', transcript: null }],
      u.itemId,
      'in_progress',
    );
    const previous = conversation.newestItemId();
    send({ type: 'conversation.item.added', previous_item_id: previous, item });
    const { transcript, sttMs, failed } = await this.#transcribe(u, pending, speechEndedAt);
    if (this.#closed) return;
    // What the deltas during the turn did not say yet (all of it when none came).
    const rest = unsent(transcript, u.streamed);
    if (rest) {
      send({
        type: 'conversation.item.input_audio_transcription.delta',
        item_id: u.itemId,
        content_index: 0,
        delta: rest,
      });
    }
    // `failed` and `completed` are alternatives, as in the Realtime API.
    if (!failed) {
      send({
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: u.itemId,
        content_index: 0,
        transcript,
        usage: { type: 'duration', seconds: Math.round(u.committedMs ?? 0) / 1000 },
      });
    }
    if (transcript === '' && !idle) {
      // Nothing was understood: no message for the model, and no answer to nothing.
      this.#o.log().info('utterance without words');
      this.#o.metrics?.wordless.inc({ provider: this.#o.kit.stt?.name ?? 'none' });
      this.#wordlessAfter = conversation.newestItemId();
      send({ type: 'conversation.item.deleted', item_id: u.itemId });
      return;
    }
    item.content = [{ type: 'input_audio', transcript }];
    item.status = 'completed';
    // A silence the user let pass (idle timeout) is answered too: the model reads a marker.
    conversation.addUtterance(item, transcript || SILENCE_MARKER);
    this.#o
      .log()
      .debug({ item: item.id, text: this.#o.content(transcript) }, 'utterance transcribed');
    send({ type: 'conversation.item.done', previous_item_id: previous, item });
    this.#o.changed();
    inConversation(true);
    if (!auto || !this.#o.config.current.turnDetection?.createResponse) return;
    // An interrupted response is still winding down: the answer waits its turn in the queue.
    await this.#o.respond(speechEndedAt, sttMs);
  }

  async #transcribe(
    u: Utterance,
    pending: Promise<string>,
    speechEndedAt: number,
  ): Promise<{ transcript: string; sttMs: number | undefined; failed: boolean }> {
    const stt = this.#o.kit.stt?.name ?? 'none';
    const metrics = this.#o.metrics;
    try {
      const transcript = (await pending).trim();
      const sttMs = performance.now() - speechEndedAt;
      metrics?.sttLatency.observe({ provider: stt }, sttMs / 1000);
      return { transcript, sttMs, failed: false };
    } catch (err) {
      metrics?.errors.inc({ kind: 'stt', provider: stt });
      this.#o.log().warn({ err: (err as Error).message, provider: stt }, 'transcription failed');
      this.#o.send({
        type: 'conversation.item.input_audio_transcription.failed',
        item_id: u.itemId,
        content_index: 0,
        error: { type: 'server_error', code: 'stt_failed', message: (err as Error).message },
      });
      return { transcript: '', sttMs: undefined, failed: true };
    }
  }
}

/**
 * The end of a transcript the streamed deltas did not carry: all of it when
 * none came, the words after them when it goes on from them, nothing when
 * the engine revised what it had streamed (`completed` has the whole).
 */
function unsent(transcript: string, streamed: string): string {
  const said = streamed.trim();
  if (said === '') return transcript;
  const next = transcript.charAt(said.length);
  if (!transcript.startsWith(said) || (next !== '' && next !== ' ')) return '';
  const rest = transcript.slice(said.length).trim();
  return rest === '' ? '' : ` ${rest}`;
}

function vadOf(t: VadSettings): VadSettings {
  return {
    threshold: t.threshold,
    prefixPaddingMs: t.prefixPaddingMs,
    silenceDurationMs: t.silenceDurationMs,
  };
}
