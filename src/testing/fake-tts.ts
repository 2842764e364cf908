/**
 * Fakes of the TTS engines, for tests: real servers on loopback that speak
 * the OpenAI-compatible `/audio/speech` and Kyutai's msgpack protocols, and
 * an in-process provider that turns text into a tone instantly.
 *
 * The audio is a tone whose length is proportional to the text, so tests can
 * check ordering, lengths and chunking without a speech engine.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { decode, encode } from '@msgpack/msgpack';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { TtsEmitter } from '../voice/tts/emitter.js';
import { splitWords } from '../voice/tts/pcm.js';
import type {
  ProviderHealth,
  TtsEvent,
  TtsOpenOptions,
  TtsProvider,
  TtsStream,
} from '../voice/types.js';

/** The rate both remote fakes speak at, in Hz (as the real engines). */
export const FAKE_TTS_SAMPLE_RATE_HZ = 24_000;
/** Samples per Kyutai audio frame (80 ms at 24 kHz). */
export const KYUTAI_FRAME_SAMPLES = 1920;
/** Tone amplitude, as a fraction of full scale. */
const TONE_LEVEL = 0.25;
/** Largest JSON request body the OpenAI fake reads. */
const MAX_BODY_BYTES = 1024 * 1024;

/** A tone sample: a sine at `hz`, deterministic in the sample index. */
function tone(index: number, hz: number, rate: number): number {
  return TONE_LEVEL * Math.sin((2 * Math.PI * hz * index) / rate);
}

/** `samples` frames of a tone as PCM16 LE, the same in each of `channels`. */
function tonePcm(samples: number, rate: number, hz: number, channels: number): Buffer {
  const bytes = Buffer.alloc(samples * 2 * channels);
  for (let i = 0, at = 0; i < samples; i++) {
    const v = Math.round(tone(i, hz, rate) * 32_767);
    for (let c = 0; c < channels; c++, at += 2) bytes.writeInt16LE(v, at);
  }
  return bytes;
}

/** A WAV file of `samples` frames of a tone, written as {@link FakeWavOptions} say. */
function fakeWav(samples: number, rate: number, hz: number, options: FakeWavOptions): Buffer {
  const channels = options.channels ?? 1;
  const bits = options.bitsPerSample ?? 16;
  const blockAlign = channels * Math.ceil(bits / 8);
  const data =
    bits === 16 ? tonePcm(samples, rate, hz, channels) : Buffer.alloc(samples * blockAlign);
  const streamed = (options.sizes ?? 'streamed') === 'streamed';
  const fmt = Buffer.alloc(24);
  fmt.write('fmt ', 0, 'latin1');
  fmt.writeUInt32LE(16, 4);
  fmt.writeUInt16LE(1, 8); // integer PCM
  fmt.writeUInt16LE(channels, 10);
  fmt.writeUInt32LE(rate, 12);
  fmt.writeUInt32LE(rate * blockAlign, 16);
  fmt.writeUInt16LE(blockAlign, 20);
  fmt.writeUInt16LE(bits, 22);
  // ffmpeg's muxer names itself in a LIST/INFO chunk (an odd length, padded).
  const software = Buffer.from('Lavf61.7.100\0', 'latin1');
  const list = Buffer.alloc(streamed ? 8 + 4 + 8 + software.length + 1 : 0);
  if (streamed) {
    list.write('LIST', 0, 'latin1');
    list.writeUInt32LE(list.length - 8, 4);
    list.write('INFOISFT', 8, 'latin1');
    list.writeUInt32LE(software.length, 16);
    software.copy(list, 20);
  }
  const dataHead = Buffer.alloc(8);
  dataHead.write('data', 0, 'latin1');
  dataHead.writeUInt32LE(streamed ? 0xffffffff : data.length, 4);
  const riff = Buffer.alloc(12);
  riff.write('RIFF', 0, 'latin1');
  riff.writeUInt32LE(streamed ? 0xffffffff : 4 + fmt.length + list.length + 8 + data.length, 4);
  riff.write('WAVE', 8, 'latin1');
  return Buffer.concat([riff, fmt, list, dataHead, data]);
}

