/**
 * Streaming speech to text with Kyutai's moshi-server (`/api/asr-streaming`):
 * all audio goes up in 80 ms frames as it arrives, words come back about half
 * a second later, and every step reports the model's pause prediction, which
 * sessions use to end the user's turn (as Unmute does).
 *
 * The model lags the audio by its delay, so `commit()` sends a `Marker` and
 * then silence: the server echoes the marker once the audio before it has
 * been fully heard, and every word before the echo belongs to the utterance.
 */
import WebSocket from 'ws';
import type { RawData } from 'ws';
import { DEFAULT_KYUTAI_STT_URL } from '../../config/defaults.js';
import { ConfigError } from '../../errors.js';
import type { SpeechProviderError } from '../../errors.js';
import type { ProviderHealth, SttEvent, SttOpenOptions, SttProvider, SttStream } from '../types.js';
import { SILENT_LOGGER, assertPcm16, deferred, emitSafely, messageOf, sttError } from './common.js';
import type { Deferred, SttLogger } from './common.js';
import {
  DEFAULT_KYUTAI_API_KEY,
  KYUTAI_API_KEY_HEADER,
  KYUTAI_BUILD_INFO_PATH,
  KYUTAI_FRAME_MS,
  KYUTAI_FRAME_SAMPLES,
  KYUTAI_PAUSE_PRS_INDEX,
  KYUTAI_SAMPLE_RATE_HZ,
  KYUTAI_STT_PATH,
  KYUTAI_STT_SERVER_SCHEMAS,
  encodeKyutaiAudio,
  encodeKyutaiMessage,
  parseKyutaiMessage,
} from './kyutai-protocol.js';

/** Time to connect and get `Ready`. */
export const DEFAULT_KYUTAI_CONNECT_TIMEOUT_MS = 5_000;
/** Time for a commit's marker to come back. */
export const DEFAULT_KYUTAI_FLUSH_TIMEOUT_MS = 5_000;
/**
 * Silence frames sent at once after a commit's marker: the 1B model's 0.5 s
 * delay in 80 ms frames, plus one (Unmute's margin).
 */
export const DEFAULT_KYUTAI_FLUSH_FRAMES = Math.ceil(500 / KYUTAI_FRAME_MS) + 1;
/** Most silence frames one commit may send (5.1 s: covers the 2.6B model's 2.5 s delay). */
export const DEFAULT_KYUTAI_MAX_FLUSH_FRAMES = 64;
/** Steps whose pause prediction is ignored after connecting: "all over the place" at first, says Unmute. */
export const DEFAULT_KYUTAI_PAUSE_WARMUP_STEPS = 12;
/** Timeout of the health check. */
export const KYUTAI_HEALTH_TIMEOUT_MS = 2_000;
/** Audio queued on the socket before the connection counts as stalled (~30 s of audio at ~120 KiB/s). */
export const KYUTAI_MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

const NAME = 'kyutai';

/** Options of {@link KyutaiSttProvider}. */
export interface KyutaiSttOptions {
  /**
   * The server's root (`ws://host:port`; `http(s)://` works too);
   * `/api/asr-streaming` is appended.
   * @defaultValue 'ws://127.0.0.1:8090'
   */
  url?: string;
  /** Sent in the `kyutai-api-key` header. @defaultValue 'public_token' */
  apiKey?: string;
  /** Time to connect and receive `Ready`. @defaultValue 5000 */
  connectTimeoutMs?: number;
  /** Time for a commit's marker to come back; then the connection is dropped. @defaultValue 5000 */
  flushTimeoutMs?: number;
  /** Silence frames sent at once after a commit's marker (the model's delay, plus one). @defaultValue 8 */
  flushFrames?: number;
  /** Most silence frames one commit may send in all. @defaultValue 64 */
  maxFlushFrames?: number;
  /** Steps after connecting whose pause prediction is not reported. @defaultValue 12 */
  pauseWarmupSteps?: number;
  /** Where connection events go. @defaultValue silent */
  log?: SttLogger;
}

