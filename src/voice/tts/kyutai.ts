/**
 * Kyutai's streaming TTS (moshi-server, as Unmute uses it): one WebSocket per
 * response at `{url}/api/tts_streaming`, msgpack frames both ways.
 *
 *   client → server  `{type: "Text", text}` one word at a time (later words
 *                    with a leading space), then `{type: "Eos"}`
 *   server → client  `{type: "Ready"}` first, then `{type: "Audio", pcm}`
 *                    (float32, 24 kHz, 1920-sample frames) and
 *                    `{type: "Text", text, start_s, stop_s}` (word timings,
 *                    ahead of their audio); `{type: "Error", message}`; the
 *                    server closes the socket once all audio after Eos is out.
 *
 * The server aligns words, not segments, so a pushed segment's text is placed
 * where the server says its first word starts. The provider asks for words
 * (`segmentUnit: 'word'`): each goes out as soon as the LLM has written it,
 * rather than after the clause it ends.
 */
import { decode, encode } from '@msgpack/msgpack';
import WebSocket from 'ws';
import type { RawData } from 'ws';
import { SpeechProviderError } from '../../errors.js';
import type { ProviderHealth, TtsOpenOptions, TtsProvider, TtsStream } from '../types.js';
import { TtsEmitter } from './emitter.js';
import type { TtsLogger } from './emitter.js';
import { float32ToInt16 } from '../audio/pcm.js';
import { splitWords } from './pcm.js';

/** The rate of Kyutai TTS audio, in Hz. */
export const KYUTAI_TTS_SAMPLE_RATE_HZ = 24_000;
/** The path of the streaming endpoint. */
export const KYUTAI_TTS_PATH = '/api/tts_streaming';
/** The key a stock moshi-server accepts (what Unmute sends). */
export const DEFAULT_KYUTAI_API_KEY = 'public_token';
/** Classifier-free guidance strength Unmute asks for. */
export const DEFAULT_KYUTAI_CFG_ALPHA = 1.5;
/** Default time from opening a stream to the server's `Ready`, in ms. */
export const DEFAULT_KYUTAI_CONNECT_TIMEOUT_MS = 5_000;
/** How long `health()` waits for `GET /api/build_info`, in ms. */
export const KYUTAI_TTS_HEALTH_TIMEOUT_MS = 2_000;

/** The provider's name: a metrics label and the key of `character.voice`. */
const PROVIDER = 'kyutai';

/** Options of {@link createKyutaiTts}. */
export interface KyutaiTtsOptions {
  /** The server, `ws://host:8089` (http:// and https:// are turned into ws:// and wss://). */
  url: string;
  /** Sent as the `kyutai-api-key` header. @defaultValue 'public_token' */
  apiKey?: string;
  /**
   * Voice when the stream names none, e.g.
   * `expresso/ex03-ex01_happy_001_channel1_334s.wav`.
   * @defaultValue none: the server's configured default
   */
  voice?: string;
  /** `cfg_alpha` query parameter. @defaultValue 1.5 */
  cfgAlpha?: number;
  /** Time allowed from `open()` to the server's `Ready`, in ms. @defaultValue 5000 */
  connectTimeoutMs?: number;
  log?: TtsLogger;
}

/**
 * Creates a provider for a Kyutai (moshi-server) streaming TTS.
 *
 * @example
 * const tts = createKyutaiTts({ url: 'ws://127.0.0.1:8089' });
 * const stream = tts.open({ signal, onEvent });
 * stream.push('Hello there.');
 * await stream.end();
 */
export function createKyutaiTts(options: KyutaiTtsOptions): KyutaiTts {
  return new KyutaiTts(options);
}

/** The Kyutai provider (see {@link createKyutaiTts}). */
export class KyutaiTts implements TtsProvider {
  readonly name = PROVIDER;
  readonly sampleRate = KYUTAI_TTS_SAMPLE_RATE_HZ;
  readonly voiceEngine = 'kyutai';
  /** Words go in as the LLM writes them, as Unmute sends them. */
  readonly segmentUnit = 'word';
  readonly #settings: Settings;

  /** The configured voice; without one the server picks its own, unnamed here. */
  get defaultVoice(): string | undefined {
    return this.#settings.voice;
  }

