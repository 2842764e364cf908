/**
 * TTS through an OpenAI-compatible `POST {baseURL}/audio/speech` endpoint
 * (OpenAI, Kokoro-FastAPI, openedai-speech, Speaches, …) with
 * `response_format: "pcm"` (raw PCM16 LE mono, streamed) or `"wav"`. OpenAI
 * sends PCM at 24 kHz; other servers are asked for `sampleRate` with
 * `sample_rate` (speaches resamples Piper's 22.05 or 16 kHz voices to it).
 * What comes is read for what it is (speech-body.ts): a WAV's header gives
 * its rate and channels, raw PCM's content type may name its rate
 * (`audio/pcm;rate=22050`, openedai-speech), and audio at another rate is
 * resampled to `sampleRate`, so a server that ignores `sample_rate` still
 * plays at the right speed and pitch.
 *
 * One request per pushed segment. To hide the request's latency, the request
 * for the next segment starts while the current one streams (its body waits
 * in the socket until its turn), and audio is given out strictly in order.
 *
 * Node's built-in `fetch` (undici) does the HTTP: it streams bodies, takes an
 * AbortSignal and reads no environment — the `openai` package would add
 * retries and env lookups a real-time stream does not want.
 */
import { AudioFormatError, ConfigError, SpeechProviderError } from '../../errors.js';
import type { ProviderHealth, TtsOpenOptions, TtsProvider, TtsStream } from '../types.js';
import { TtsEmitter } from './emitter.js';
import type { TtsLogger } from './emitter.js';
import { SpeechBody } from './speech-body.js';

/** The rate of `response_format: "pcm"`, in Hz. */
export const OPENAI_TTS_SAMPLE_RATE_HZ = 24_000;
/**
 * Default model: `tts-1`, OpenAI's model tuned for real-time latency, and the
 * name OpenAI-compatible servers (Kokoro-FastAPI, openedai-speech, Speaches)
 * accept as an alias. `gpt-4o-mini-tts` sounds better but answers later.
 */
export const DEFAULT_OPENAI_TTS_MODEL = 'tts-1';
/** Default voice, one every OpenAI TTS model has. */
export const DEFAULT_OPENAI_TTS_VOICE = 'alloy';
/** How long `health()` waits for `GET /models`, in ms. */
export const OPENAI_TTS_HEALTH_TIMEOUT_MS = 2_000;
/** Default time allowed for a response to start, and between two body chunks, in ms. */
export const DEFAULT_OPENAI_TTS_TIMEOUT_MS = 15_000;
/** Default number of requests started ahead of the segment being played. */
export const DEFAULT_OPENAI_TTS_PREFETCH = 1;
/** Rates a server may be asked for (`sampleRate`). */
export const OPENAI_TTS_SAMPLE_RATES = Object.freeze([
  8_000, 16_000, 22_050, 24_000, 44_100, 48_000,
]);
/** What `responseFormat` may ask for. */
export const OPENAI_TTS_RESPONSE_FORMATS = Object.freeze(['pcm', 'wav'] as const);
/** Most of an error body kept for the message, in characters. */
const ERROR_BODY_MAX_CHARS = 500;

/** The provider's name: a metrics label and the key of `character.voice`. */
const PROVIDER = 'openai';