/** Closes a server and every socket it holds. */
function closeServer(server: ReturnType<typeof createServer>, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}

// ── OpenAI-compatible /audio/speech ─────────────────────────────────────────

/** A `POST /v1/audio/speech` body as the fake received it. */
export interface FakeSpeechRequest {
  model: string;
  voice: string;
  input: string;
  response_format: string;
  /** The `sample_rate` asked for, if any. */
  sample_rate?: number;
  /** The `authorization` header, if any. */
  authorization?: string;
}

/** A failure the OpenAI fake injects. */
export interface FakeOpenAiFailure {
  /** Answer with this HTTP status and an OpenAI-style error body. */
  status?: number;
  /** The error body's message. @defaultValue 'fake failure' */
  message?: string;
  /** Cut the connection after this many body bytes instead (a broken stream). */
  afterBytes?: number;
  /** Only the n-th request (1-based) fails. @defaultValue every request */
  request?: number;
}

/** Options of {@link startFakeOpenAiTts}. */
export interface FakeOpenAiTtsOptions {
  /** Samples of audio per character of input. @defaultValue 240 (10 ms at 24 kHz) */
  samplesPerChar?: number;
  /** Body bytes per write; odd sizes split samples across chunks. @defaultValue 4800 */
  chunkBytes?: number;
  /**
   * Pause before each body chunk, in ms; a function gets the request and
   * its 0-based index (e.g. to make the first request slow).
   * @defaultValue 0
   */
  delayMs?: number | ((request: FakeSpeechRequest, index: number) => number);
  /** Pause before the response headers, in ms (time to first byte). @defaultValue 0 */
  headersDelayMs?: number | ((request: FakeSpeechRequest, index: number) => number);
  failWith?: FakeOpenAiFailure;
  /**
   * The voices the server has. As speaches does for a voice it does not
   * have, another one gets 200 and then the connection is cut before any
   * audio. @defaultValue any voice
   */
  voices?: readonly string[];
  /** The rate of the server's own voices, used when a request names no `sample_rate`. @defaultValue 24000 */
  nativeSampleRate?: number;
  /** Honour a request's `sample_rate` (speaches does; OpenAI has none). @defaultValue true */
  takesSampleRate?: boolean;
  /** Name the rate of raw PCM in its content type, `audio/pcm;rate=22050`, as openedai-speech does. @defaultValue false */
  rateInContentType?: boolean;
  /** How `response_format: "wav"` answers are written (see {@link FakeWavOptions}). */
  wav?: FakeWavOptions;
  /** The answer's `Content-Type`, whatever it holds. @defaultValue 'audio/pcm' or 'audio/wav' */
  contentType?: string;
}

/** How the OpenAI fake writes a WAV answer. */
export interface FakeWavOptions {
  /**
   * `streamed`: RIFF and data sizes 0xFFFFFFFF and a `LIST` chunk before
   * `data`, as ffmpeg writing to a pipe does (speaches, openedai-speech);
   * `exact`: a canonical 44-byte header with the real sizes.
   * @defaultValue 'streamed'
   */
  sizes?: 'streamed' | 'exact';
  /** Bits per sample; only 16 carries the tone (others are silence). @defaultValue 16 */
  bitsPerSample?: number;
  /** Channels, each the same tone. @defaultValue 1 */
  channels?: number;
  /** Answer WAV even when `pcm` was asked for (a server ignoring `response_format`). @defaultValue false */
  always?: boolean;
}

/** A running OpenAI-compatible TTS fake. */
export interface FakeOpenAiTts {
  /** Base URL ending in `/v1`. */
  url: string;
  /** Every speech request, in arrival order. */
  requests: FakeSpeechRequest[];
  close(): Promise<void>;
}