  constructor(options: KyutaiTtsOptions) {
    const base = options.url.replace(/\/+$/u, '');
    this.#settings = {
      wsBase: base.replace(/^http(s?):/iu, 'ws$1:'),
      httpBase: base.replace(/^ws(s?):/iu, 'http$1:'),
      apiKey: options.apiKey ?? DEFAULT_KYUTAI_API_KEY,
      voice: options.voice,
      cfgAlpha: options.cfgAlpha ?? DEFAULT_KYUTAI_CFG_ALPHA,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_KYUTAI_CONNECT_TIMEOUT_MS,
      log: options.log,
    };
  }

  /** Opens one response's stream; the WebSocket connects now, while the LLM starts. */
  open(options: TtsOpenOptions): TtsStream {
    return new KyutaiTtsStream(this.#settings, options);
  }

  /** `GET {http url}/api/build_info` answers 2xx within 2 s. */
  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    const url = `${this.#settings.httpBase}/api/build_info`;
    const timeout = AbortSignal.timeout(KYUTAI_TTS_HEALTH_TIMEOUT_MS);
    try {
      const response = await fetch(url, {
        signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
      });
      await response.body?.cancel();
      return response.ok
        ? { ok: true, detail: `GET ${url}: ${response.status}` }
        : { ok: false, detail: `GET ${url}: ${response.status} ${response.statusText}` };
    } catch (error) {
      const why = timeout.aborted
        ? `no answer within ${KYUTAI_TTS_HEALTH_TIMEOUT_MS} ms`
        : (error as Error).message;
      return { ok: false, detail: `GET ${url}: ${why}` };
    }
  }

  /** Nothing to free: sockets belong to their streams. */
  async close(): Promise<void> {}
}

/** Resolved options shared by the provider's streams. */
interface Settings {
  wsBase: string;
  httpBase: string;
  apiKey: string;
  voice: string | undefined;
  cfgAlpha: number;
  connectTimeoutMs: number;
  log: TtsLogger | undefined;
}

/** A message the server sends, as far as this client reads it. */
type ServerMessage =
  | { type: 'Ready' }
  | { type: 'Audio'; pcm: ArrayLike<number> }
  | { type: 'Text'; text: string; start_s: number; stop_s: number }
  | { type: 'Error'; message: string };

/** One response's speech over its own WebSocket. */
class KyutaiTtsStream implements TtsStream {
  readonly #settings: Settings;
  readonly #out: TtsEmitter;
  readonly #ws: WebSocket;
  readonly #url: string;
  #ready = false;
  #ended = false;
  #eosSent = false;
  /** Frames waiting for `Ready`. */
  #outbox: Uint8Array[] = [];
  #wordsSent = 0;
  /** Pushed segments and the index of their first word. */
  #segments: Array<{ text: string; firstWord: number }> = [];
  /** Non-empty `Text` messages received so far. */
  #wordsHeard = 0;
  #readyTimer: NodeJS.Timeout;