/** Options of {@link createOpenAiTts}. */
export interface OpenAiTtsOptions {
  /** Base URL up to and including `/v1`, e.g. `https://api.openai.com/v1`. */
  baseURL: string;
  /** Sent as `Authorization: Bearer …` when set. */
  apiKey?: string;
  /** @defaultValue 'tts-1' */
  model?: string;
  /** Voice when the stream names none. @defaultValue 'alloy' */
  voice?: string;
  /**
   * The rate the provider gives audio out at. Asked for with `sample_rate`
   * from servers other than api.openai.com (whose PCM is always 24 kHz);
   * a WAV or a content type naming another rate is resampled to it.
   * @defaultValue 24000
   */
  sampleRate?: number;
  /**
   * What to ask the server for: raw `pcm` (streams best), or `wav` for a
   * server without raw PCM (its header names the rate). Either is accepted
   * in the answer.
   * @defaultValue 'pcm'
   */
  responseFormat?: 'pcm' | 'wav';
  /**
   * Whose voice names the server takes: `openai` (OpenAI's), `kokoro`
   * (Kokoro-FastAPI, speaches' Kokoro: `af_heart`…) or `piper` (speaches'
   * Piper: `en_US-amy-medium`…). OpenAI's names are mapped to it (voices.ts).
   * @defaultValue 'openai'
   */
  voiceSet?: 'openai' | 'kokoro' | 'piper';
  /** Requests started ahead of the one being played (0 = one at a time). @defaultValue 1 */
  prefetch?: number;
  /** No response headers, or no body bytes, for this long fails the segment, in ms. @defaultValue 15000 */
  timeoutMs?: number;
  log?: TtsLogger;
}

/**
 * Creates a provider for an OpenAI-compatible speech endpoint.
 *
 * @example
 * const tts = createOpenAiTts({ baseURL: 'https://api.openai.com/v1', apiKey });
 * const stream = tts.open({ signal, voice: 'nova', onEvent });
 * stream.push('Hello there.');
 * stream.push('How can I help?');
 * await stream.end();
 */
export function createOpenAiTts(options: OpenAiTtsOptions): OpenAiTts {
  return new OpenAiTts(options);
}

/** The OpenAI-compatible provider (see {@link createOpenAiTts}). */
export class OpenAiTts implements TtsProvider {
  readonly name = PROVIDER;
  readonly sampleRate: number;
  readonly voiceEngine: 'openai' | 'kokoro' | 'piper';
  readonly #settings: Settings;

  /** The voice sent when a stream names none. */
  get defaultVoice(): string {
    return this.#settings.voice;
  }

  constructor(options: OpenAiTtsOptions) {
    const baseURL = options.baseURL.replace(/\/+$/u, '');
    this.sampleRate = options.sampleRate ?? OPENAI_TTS_SAMPLE_RATE_HZ;
    this.voiceEngine = options.voiceSet ?? 'openai';
    if (!OPENAI_TTS_SAMPLE_RATES.includes(this.sampleRate)) {
      throw new ConfigError(
        `openai TTS: sampleRate must be one of ${OPENAI_TTS_SAMPLE_RATES.join(', ')} Hz, got ${String(options.sampleRate)}.`,
      );
    }
    const responseFormat = options.responseFormat ?? 'pcm';
    if (!OPENAI_TTS_RESPONSE_FORMATS.includes(responseFormat)) {
      throw new ConfigError(
        `openai TTS: responseFormat must be one of ${OPENAI_TTS_RESPONSE_FORMATS.join(', ')}, got ${String(options.responseFormat)}.`,
      );
    }
    const official = /^https:\/\/api\.openai\.com(\/|$)/u.test(baseURL);
    if (official && this.sampleRate !== OPENAI_TTS_SAMPLE_RATE_HZ) {
      throw new ConfigError(
        'openai TTS: api.openai.com sends PCM at 24000 Hz only; leave sampleRate unset for it.',
      );
    }
    this.#settings = {
      baseURL,
      sampleRate: official ? undefined : this.sampleRate,
      outputRate: this.sampleRate,
      responseFormat,
      apiKey: options.apiKey,
      model: options.model ?? DEFAULT_OPENAI_TTS_MODEL,
      voice: options.voice ?? DEFAULT_OPENAI_TTS_VOICE,
      prefetch: Math.max(0, Math.floor(options.prefetch ?? DEFAULT_OPENAI_TTS_PREFETCH)),
      timeoutMs: options.timeoutMs ?? DEFAULT_OPENAI_TTS_TIMEOUT_MS,
      log: options.log,
    };
  }

  /** Opens one response's stream: a request per pushed segment, played in order. */
  open(options: TtsOpenOptions): TtsStream {
    return new OpenAiTtsStream(this.#settings, options);
  }

  /** `GET {baseURL}/models` answers 2xx within 2 s. */
  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    const url = `${this.#settings.baseURL}/models`;
    const timeout = AbortSignal.timeout(OPENAI_TTS_HEALTH_TIMEOUT_MS);
    try {
      const response = await fetch(url, {
        headers: authHeaders(this.#settings.apiKey),
        signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
      });
      await response.body?.cancel();
      return response.ok
        ? { ok: true, detail: `GET ${url}: ${response.status}` }
        : { ok: false, detail: `GET ${url}: ${response.status} ${response.statusText}` };
    } catch (error) {
      const why = timeout.aborted
        ? `no answer within ${OPENAI_TTS_HEALTH_TIMEOUT_MS} ms`
        : describeFetchError(error);
      return { ok: false, detail: `GET ${url}: ${why}` };
    }
  }

  /** Nothing to free: requests belong to their streams. */
  async close(): Promise<void> {}
}