/**
 * Starts an OpenAI-compatible TTS fake on 127.0.0.1 (`POST /v1/audio/speech`,
 * `GET /v1/models`). It streams `response_format: "pcm"` (PCM16 LE) or
 * `"wav"` (by default as ffmpeg writes it to a pipe: unknown sizes, a `LIST`
 * chunk): a tone lasting `samplesPerChar × input.length` samples at 24 kHz,
 * at the asked `sample_rate` or the server's own, `chunkBytes` at a time.
 *
 * @example
 * const fake = await startFakeOpenAiTts({ chunkBytes: 4801 });
 * const tts = createOpenAiTts({ baseURL: fake.url });
 * // …
 * await fake.close();
 */
export async function startFakeOpenAiTts(
  options: FakeOpenAiTtsOptions = {},
): Promise<FakeOpenAiTts> {
  const samplesPerChar = options.samplesPerChar ?? 240;
  const chunkBytes = Math.max(1, Math.floor(options.chunkBytes ?? 4800));
  const requests: FakeSpeechRequest[] = [];
  const sockets = new Set<Socket>();

  const pause = async (
    setting: FakeOpenAiTtsOptions['delayMs'],
    request: FakeSpeechRequest,
    index: number,
  ): Promise<void> => {
    const ms = typeof setting === 'function' ? setting(request, index) : (setting ?? 0);
    if (ms > 0) await sleep(ms);
  };

  const speech = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req);
    let parsed: Partial<FakeSpeechRequest>;
    try {
      parsed = JSON.parse(body) as Partial<FakeSpeechRequest>;
    } catch {
      sendError(res, 400, 'request body is not JSON', 'invalid_request_error');
      return;
    }
    if (
      typeof parsed.input !== 'string' ||
      typeof parsed.model !== 'string' ||
      typeof parsed.voice !== 'string'
    ) {
      sendError(res, 400, 'model, input and voice are required strings', 'invalid_request_error');
      return;
    }
    const request: FakeSpeechRequest = {
      model: parsed.model,
      voice: parsed.voice,
      input: parsed.input,
      response_format: String(parsed.response_format ?? 'mp3'),
      ...(typeof parsed.sample_rate === 'number' ? { sample_rate: parsed.sample_rate } : {}),
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
    };
    const index = requests.length;
    requests.push(request);
    const failure = options.failWith;
    const failsNow =
      failure !== undefined && (failure.request === undefined || failure.request === index + 1);
    await pause(options.headersDelayMs, request, index);
    if (failsNow && failure.status !== undefined) {
      sendError(res, failure.status, failure.message ?? 'fake failure', 'server_error');
      return;
    }
    if (request.response_format !== 'pcm' && request.response_format !== 'wav') {
      sendError(
        res,
        400,
        `this fake speaks pcm and wav, not ${request.response_format}`,
        'invalid_request_error',
      );
      return;
    }
    if (options.voices !== undefined && !options.voices.includes(request.voice)) {
      res.writeHead(200, { 'content-type': 'audio/pcm', 'transfer-encoding': 'chunked' });
      res.flushHeaders();
      res.socket?.destroy();
      return;
    }
    const rate =
      (options.takesSampleRate ?? true) && request.sample_rate !== undefined
        ? request.sample_rate
        : (options.nativeSampleRate ?? FAKE_TTS_SAMPLE_RATE_HZ);
    // The same duration at any rate: samplesPerChar is counted at 24 kHz.
    const samples = Math.round(
      (request.input.length * samplesPerChar * rate) / FAKE_TTS_SAMPLE_RATE_HZ,
    );
    const wav = request.response_format === 'wav' || options.wav?.always === true;
    const bytes = wav
      ? fakeWav(samples, rate, 300 + 40 * (index % 10), options.wav ?? {})
      : tonePcm(samples, rate, 300 + 40 * (index % 10), 1);
    const contentType =
      options.contentType ??
      (wav ? 'audio/wav' : options.rateInContentType ? `audio/pcm;rate=${rate}` : 'audio/pcm');
    res.writeHead(200, { 'content-type': contentType, 'transfer-encoding': 'chunked' });
    res.socket?.setNoDelay(true);
    const cutAt = failsNow ? failure.afterBytes : undefined;
    for (let at = 0; at < bytes.length; at += chunkBytes) {
      await pause(options.delayMs, request, index);
      if (res.destroyed) return;
      const end = Math.min(at + chunkBytes, cutAt ?? Number.POSITIVE_INFINITY, bytes.length);
      if (end > at) {
        // Wait until the chunk is handed to the socket, so that chunks tend
        // to reach the client as separate reads.
        await new Promise<void>((resolve) => res.write(bytes.subarray(at, end), () => resolve()));
      }
      if (cutAt !== undefined && end >= cutAt) {
        res.socket?.destroy();
        return;
      }
    }
    res.end();
  };

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'POST' && path === '/v1/audio/speech') {
      speech(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, 500, String(error), 'server_error');
        else res.destroy();
      });
    } else if (req.method === 'GET' && path === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'tts-1', object: 'model' }] }));
    } else {
      sendError(res, 404, `no route ${req.method ?? ''} ${path ?? ''}`, 'invalid_request_error');
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await listen(server);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => closeServer(server, sockets),
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendError(res: ServerResponse, status: number, message: string, type: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type, param: null, code: null } }));
}