/**
 * The Kyutai provider: 24 kHz, continuous (it wants the silence too), with
 * pause predictions. One WebSocket per stream, opened on the first audio and
 * again on the next audio after a failure.
 *
 * @example
 * const stt = new KyutaiSttProvider({ url: 'ws://127.0.0.1:8090' });
 * const stream = stt.open({ signal, onEvent: (e) => e.type === 'pause' && e.probability > 0.6 && stream.commit() });
 * mic.on('data', (pcm24k) => stream.write(pcm24k));
 */
export class KyutaiSttProvider implements SttProvider {
  readonly name = NAME;
  readonly sampleRate = KYUTAI_SAMPLE_RATE_HZ;
  readonly continuous = true;
  readonly reportsPauses = true;

  readonly #settings: KyutaiSettings;
  readonly #streams = new Set<KyutaiSttStream>();

  constructor(options: KyutaiSttOptions = {}) {
    const root = (options.url ?? DEFAULT_KYUTAI_STT_URL)
      .replace(/\/+$/, '')
      .replace(new RegExp(`${KYUTAI_STT_PATH}$`), '');
    const wsUrl = root.replace(/^http/, 'ws') + KYUTAI_STT_PATH;
    // Checked now: a bad URL would otherwise throw from `write()`, deep in a session.
    if (!URL.canParse(wsUrl) || !/^wss?:$/.test(new URL(wsUrl).protocol)) {
      throw new ConfigError(
        `kyutai STT: "${options.url}" is not a ws://, wss://, http:// or https:// URL; set STT_URL to the moshi-server address, e.g. ${DEFAULT_KYUTAI_STT_URL}.`,
      );
    }
    this.#settings = {
      wsUrl,
      httpRoot: root.replace(/^ws/, 'http'),
      apiKey: options.apiKey ?? DEFAULT_KYUTAI_API_KEY,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_KYUTAI_CONNECT_TIMEOUT_MS,
      flushTimeoutMs: options.flushTimeoutMs ?? DEFAULT_KYUTAI_FLUSH_TIMEOUT_MS,
      flushFrames: options.flushFrames ?? DEFAULT_KYUTAI_FLUSH_FRAMES,
      maxFlushFrames: options.maxFlushFrames ?? DEFAULT_KYUTAI_MAX_FLUSH_FRAMES,
      pauseWarmupSteps: options.pauseWarmupSteps ?? DEFAULT_KYUTAI_PAUSE_WARMUP_STEPS,
      log: options.log ?? SILENT_LOGGER,
    };
  }

  /** Opens a stream for one session; it connects on the first audio. */
  open(options: SttOpenOptions): SttStream {
    const stream = new KyutaiSttStream(this.#settings, options, () => this.#streams.delete(stream));
    this.#streams.add(stream);
    return stream;
  }

  /** `GET {http url}/api/build_info` answers 2xx within 2 s. */
  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    const url = this.#settings.httpRoot + KYUTAI_BUILD_INFO_PATH;
    const timeout = AbortSignal.timeout(KYUTAI_HEALTH_TIMEOUT_MS);
    try {
      const res = await fetch(url, {
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      const body = (await res.text()).slice(0, 200);
      if (!res.ok) return { ok: false, detail: `${url} answered HTTP ${res.status}: ${body}` };
      return { ok: true, detail: `${url}: ${body}` };
    } catch (err) {
      const reason = timeout.aborted
        ? `no answer within ${KYUTAI_HEALTH_TIMEOUT_MS} ms`
        : rootMessage(err);
      return { ok: false, detail: `${url}: ${reason}; is moshi-server running there?` };
    }
  }

  /** Closes every stream's socket. */
  async close(): Promise<void> {
    for (const stream of [...this.#streams]) stream.close();
  }
}

interface KyutaiSettings {
  wsUrl: string;
  httpRoot: string;
  apiKey: string;
  connectTimeoutMs: number;
  flushTimeoutMs: number;
  flushFrames: number;
  maxFlushFrames: number;
  pauseWarmupSteps: number;
  log: SttLogger;
}

/** A marker sent and not echoed yet, with the words heard before it. */
interface PendingMarker {
  id: number;
  /** `commit` resolves with the words; `clear` drops them. */
  kind: 'commit' | 'clear';
  words: string[];
  reply?: Deferred<string>;
  timer?: NodeJS.Timeout;
}

/** One connection; replaced after a failure. */
interface Connection {
  ws: WebSocket;
  ready: boolean;
  /** Frames sent before `Ready`, in order. */
  outbox: Uint8Array[];
  readyTimer: NodeJS.Timeout;
  steps: number;
}

class KyutaiSttStream implements SttStream {
  readonly #s: KyutaiSettings;
  readonly #onEvent: (event: SttEvent) => void;
  readonly #onClose: () => void;
  #conn: Connection | undefined;
  #closed = false;
  /** The frame being filled, in floats. */
  readonly #frame = new Float32Array(KYUTAI_FRAME_SAMPLES);
  #frameFill = 0;
  /** Samples written since the last commit or clear. */
  #samples = 0;
  /** Words of the utterance under way (no marker sent for it yet). */
  #open: string[] = [];
  /** Markers in flight, oldest first: the server echoes them in order. */
  #pending: PendingMarker[] = [];
  #nextMarkerId = 1;
  /** Silence frames a flush may still send. */
  #flushBudget = 0;

  constructor(settings: KyutaiSettings, options: SttOpenOptions, onClose: () => void) {
    this.#s = settings;
    this.#onEvent = options.onEvent;
    this.#onClose = onClose;
    if (options.signal.aborted) this.close();
    else options.signal.addEventListener('abort', () => this.close(), { once: true });
  }

  write(pcm: Int16Array): void {
    if (this.#closed) return;
    assertPcm16(pcm, NAME);
    if (pcm.length === 0) return;
    this.#samples += pcm.length;
    const frame = this.#frame;
    for (let i = 0; i < pcm.length; i++) {
      frame[this.#frameFill++] = pcm[i]! / 32768;
      if (this.#frameFill === KYUTAI_FRAME_SAMPLES) {
        this.#send(encodeKyutaiAudio(frame));
        this.#frameFill = 0;
      }
    }
  }

  commit(): Promise<string> {
    if (this.#closed) return Promise.resolve('');
    if (this.#samples === 0) return Promise.resolve('');
    this.#samples = 0;
    this.#sendPartialFrame();
    const marker: PendingMarker = {
      id: this.#nextMarkerId++,
      kind: 'commit',
      words: this.#open,
      reply: deferred<string>(),
    };
    this.#open = [];
    this.#pending.push(marker);
    this.#send(encodeKyutaiMessage({ type: 'Marker', id: marker.id }));
    // The model only reaches the marker after hearing its delay's worth of audio
    // more: send silence now, and one frame more per step until the echo.
    this.#flushBudget = this.#s.maxFlushFrames;
    for (let i = 0; i < this.#s.flushFrames; i++) this.#sendSilence();
    const conn = this.#conn;
    marker.timer = setTimeout(() => {
      if (conn) {
        this.#fail(
          conn,
          sttError(
            NAME,
            `kyutai STT: the server did not finish the utterance within ${this.#s.flushTimeoutMs} ms (marker ${marker.id} never came back); it may be overloaded.`,
            undefined,
            true,
          ),
        );
      }
    }, this.#s.flushTimeoutMs);
    return marker.reply!.promise;
  }

  clear(): void {
    if (this.#closed) return;
    this.#frameFill = 0;
    this.#open = [];
    if (this.#samples === 0) return;
    this.#samples = 0;
    // Words of audio already sent still come: a marker fences them off, and the
    // next audio (or commit's silence) carries it through the model.
    const marker: PendingMarker = { id: this.#nextMarkerId++, kind: 'clear', words: [] };
    this.#pending.push(marker);
    this.#send(encodeKyutaiMessage({ type: 'Marker', id: marker.id }));
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const conn = this.#conn;
    this.#conn = undefined;
    this.#settle(
      sttError(NAME, 'kyutai STT: the stream was closed before the utterance was recognised.'),
    );
    if (conn) {
      clearTimeout(conn.readyTimer);
      conn.ws.close(1000);
    }
    this.#onClose();
  }

  // ── Sending ──

  #send(bytes: Uint8Array): void {
    let conn = this.#conn;
    if (!conn) conn = this.#connect();
    if (!conn.ready) {
      conn.outbox.push(bytes);
      return;
    }
    if (conn.ws.bufferedAmount > KYUTAI_MAX_BUFFERED_BYTES) {
      // Audio is live: when the server or the network falls this far behind, the
      // words would come too late to be useful. Start again on a fresh connection.
      this.#fail(
        conn,
        sttError(
          NAME,
          `kyutai STT: ${this.#s.wsUrl} is not taking audio as fast as it comes (${Math.round(conn.ws.bufferedAmount / 1024)} KiB queued); the server or the network is overloaded.`,
          undefined,
          true,
        ),
      );
      return;
    }
    conn.ws.send(bytes);
  }

  #sendSilence(): void {
    if (this.#flushBudget <= 0) return;
    this.#flushBudget--;
    this.#send(encodeKyutaiAudio(SILENT_FRAME));
  }

  /** Pads the last partial frame with silence and sends it, so the tail is heard. */
  #sendPartialFrame(): void {
    if (this.#frameFill === 0) return;
    this.#frame.fill(0, this.#frameFill);
    this.#send(encodeKyutaiAudio(this.#frame));
    this.#frameFill = 0;
  }

  #connect(): Connection {
    const ws = new WebSocket(this.#s.wsUrl, {
      headers: { [KYUTAI_API_KEY_HEADER]: this.#s.apiKey },
      handshakeTimeout: this.#s.connectTimeoutMs,
    });
    const conn: Connection = {
      ws,
      ready: false,
      outbox: [],
      steps: 0,
      readyTimer: setTimeout(
        () =>
          this.#fail(
            conn,
            sttError(
              NAME,
              `kyutai STT: ${this.#s.wsUrl} did not say Ready within ${this.#s.connectTimeoutMs} ms; is the server overloaded?`,
              undefined,
              true,
            ),
          ),
        this.#s.connectTimeoutMs,
      ),
    };
    this.#conn = conn;
    ws.on('message', (data, isBinary) => this.#onMessage(conn, data, isBinary));
    ws.on('error', (err) =>
      this.#fail(
        conn,
        sttError(
          NAME,
          `kyutai STT: connection to ${this.#s.wsUrl} failed: ${rootMessage(err)}; is moshi-server running there (STT_URL) and is the key right?`,
          err,
          true,
        ),
      ),
    );
    ws.on('close', (code, reason) =>
      this.#fail(
        conn,
        sttError(
          NAME,
          `kyutai STT: the server closed the connection (code ${code}${reason.length ? `: ${reason.toString()}` : ''}).`,
          undefined,
          true,
        ),
      ),
    );
    this.#s.log.debug({ provider: NAME, url: this.#s.wsUrl }, 'kyutai stt connecting');
    return conn;
  }

  // ── Receiving ──

  #onMessage(conn: Connection, data: RawData, isBinary: boolean): void {
    if (conn !== this.#conn) return;
    if (!isBinary) return; // moshi-server only sends binary frames; text is noise
    const bytes = Buffer.isBuffer(data)
      ? data
      : Array.isArray(data)
        ? Buffer.concat(data)
        : Buffer.from(data);
    const parsed = parseKyutaiMessage(bytes, KYUTAI_STT_SERVER_SCHEMAS);
    if (!parsed.ok) {
      if ('unknownType' in parsed) {
        this.#s.log.debug(
          { provider: NAME, type: parsed.unknownType },
          'kyutai message type skipped',
        );
        return;
      }
      this.#fail(
        conn,
        sttError(
          NAME,
          `kyutai STT: the server sent ${parsed.error}; is ${this.#s.wsUrl} a moshi-server?`,
        ),
      );
      return;
    }
    const m = parsed.message;
    switch (m.type) {
      case 'Ready': {
        conn.ready = true;
        clearTimeout(conn.readyTimer);
        for (const bytes of conn.outbox) conn.ws.send(bytes);
        conn.outbox = [];
        return;
      }
      case 'Word': {
        const head = this.#pending[0];
        if (head?.kind === 'clear') return;
        // moshi-server's first Word of a connection is empty: no delta for it.
        const word = m.text.trim();
        if (word === '') return;
        const words = head ? head.words : this.#open;
        const text = (words.length > 0 ? ' ' : '') + word;
        words.push(word);
        this.#emit({ type: 'text', text, startMs: m.start_time * 1000 });
        return;
      }
      case 'Step': {
        conn.steps++;
        const probability = m.prs[KYUTAI_PAUSE_PRS_INDEX];
        if (conn.steps > this.#s.pauseWarmupSteps && probability !== undefined) {
          this.#emit({ type: 'pause', probability: Math.min(1, Math.max(0, probability)) });
        }
        if (this.#pending.some((p) => p.kind === 'commit')) this.#sendSilence();
        return;
      }
      case 'Marker': {
        const at = this.#pending.findIndex((p) => p.id === m.id);
        if (at === -1) return;
        // Echoes come in order; an earlier marker still pending was lost: settle it too.
        for (const marker of this.#pending.splice(0, at + 1)) {
          clearTimeout(marker.timer);
          marker.reply?.resolve(marker.words.join(' '));
        }
        if (!this.#pending.some((p) => p.kind === 'commit')) this.#flushBudget = 0;
        return;
      }
      case 'Error':
        this.#fail(
          conn,
          sttError(NAME, `kyutai STT: the server reported an error: ${m.message}`, undefined, true),
        );
        return;
      case 'EndWord':
        return;
    }
  }

  /**
   * Drops the connection after a failure: commits waiting for it reject; if
   * none was waiting but speech was under way, an `error` event says so. The
   * next audio opens a new connection.
   */
  #fail(conn: Connection, error: SpeechProviderError): void {
    if (conn !== this.#conn) return;
    this.#conn = undefined;
    clearTimeout(conn.readyTimer);
    conn.ws.removeAllListeners('close');
    conn.ws.on('error', () => {}); // a late socket error must not become an uncaught one
    conn.ws.terminate();
    const speaking = this.#samples > 0 || this.#open.length > 0;
    const told = this.#settle(error);
    this.#samples = 0;
    this.#frameFill = 0;
    this.#open = [];
    this.#flushBudget = 0;
    if (!told && speaking) this.#emit({ type: 'error', error });
    else if (!told) {
      this.#s.log.warn({ provider: NAME, err: error }, 'kyutai stt connection lost while idle');
    }
  }

  /** Rejects every pending commit with `error`; says whether there was one. */
  #settle(error: SpeechProviderError): boolean {
    let told = false;
    for (const marker of this.#pending.splice(0)) {
      clearTimeout(marker.timer);
      if (marker.reply) {
        marker.reply.reject(error);
        told = true;
      }
    }
    return told;
  }

  #emit(event: SttEvent): void {
    if (!this.#closed) emitSafely(this.#onEvent, event, this.#s.log, NAME);
  }
}

const SILENT_FRAME = new Float32Array(KYUTAI_FRAME_SAMPLES);

/** The innermost cause's message (ECONNREFUSED hides under fetch's "fetch failed"). */
function rootMessage(err: unknown): string {
  let root: unknown = err;
  while (root instanceof Error && root.cause instanceof Error) root = root.cause;
  const message = messageOf(root);
  if (message) return message;
  // Node's AggregateError (IPv4 and IPv6 both refused) has an empty message and a code.
  const code = (root as { code?: unknown }).code;
  return typeof code === 'string' ? code : 'unknown error';
}
