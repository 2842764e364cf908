/**
 * Speech to text through any OpenAI-compatible `POST /audio/transcriptions`
 * (OpenAI, faster-whisper-server / speaches, vLLM, whisper.cpp's server…):
 * the utterance is buffered and uploaded as one WAV at `commit()`.
 */
import OpenAI, { toFile } from 'openai';
import { OPENAI_BASE_URL } from '../../config/defaults.js';
import type { SpeechProviderError } from '../../errors.js';
import type { ProviderHealth, SttEvent, SttOpenOptions, SttProvider, SttStream } from '../types.js';
import { SILENT_LOGGER, assertPcm16, emitSafely, messageOf, sttError } from './common.js';
import type { SttLogger } from './common.js';
import { concatPcm, writeWav } from '../audio/pcm.js';

/**
 * Upload rate. Whisper-family models resample everything to 16 kHz before
 * they listen, so 24 kHz would only upload 50% more bytes for nothing.
 */
export const OPENAI_STT_SAMPLE_RATE_HZ = 16_000;
/**
 * Default model: `whisper-1` is the name every compatible server accepts
 * (faster-whisper-server, speaches and vLLM map it to their Whisper);
 * `gpt-4o-mini-transcribe` exists only at OpenAI.
 */
export const DEFAULT_OPENAI_STT_MODEL = 'whisper-1';
/** Whole-request timeout of one transcription. */
export const DEFAULT_OPENAI_STT_TIMEOUT_MS = 30_000;
/** Longest utterance uploaded (10 min, ~19 MB of WAV; OpenAI takes files up to 25 MB). */
export const DEFAULT_OPENAI_STT_MAX_UTTERANCE_MS = 600_000;
/** Retries of a failed upload: none, a voice turn cannot wait through the SDK's backoff. */
export const DEFAULT_OPENAI_STT_MAX_RETRIES = 0;
/** Timeout of `GET /models` in health checks. */
export const OPENAI_STT_HEALTH_TIMEOUT_MS = 2_000;

const NAME = 'openai';

/** Options of {@link OpenAiSttProvider}. */
export interface OpenAiSttOptions {
  /** Base URL ending in `/v1`. @defaultValue 'https://api.openai.com/v1' */
  baseURL?: string;
  /** Sent as `Authorization: Bearer …`; no header at all when unset. */
  apiKey?: string;
  /** @defaultValue 'whisper-1' */
  model?: string;
  /** Language hint (ISO-639-1, `en`); a session's hint wins. @defaultValue none: the server detects it */
  language?: string;
  /** Whole-request timeout. @defaultValue 30000 */
  timeoutMs?: number;
  /** Retries on 429, 5xx and connection errors, with the SDK's backoff. @defaultValue 0 */
  maxRetries?: number;
  /** Longest utterance; a longer one fails its commit. @defaultValue 600000 */
  maxUtteranceMs?: number;
  /** Where the SDK's warnings and request timings go. @defaultValue silent */
  log?: SttLogger;
}

/**
 * The OpenAI-compatible provider: 16 kHz, VAD-gated, one request per
 * utterance.
 *
 * @example
 * const stt = new OpenAiSttProvider({ baseURL: 'http://127.0.0.1:8000/v1' });
 * const stream = stt.open({ signal, onEvent: () => {} });
 * stream.write(pcm16At16kHz);
 * const text = await stream.commit();
 */
export class OpenAiSttProvider implements SttProvider {
  readonly name = NAME;
  readonly sampleRate = OPENAI_STT_SAMPLE_RATE_HZ;
  readonly continuous = false;
  readonly reportsPauses = false;

  readonly #client: OpenAI;
  readonly #settings: StreamSettings;
  readonly #streams = new Set<OpenAiSttStream>();