function listen(server: ReturnType<typeof createServer>): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}

// ── Kyutai moshi-server /api/tts_streaming ──────────────────────────────────

/** A failure the Kyutai fake injects. */
export type FakeKyutaiFailure =
  /** Refuse the WebSocket upgrade with this HTTP status. */
  | { status: number; message?: string }
  /** Send `{type: "Error", message}` after this many words (0 = instead of Ready). */
  | { message: string; afterWords: number }
  /** Drop the connection without a close frame after this many words. */
  | { drop: true; afterWords: number };

/** Options of {@link startFakeKyutaiTts}. */
export interface FakeKyutaiTtsOptions {
  /** Samples of audio per character of each word (plus one character for the gap). @defaultValue 1200 (50 ms) */
  samplesPerChar?: number;
  /** The `kyutai-api-key` the fake accepts. @defaultValue 'public_token' */
  apiKey?: string;
  /** Pause before the server says Ready, in ms. @defaultValue 0 */
  readyDelayMs?: number;
  failWith?: FakeKyutaiFailure;
}

/** A running Kyutai TTS fake. */
export interface FakeKyutaiTts {
  /** `ws://127.0.0.1:port` (the client adds `/api/tts_streaming`). */
  url: string;
  /** Every `Text` message's text, in arrival order, across connections. */
  received: string[];
  /** The query of each connection (voice, format, cfg_alpha…). */
  queries: URLSearchParams[];
  close(): Promise<void>;
}

/**
 * Starts a fake moshi-server TTS on 127.0.0.1 speaking Unmute's msgpack
 * protocol: `Ready`, then for each `Text` word a `Text` timing (ahead of its
 * audio, as the real server) and `Audio` frames of 1920 float32 samples as
 * they fill; after `Eos` the last frame (padded) and a normal close.
 *
 * @example
 * const fake = await startFakeKyutaiTts();
 * const tts = createKyutaiTts({ url: fake.url });
 * // …
 * await fake.close();
 */