  constructor(settings: Settings, options: TtsOpenOptions) {
    this.#settings = settings;
    this.#out = new TtsEmitter({
      provider: PROVIDER,
      signal: options.signal,
      onEvent: options.onEvent,
      log: settings.log,
      onAbort: () => this.#disconnect(),
    });
    const query = new URLSearchParams({ format: 'PcmMessagePack' });
    const voice = options.voice ?? settings.voice;
    if (voice !== undefined) query.set('voice', voice);
    query.set('cfg_alpha', String(settings.cfgAlpha));
    this.#url = `${settings.wsBase}${KYUTAI_TTS_PATH}?${query.toString()}`;
    this.#readyTimer = setTimeout(() => {
      this.#fail(
        `${settings.wsBase} did not say Ready within ${settings.connectTimeoutMs} ms; ` +
          'the server may be overloaded or unreachable.',
        true,
      );
    }, settings.connectTimeoutMs);
    this.#ws = new WebSocket(this.#url, {
      headers: { 'kyutai-api-key': settings.apiKey },
      perMessageDeflate: false,
    });
    this.#ws.on('message', (data, isBinary) => this.#onMessage(data, isBinary));
    this.#ws.on('unexpected-response', (request, response) => {
      // The upgrade was refused with an HTTP answer: keep its status and a bit of its body.
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        if (body.length < 300) body += chunk;
      });
      const refused = (): void => {
        request.destroy();
        this.#fail(
          `${settings.wsBase}${KYUTAI_TTS_PATH} refused the connection: ${response.statusCode} ` +
            `${response.statusMessage ?? ''}${body.trim() ? ` (${body.trim().slice(0, 300)})` : ''}. ` +
            (response.statusCode === 401 || response.statusCode === 403
              ? 'Check the kyutai-api-key (TTS apiKey).'
              : 'Check the TTS url and the voice.'),
          response.statusCode === 429 || (response.statusCode ?? 0) >= 500,
        );
      };
      response.on('end', refused);
      response.on('close', refused);
      response.on('error', refused);
    });
    this.#ws.on('error', (error) => {
      this.#fail(
        `Could not talk to Kyutai TTS at ${settings.wsBase}: ${describeSocketError(error)}. ` +
          'Check that moshi-server is running at that address.',
        true,
        error,
      );
    });
    this.#ws.on('close', (code, reason) => this.#onClose(code, reason.toString('utf8')));
    if (options.signal.aborted) this.#disconnect();
  }

  push(text: string): void {
    if (!this.#out.live || this.#ended) return;
    const words = splitWords(text);
    if (words.length === 0) return;
    const segment = words.join(' ');
    // The first segment starts with the stream's first audio; later ones
    // where the server places their first word (see #onText).
    if (this.#segments.length === 0) this.#out.label(segment);
    this.#segments.push({ text: segment, firstWord: this.#wordsSent });
    for (const word of words) {
      // As Unmute does: words after the first carry their leading space.
      this.#send({ type: 'Text', text: this.#wordsSent === 0 ? word : ` ${word}` });
      this.#wordsSent++;
    }
  }

  end(): Promise<void> {
    if (this.#ended) return this.#out.done;
    this.#ended = true;
    if (this.#out.live && this.#segments.length === 0) {
      // Nothing to say: no need to wait for the server.
      this.#out.finish();
      this.#disconnect();
    } else {
      this.#send({ type: 'Eos' });
      this.#eosSent = true;
    }
    return this.#out.done;
  }

  #send(message: { type: 'Text'; text: string } | { type: 'Eos' }): void {
    const frame = encode(message);
    if (this.#ready && this.#ws.readyState === WebSocket.OPEN) this.#ws.send(frame);
    else this.#outbox.push(frame);
  }

  #onMessage(data: RawData, isBinary: boolean): void {
    if (!this.#out.live) return;
    let message: ServerMessage | undefined;
    try {
      message = isBinary ? parseServerMessage(decode(toBytes(data))) : undefined;
    } catch {
      message = undefined;
    }
    if (message === undefined) {
      this.#settings.log?.warn(
        { provider: PROVIDER, isBinary },
        'kyutai tts: unreadable message ignored',
      );
      return;
    }
    switch (message.type) {
      case 'Ready':
        if (this.#ready) return;
        this.#ready = true;
        clearTimeout(this.#readyTimer);
        for (const frame of this.#outbox.splice(0)) this.#ws.send(frame);
        return;
      case 'Error':
        this.#fail(`Kyutai TTS reported an error: ${message.message}`, !this.#ready);
        return;
      case 'Audio':
        // Before Ready, frames may be left over from the server's previous client.
        if (this.#ready) this.#out.audio(float32ToInt16(message.pcm));
        return;
      case 'Text':
        if (this.#ready) this.#onText(message);
        return;
    }
  }

  #onText(message: { text: string; start_s: number }): void {
    // The server always opens with an empty word at 0 s; it is not one of ours.
    if (message.text === '') return;
    const index = this.#wordsHeard++;
    const at = Math.max(0, Math.round(message.start_s * KYUTAI_TTS_SAMPLE_RATE_HZ));
    const segment = this.#segments.find((s) => s.firstWord === index);
    if (segment !== undefined && index > 0) this.#out.label(segment.text, at);
    this.#out.word(message.text, at);
  }

  #onClose(code: number, reason: string): void {
    clearTimeout(this.#readyTimer);
    if (!this.#out.live) return;
    // A close frame after Eos is the normal end (1005: one without a code);
    // 1006 means the connection dropped, possibly mid-answer.
    if (this.#eosSent && this.#ready && (code === 1000 || code === 1005)) {
      this.#out.finish();
      return;
    }
    this.#fail(
      `Kyutai TTS closed the stream early (code ${code}${reason ? `, ${reason}` : ''}); ` +
        'the rest of the answer was not spoken.',
      true,
    );
  }

  #fail(message: string, retryable: boolean, cause?: unknown): void {
    clearTimeout(this.#readyTimer);
    if (!this.#out.live) return;
    this.#out.fail(
      new SpeechProviderError(
        'tts',
        PROVIDER,
        message,
        cause === undefined ? { retryable } : { retryable, cause },
      ),
    );
    this.#disconnect();
  }

  #disconnect(): void {
    clearTimeout(this.#readyTimer);
    this.#outbox = [];
    const state = this.#ws.readyState;
    if (state === WebSocket.OPEN) this.#ws.close(1000);
    else if (state === WebSocket.CONNECTING) this.#ws.terminate();
  }
}

/** Checks the shape of a decoded frame; undefined when it is not one this client knows. */
function parseServerMessage(value: unknown): ServerMessage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const m = value as Record<string, unknown>;
  switch (m['type']) {
    case 'Ready':
      return { type: 'Ready' };
    case 'Audio': {
      const pcm = m['pcm'];
      if (Array.isArray(pcm) || pcm instanceof Float32Array)
        return { type: 'Audio', pcm: pcm as ArrayLike<number> };
      return undefined;
    }
    case 'Text':
      if (typeof m['text'] !== 'string' || typeof m['start_s'] !== 'number') return undefined;
      return {
        type: 'Text',
        text: m['text'],
        start_s: m['start_s'],
        stop_s: typeof m['stop_s'] === 'number' ? m['stop_s'] : m['start_s'],
      };
    case 'Error':
      return {
        type: 'Error',
        message: typeof m['message'] === 'string' ? m['message'] : 'unknown error',
      };
    default:
      return undefined;
  }
}

function toBytes(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}

function describeSocketError(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? `${error.message} (${code})` : error.message;
}