/** Resolved options shared by the provider's streams. */
interface Settings {
  baseURL: string;
  /** Sent as `sample_rate`; undefined for OpenAI itself. */
  sampleRate: number | undefined;
  /** The provider's rate: what comes at another rate is resampled to it. */
  outputRate: number;
  responseFormat: 'pcm' | 'wav';
  apiKey: string | undefined;
  model: string;
  voice: string;
  prefetch: number;
  timeoutMs: number;
  log: TtsLogger | undefined;
}

/** One segment's request. */
interface Request {
  text: string;
  controller: AbortController;
  /** Set once the request has been sent. */
  response: Promise<Response> | undefined;
}

/** One response's speech: a request per segment, played in order. */
class OpenAiTtsStream implements TtsStream {
  readonly #settings: Settings;
  readonly #voice: string;
  readonly #out: TtsEmitter;
  /** Segments not yet fully played, oldest first; the first is playing. */
  #queue: Request[] = [];
  #pumping = false;
  #ended = false;

  constructor(settings: Settings, options: TtsOpenOptions) {
    this.#settings = settings;
    this.#voice = options.voice ?? settings.voice;
    this.#out = new TtsEmitter({
      provider: PROVIDER,
      signal: options.signal,
      onEvent: options.onEvent,
      log: settings.log,
      onAbort: () => this.#stopAll(),
    });
  }

  push(text: string): void {
    if (!this.#out.live || this.#ended) return;
    const segment = text.trim();
    if (segment === '') return;
    this.#queue.push({ text: segment, controller: new AbortController(), response: undefined });
    this.#startAhead();
    if (!this.#pumping) void this.#pump();
  }

  end(): Promise<void> {
    this.#ended = true;
    if (!this.#pumping && this.#queue.length === 0) this.#out.finish();
    return this.#out.done;
  }

  /** Sends the requests of the playing segment and of `prefetch` after it. */
  #startAhead(): void {
    const last = Math.min(this.#queue.length, 1 + this.#settings.prefetch);
    for (let i = 0; i < last; i++) {
      const request = this.#queue[i]!;
      if (request.response === undefined) request.response = this.#send(request);
    }
  }

  #send(request: Request): Promise<Response> {
    const settings = this.#settings;
    // Until the headers arrive; the body's own idle timer takes over after.
    const timer = setTimeout(
      () => request.controller.abort(new TimeoutError('response')),
      settings.timeoutMs,
    );
    const promise = fetch(`${settings.baseURL}/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...authHeaders(settings.apiKey) },
      body: JSON.stringify({
        model: settings.model,
        input: request.text,
        voice: this.#voice,
        response_format: settings.responseFormat,
        ...(settings.sampleRate === undefined ? {} : { sample_rate: settings.sampleRate }),
      }),
      signal: request.controller.signal,
    }).finally(() => clearTimeout(timer));
    // Failures are handled when this segment's turn comes; until then a
    // rejected prefetch must not count as unhandled.
    promise.catch(() => undefined);
    return promise;
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#out.live && this.#queue.length > 0) {
        const request = this.#queue[0]!;
        this.#startAhead();
        await this.#play(request);
        this.#queue.shift();
      }
      if (this.#ended && this.#queue.length === 0) this.#out.finish();
    } catch (error) {
      this.#stopAll();
      this.#out.fail(toSpeechError(error, this.#settings, this.#voice));
    } finally {
      this.#pumping = false;
    }
  }

  /** Plays one segment's body as it arrives. */
  async #play(request: Request): Promise<void> {
    const response = await request.response!;
    if (!this.#out.live) return;
    if (!response.ok) throw await httpError(response, this.#settings, this.#voice);
    const type = response.headers.get('content-type') ?? '';
    if (/^(application\/json|text\/|audio\/(mpeg|mp3|ogg|opus|aac|flac))/iu.test(type)) {
      await response.body?.cancel();
      throw new SpeechProviderError(
        'tts',
        PROVIDER,
        `${this.#settings.baseURL}/audio/speech sent "${type}" instead of raw PCM or WAV; ` +
          `the server ignores response_format "${this.#settings.responseFormat}". Use a server that supports it.`,
      );
    }
    if (response.body === null) throw this.#brokeAfter200(0, undefined);
    const reader = response.body.getReader();
    const body = new SpeechBody({
      contentType: type,
      requestedRate: this.#settings.sampleRate ?? OPENAI_TTS_SAMPLE_RATE_HZ,
      outputRate: this.#settings.outputRate,
    });
    let first = true;
    let samples = 0;
    const give = (pcm: Int16Array): void => {
      if (pcm.length === 0 || !this.#out.live) return;
      if (first) {
        this.#out.label(request.text);
        first = false;
      }
      samples += pcm.length;
      this.#out.audio(pcm);
    };
    try {
      for (;;) {
        const timer = setTimeout(
          () => request.controller.abort(new TimeoutError('body')),
          this.#settings.timeoutMs,
        );
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (timeoutOf(error) !== undefined || !this.#out.live) throw error;
          throw this.#brokeAfter200(samples, error);
        } finally {
          clearTimeout(timer);
        }
        if (!this.#out.live) return;
        if (chunk.done) break;
        give(this.#decoded(() => body.push(chunk.value), request));
      }
      give(this.#decoded(() => body.end(), request));
    } finally {
      reader.releaseLock();
    }
    if (samples === 0 && this.#out.live) throw this.#brokeAfter200(0, undefined);
    if (body.droppedBytes > 0) {
      this.#settings.log?.warn(
        { provider: PROVIDER, bytes: body.droppedBytes },
        'tts body ended mid-frame; last bytes dropped',
      );
    }
  }

  /** Runs a decoding step; audio that cannot be played fails the stream clearly. */
  #decoded(step: () => Int16Array, request: Request): Int16Array {
    try {
      return step();
    } catch (error) {
      if (!(error instanceof AudioFormatError)) throw error;
      request.controller.abort();
      throw new SpeechProviderError(
        'tts',
        PROVIDER,
        `${this.#settings.baseURL}/audio/speech sent audio Troupe cannot play (voice "${this.#voice}", ` +
          `model "${this.#settings.model}"): ${error.message} Ask the server for response_format ` +
          '"pcm", or "wav" of 16-bit PCM.',
        { cause: error },
      );
    }
  }

  /**
   * The server said 200 and then sent no audio, or broke off: speaches does
   * this for a voice it does not have. The stream fails with a clear error
   * (the session goes on in text).
   */
  #brokeAfter200(samples: number, cause: unknown): SpeechProviderError {
    const rate = this.#settings.outputRate;
    const what =
      samples === 0
        ? 'with no audio'
        : `and broke off after ${Math.round((samples / rate) * 1000)} ms of audio`;
    const why = cause === undefined ? '' : ` (${describeFetchError(cause)})`;
    return new SpeechProviderError(
      'tts',
      PROVIDER,
      `${this.#settings.baseURL}/audio/speech answered 200 ${what}${why}, voice "${this.#voice}", ` +
        `model "${this.#settings.model}". Servers such as speaches do this for a voice or model ` +
        'they do not have: check both (the reply goes on as text).',
      { retryable: true, ...(cause === undefined ? {} : { cause }) },
    );
  }

  #stopAll(): void {
    for (const request of this.#queue.splice(0)) request.controller.abort();
  }
}

/** A request took longer than `timeoutMs` (to answer, or between body chunks). */
class TimeoutError extends Error {
  override name = 'TimeoutError';
  constructor(readonly phase: 'response' | 'body') {
    super(phase);
  }
}

function authHeaders(apiKey: string | undefined): Record<string, string> {
  return apiKey ? { authorization: `Bearer ${apiKey}` } : {};
}

/** An HTTP error answer, with the server's own message when it sent one. */
async function httpError(
  response: Response,
  settings: Settings,
  voice: string,
): Promise<SpeechProviderError> {
  let message = '';
  try {
    const body = await response.text();
    try {
      const parsed = JSON.parse(body) as {
        error?: { message?: unknown } | string;
        detail?: unknown;
      };
      const inner = typeof parsed.error === 'string' ? parsed.error : parsed.error?.message;
      message =
        typeof inner === 'string'
          ? inner
          : typeof parsed.detail === 'string'
            ? parsed.detail
            : body;
    } catch {
      message = body;
    }
  } catch {
    // The body itself failed; the status says enough.
  }
  message = message.trim().slice(0, ERROR_BODY_MAX_CHARS);
  const status = response.status;
  const hint =
    status === 401 || status === 403
      ? 'Check the TTS API key.'
      : status === 404
        ? `Check the TTS base URL (${settings.baseURL}) and the model "${settings.model}".`
        : status === 400 || status === 422
          ? `Check the model "${settings.model}" and the voice "${voice}".`
          : status === 429 || status >= 500
            ? 'The server is busy or failing; the next response tries again.'
            : '';
  return new SpeechProviderError(
    'tts',
    PROVIDER,
    `${settings.baseURL}/audio/speech answered ${status} ${response.statusText}` +
      `${message ? `: ${message}` : ''}. ${hint}`.trimEnd(),
    { retryable: status === 408 || status === 429 || status >= 500 },
  );
}

/** Turns whatever a request threw into the error the session sees. */
function toSpeechError(error: unknown, settings: Settings, voice: string): SpeechProviderError {
  if (error instanceof SpeechProviderError) return error;
  const timeout = timeoutOf(error);
  if (timeout !== undefined) {
    return new SpeechProviderError(
      'tts',
      PROVIDER,
      timeout.phase === 'response'
        ? `${settings.baseURL}/audio/speech did not answer within ${settings.timeoutMs} ms.`
        : `${settings.baseURL}/audio/speech stopped sending audio for ${settings.timeoutMs} ms.`,
      { retryable: true, cause: error },
    );
  }
  return new SpeechProviderError(
    'tts',
    PROVIDER,
    `Speech request to ${settings.baseURL}/audio/speech failed (voice "${voice}"): ` +
      `${describeFetchError(error)}. Check that the TTS server is running at that address.`,
    { retryable: true, cause: error },
  );
}

/** The TimeoutError behind an aborted fetch or read, if that is what stopped it. */
function timeoutOf(error: unknown): TimeoutError | undefined {
  if (error instanceof TimeoutError) return error;
  if (error instanceof Error && error.cause instanceof TimeoutError) return error.cause;
  return undefined;
}

/** `fetch failed` says little; its cause (ECONNREFUSED, …) says more. */
function describeFetchError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
  if (cause && typeof cause.code === 'string') return `${error.message} (${cause.code})`;
  if (cause && typeof cause.message === 'string') return `${error.message} (${cause.message})`;
  return error.message;
}