export async function startFakeKyutaiTts(
  options: FakeKyutaiTtsOptions = {},
): Promise<FakeKyutaiTts> {
  const samplesPerChar = options.samplesPerChar ?? 1200;
  const apiKey = options.apiKey ?? 'public_token';
  const failure = options.failWith;
  const received: string[] = [];
  const queries: URLSearchParams[] = [];
  const sockets = new Set<Socket>();
  const wss = new WebSocketServer({ noServer: true });

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/api/build_info') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ build_timestamp: 'fake', git_describe: 'fake-tts' }));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const refuse = (status: number, text: string): void => {
      socket.end(
        `HTTP/1.1 ${status} Refused\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
    };
    if (url.pathname !== '/api/tts_streaming') return refuse(404, 'no such endpoint');
    if (req.headers['kyutai-api-key'] !== apiKey) return refuse(401, 'invalid kyutai-api-key');
    if (failure !== undefined && 'status' in failure) {
      return refuse(failure.status, failure.message ?? 'fake failure');
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      queries.push(url.searchParams);
      void serveTts(ws);
    });
  });

  const serveTts = async (ws: WebSocket): Promise<void> => {
    const send = (message: object): void => {
      if (ws.readyState === ws.OPEN) ws.send(encode(message));
    };
    if (options.readyDelayMs) await sleep(options.readyDelayMs);
    if (
      failure !== undefined &&
      'afterWords' in failure &&
      !('drop' in failure) &&
      failure.afterWords === 0
    ) {
      send({ type: 'Error', message: failure.message });
      ws.close(1011);
      return;
    }
    send({ type: 'Ready' });
    // The real server always sends an empty word first.
    send({ type: 'Text', text: '', start_s: 0, stop_s: 0 });
    let pending: number[] = [];
    let cursor = 0;
    let words = 0;
    const flush = (all: boolean): void => {
      while (pending.length >= KYUTAI_FRAME_SAMPLES || (all && pending.length > 0)) {
        const frame = pending.slice(0, KYUTAI_FRAME_SAMPLES);
        pending = pending.slice(KYUTAI_FRAME_SAMPLES);
        while (frame.length < KYUTAI_FRAME_SAMPLES) frame.push(0);
        send({ type: 'Audio', pcm: frame });
      }
    };
    ws.on('message', (data: Buffer) => {
      let message: { type?: unknown; text?: unknown };
      try {
        message = decode(data) as { type?: unknown; text?: unknown };
      } catch {
        send({ type: 'Error', message: 'could not decode msgpack' });
        return;
      }
      if (message.type === 'Text' && typeof message.text === 'string') {
        received.push(message.text);
        words++;
        for (const word of splitWords(message.text)) {
          const length = (word.length + 1) * samplesPerChar;
          send({
            type: 'Text',
            text: word,
            start_s: cursor / FAKE_TTS_SAMPLE_RATE_HZ,
            stop_s: (cursor + length) / FAKE_TTS_SAMPLE_RATE_HZ,
          });
          for (let i = 0; i < length; i++)
            pending.push(tone(cursor + i, 440, FAKE_TTS_SAMPLE_RATE_HZ));
          cursor += length;
        }
        flush(false);
        if (failure !== undefined && 'afterWords' in failure && words >= failure.afterWords) {
          if ('drop' in failure) ws.terminate();
          else {
            send({ type: 'Error', message: failure.message });
            ws.close(1011);
          }
        }
      } else if (message.type === 'Eos') {
        flush(true);
        ws.close(1000);
      }
    });
  };

  await listen(server);
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}`,
    received,
    queries,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      await closeServer(server, sockets);
    },
  };
}

// ── In-process tone provider ────────────────────────────────────────────────

/** Options of {@link createToneTts}. */
export interface ToneTtsOptions {
  /** @defaultValue 24000 */
  sampleRate?: number;
  /** Speech time per character, in ms. @defaultValue 60 */
  msPerChar?: number;
  /** The provider's name (the key of `character.voice`). @defaultValue 'tone' */
  name?: string;
}

/**
 * An in-process {@link TtsProvider} that answers at once with a tone: each
 * segment lasts `msPerChar × its length`, comes in 80 ms chunks with the
 * segment's text on the first, and has a `word` event per word. For session
 * tests that do not care about the engine.
 *
 * @example
 * const tts = createToneTts({ msPerChar: 10 });
 * const stream = tts.open({ signal, onEvent: (e) => events.push(e) });
 * stream.push('Hi there.');
 * await stream.end();
 */