  constructor(options: OpenAiSttOptions = {}) {
    const baseURL = (options.baseURL ?? OPENAI_BASE_URL).replace(/\/+$/, '');
    const log = options.log ?? SILENT_LOGGER;
    this.#client = new OpenAI({
      baseURL,
      // Every setting is passed explicitly: the SDK would otherwise read OPENAI_API_KEY,
      // OPENAI_ORG_ID… from the environment, which only src/config/ may do.
      apiKey: options.apiKey || 'unused',
      organization: null,
      project: null,
      // A null header removes it: servers without keys get no Authorization at all.
      ...(options.apiKey ? {} : { defaultHeaders: { Authorization: null } }),
      maxRetries: options.maxRetries ?? DEFAULT_OPENAI_STT_MAX_RETRIES,
      timeout: options.timeoutMs ?? DEFAULT_OPENAI_STT_TIMEOUT_MS,
      logger: {
        error: (message, ...detail) => log.error({ provider: NAME, detail }, message),
        warn: (message, ...detail) => log.warn({ provider: NAME, detail }, message),
        info: (message, ...detail) => log.info({ provider: NAME, detail }, message),
        debug: (message, ...detail) => log.debug({ provider: NAME, detail }, message),
      },
      logLevel: 'warn',
    });
    this.#settings = {
      client: this.#client,
      baseURL,
      model: options.model || DEFAULT_OPENAI_STT_MODEL,
      language: options.language,
      timeoutMs: options.timeoutMs ?? DEFAULT_OPENAI_STT_TIMEOUT_MS,
      maxSamples: Math.round(
        ((options.maxUtteranceMs ?? DEFAULT_OPENAI_STT_MAX_UTTERANCE_MS) / 1000) *
          OPENAI_STT_SAMPLE_RATE_HZ,
      ),
      log,
    };
  }

  /** Opens a stream for one session; nothing is sent until `commit()`. */
  open(options: SttOpenOptions): SttStream {
    const stream = new OpenAiSttStream(this.#settings, options, () => this.#streams.delete(stream));
    this.#streams.add(stream);
    return stream;
  }

  /** Lists the server's models (`GET {baseURL}/models`, 2 s timeout). */
  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    const { baseURL, model } = this.#settings;
    try {
      const page = await this.#client.models.list({
        timeout: OPENAI_STT_HEALTH_TIMEOUT_MS,
        maxRetries: 0,
        ...(signal ? { signal } : {}),
      });
      const ids = page.data.map((m) => m.id);
      return {
        ok: true,
        detail: `${baseURL} answers; ${ids.includes(model) ? `lists ${model}` : `${ids.length} model(s) listed, not ${model} (servers often accept it anyway)`}`,
      };
    } catch (err) {
      return { ok: false, detail: `${baseURL}/models: ${describeFailure(err)}` };
    }
  }

  /** Aborts uploads still running. */
  async close(): Promise<void> {
    for (const stream of [...this.#streams]) stream.close();
  }
}

interface StreamSettings {
  client: OpenAI;
  baseURL: string;
  model: string;
  language: string | undefined;
  timeoutMs: number;
  maxSamples: number;
  log: SttLogger;
}

class OpenAiSttStream implements SttStream {
  readonly #s: StreamSettings;
  readonly #onEvent: (event: SttEvent) => void;
  readonly #onClose: () => void;
  readonly #language: string | undefined;
  /** Aborts the uploads under way when the stream closes. */
  readonly #uploads = new AbortController();
  #chunks: Int16Array[] = [];
  #samples = 0;
  #tooLong = false;
  #closed = false;

  constructor(settings: StreamSettings, options: SttOpenOptions, onClose: () => void) {
    this.#s = settings;
    this.#onEvent = options.onEvent;
    this.#onClose = onClose;
    // Whisper takes ISO-639-1 codes: `en-US` becomes `en`.
    const language = options.language ?? settings.language;
    this.#language = language ? language.split(/[-_]/)[0]!.toLowerCase() : undefined;
    if (options.signal.aborted) this.close();
    else options.signal.addEventListener('abort', () => this.close(), { once: true });
  }

  write(pcm: Int16Array): void {
    if (this.#closed) return;
    assertPcm16(pcm, NAME);
    if (pcm.length === 0 || this.#tooLong) return;
    if (this.#samples + pcm.length > this.#s.maxSamples) {
      // Drop what was buffered now rather than hold up to the limit until commit.
      this.#tooLong = true;
      this.#chunks = [];
      return;
    }
    this.#chunks.push(pcm.slice());
    this.#samples += pcm.length;
  }

  async commit(): Promise<string> {
    if (this.#closed) return '';
    const chunks = this.#chunks;
    const samples = this.#samples;
    const tooLong = this.#tooLong;
    this.#chunks = [];
    this.#samples = 0;
    this.#tooLong = false;
    if (tooLong) {
      const seconds = this.#s.maxSamples / OPENAI_STT_SAMPLE_RATE_HZ;
      throw sttError(
        NAME,
        `openai STT: the utterance is longer than ${seconds} s, so it was dropped; commit more often (VAD or manual turns) or raise maxUtteranceMs.`,
      );
    }
    if (samples === 0) return '';

    const wav = writeWav(concatPcm(chunks, samples), OPENAI_STT_SAMPLE_RATE_HZ);
    const started = performance.now();
    let text: string;
    try {
      const file = await toFile(wav, 'utterance.wav', { type: 'audio/wav' });
      const result = await this.#s.client.audio.transcriptions.create(
        {
          file,
          model: this.#s.model,
          response_format: 'json',
          ...(this.#language ? { language: this.#language } : {}),
        },
        { signal: this.#uploads.signal },
      );
      // Compatible servers vary; a missing text is a broken answer, not silence.
      const raw = (result as { text?: unknown }).text;
      if (typeof raw !== 'string') {
        throw sttError(
          NAME,
          `openai STT: ${this.#s.baseURL}/audio/transcriptions answered without a "text" string; is it an OpenAI-compatible transcription server?`,
        );
      }
      text = raw.trim();
    } catch (err) {
      throw this.#toError(err);
    }
    this.#s.log.debug(
      {
        provider: NAME,
        audioMs: Math.round((samples / OPENAI_STT_SAMPLE_RATE_HZ) * 1000),
        requestMs: Math.round(performance.now() - started),
      },
      'openai transcription done',
    );
    if (text && !this.#closed) {
      // Non-streaming engine: the whole text is one `text` event.
      emitSafely(this.#onEvent, { type: 'text', text }, this.#s.log, NAME);
    }
    return text;
  }

  clear(): void {
    this.#chunks = [];
    this.#samples = 0;
    this.#tooLong = false;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#chunks = [];
    this.#uploads.abort();
    this.#onClose();
  }

  #toError(err: unknown): SpeechProviderError | Error {
    if (err instanceof Error && err.name === 'SpeechProviderError') return err;
    const where = `${this.#s.baseURL}/audio/transcriptions`;
    if (this.#uploads.signal.aborted || err instanceof OpenAI.APIUserAbortError) {
      return sttError(
        NAME,
        'openai STT: the stream was closed while the utterance was being transcribed.',
        err,
      );
    }
    if (err instanceof OpenAI.APIConnectionTimeoutError) {
      return sttError(
        NAME,
        `openai STT: ${where} did not answer within ${this.#s.timeoutMs} ms; check the server's load or raise the timeout.`,
        err,
        true,
      );
    }
    if (err instanceof OpenAI.APIError && err.status !== undefined) {
      const hint =
        err.status === 401 || err.status === 403
          ? ' Check STT_API_KEY.'
          : err.status === 404
            ? ` Check STT_URL (it should end in /v1) and the model name "${this.#s.model}".`
            : '';
      return sttError(
        NAME,
        `openai STT: ${where} answered HTTP ${err.status}: ${err.message}.${hint}`,
        err,
        err.status === 429 || err.status >= 500,
      );
    }
    return sttError(NAME, `openai STT: ${where}: ${describeFailure(err)}`, err, true);
  }
}

/** A failure as one line, with the root cause a connection error hides (ECONNREFUSED…). */
function describeFailure(err: unknown): string {
  if (err instanceof OpenAI.APIConnectionTimeoutError) return 'no answer in time';
  if (err instanceof OpenAI.APIError && err.status !== undefined) {
    return `HTTP ${err.status}: ${err.message}`;
  }
  let root: unknown = err;
  while (root instanceof Error && root.cause instanceof Error) root = root.cause;
  const code = (root as { code?: unknown }).code;
  const detail = `${messageOf(root)}${typeof code === 'string' && !messageOf(root).includes(code) ? ` (${code})` : ''}`;
  return err instanceof OpenAI.APIConnectionError
    ? `cannot connect: ${detail}; is the server running at that address?`
    : detail;
}