export function createToneTts(options: ToneTtsOptions = {}): TtsProvider {
  const sampleRate = options.sampleRate ?? FAKE_TTS_SAMPLE_RATE_HZ;
  const msPerChar = options.msPerChar ?? 60;
  const name = options.name ?? 'tone';
  const chunkSamples = Math.max(1, Math.round(sampleRate * 0.08));
  const samplesPerChar = Math.max(1, Math.round((sampleRate * msPerChar) / 1000));

  return {
    name,
    sampleRate,
    open: function openToneStream(open: TtsOpenOptions): TtsStream {
      const out = new TtsEmitter({ provider: name, signal: open.signal, onEvent: open.onEvent });
      const queue: string[] = [];
      let ended = false;
      let scheduled = false;
      let segmentIndex = 0;

      const speak = (text: string): void => {
        const start = out.samplesOut;
        const hz = 300 + 40 * (segmentIndex++ % 10);
        const pcm = new Int16Array(text.length * samplesPerChar);
        for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(tone(i, hz, sampleRate) * 32_767);
        out.label(text);
        // Words start where their first character falls in the segment; the
        // emitter holds each back until the audio has reached it.
        for (const match of text.matchAll(/\S+/gu)) {
          out.word(match[0], start + (match.index ?? 0) * samplesPerChar);
        }
        for (let at = 0; at < pcm.length && out.live; at += chunkSamples) {
          out.audio(pcm.subarray(at, Math.min(at + chunkSamples, pcm.length)));
        }
      };

      const drain = (): void => {
        scheduled = false;
        while (out.live && queue.length > 0) speak(queue.shift()!);
        if (ended && queue.length === 0) out.finish();
      };
      // Events come after push() returns, as with a real engine.
      const schedule = (): void => {
        if (scheduled) return;
        scheduled = true;
        setImmediate(drain);
      };

      return {
        push(text: string): void {
          if (!out.live || ended) return;
          const segment = text.trim();
          if (segment === '') return;
          queue.push(segment);
          schedule();
        },
        end(): Promise<void> {
          ended = true;
          schedule();
          return out.done;
        },
      };
    },
    async health(): Promise<ProviderHealth> {
      return { ok: true, detail: `${name}: in-process tone` };
    },
    async close(): Promise<void> {},
  };
}

// ── Recording a stream ──────────────────────────────────────────────────────

/** What {@link createTtsRecorder} keeps of a stream. */
export interface TtsRecorder {
  /** Every event, in order. */
  readonly events: TtsEvent[];
  /** Pass as `onEvent`. */
  onEvent(event: TtsEvent): void;
  /** All audio so far, joined. */
  pcm(): Int16Array;
  /** The `text` of each audio chunk that has one, in order. */
  texts(): string[];
  /** Where each labelled segment starts, in samples, with its text. */
  segments(): Array<{ text: string; startSample: number }>;
  /** The `word` events. */
  words(): Array<{ text: string; startSample: number }>;
  /** The first `error` event's error, if any. */
  error(): Error | undefined;
}

/**
 * Records a TTS stream's events for assertions.
 *
 * @example
 * const rec = createTtsRecorder();
 * const stream = tts.open({ signal, onEvent: rec.onEvent });
 * stream.push('Hi.');
 * await stream.end();
 * expect(rec.texts()).toEqual(['Hi.']);
 */
export function createTtsRecorder(): TtsRecorder {
  const events: TtsEvent[] = [];
  return {
    events,
    onEvent: (event) => {
      events.push(event);
    },
    pcm() {
      const chunks = events.flatMap((e) => (e.type === 'audio' ? [e.pcm] : []));
      const out = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const chunk of chunks) {
        out.set(chunk, at);
        at += chunk.length;
      }
      return out;
    },
    texts: () =>
      events.flatMap((e) => (e.type === 'audio' && e.text !== undefined ? [e.text] : [])),
    segments() {
      const out: Array<{ text: string; startSample: number }> = [];
      let at = 0;
      for (const e of events) {
        if (e.type !== 'audio') continue;
        if (e.text !== undefined) out.push({ text: e.text, startSample: at });
        at += e.pcm.length;
      }
      return out;
    },
    words: () =>
      events.flatMap((e) =>
        e.type === 'word' ? [{ text: e.text, startSample: e.startSample }] : [],
      ),
    error: () => events.find((e) => e.type === 'error')?.error,
  };
}
