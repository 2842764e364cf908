/**
 * Fakes of the remote STT engines, for tests and for trying Troupe without
 * them: real servers on loopback that speak the protocols faithfully.
 *
 * - `startFakeOpenAiStt`: an OpenAI-compatible `POST /v1/audio/transcriptions`
 *   that parses the multipart body, checks the file is a PCM16 WAV and
 *   answers scripted transcripts (or a scripted failure).
 * - `startFakeKyutaiStt`: moshi-server's `/api/asr-streaming` over msgpack:
 *   `Ready`, one `Step` per 80 ms frame, scripted `Word`s as speech-like
 *   (non-silent) audio arrives, `Marker`s echoed after the model's delay
 *   and the audio still buffered. As moshi-server does: the first `Word` of a
 *   connection is empty, and errors close the socket without a status code.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { RawData, WebSocket } from 'ws';
import {
  KYUTAI_API_KEY_HEADER,
  KYUTAI_BUILD_INFO_PATH,
  KYUTAI_FRAME_MS,
  KYUTAI_FRAME_SAMPLES,
  KYUTAI_STT_CLIENT_SCHEMAS,
  KYUTAI_STT_PATH,
  encodeKyutaiMessage,
  parseKyutaiMessage,
} from '../voice/stt/kyutai-protocol.js';
import type { KyutaiSttServerMessage } from '../voice/stt/kyutai-protocol.js';
import { readWav } from '../voice/audio/pcm.js';

/** Largest upload the OpenAI fake reads (OpenAI's own limit is 25 MB). */
export const FAKE_STT_MAX_UPLOAD_BYTES = 32 * 1024 * 1024;
/** The transcript of every utterance when none are scripted. */
export const FAKE_STT_DEFAULT_TRANSCRIPT = 'hello from the fake transcriber';

/** Closes a server and every socket it holds. */
function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Listens on 127.0.0.1 at a port the OS picks; tracks sockets so close() is immediate. */
async function listenLoopback(server: Server): Promise<{ port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return { port: (server.address() as AddressInfo).port, sockets };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': typeof body === 'string' ? 'text/plain' : 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function openAiError(message: string, type = 'invalid_request_error'): object {
  return { error: { message, type, param: null, code: null } };
}

// ── OpenAI-compatible /audio/transcriptions ─────────────────────────────────

/** One `POST /v1/audio/transcriptions` as the fake received it. */
export interface FakeSttRequest {
  model: string;
  language: string | undefined;
  responseFormat: string | undefined;
  /** The `Authorization` header, if any. */
  authorization: string | undefined;
  /** Size of the uploaded WAV file. */
  wavBytes: number;
  sampleRate: number;
  durationMs: number;
}

/** Options of {@link startFakeOpenAiStt}. */
export interface FakeOpenAiSttOptions {
  /**
   * The text of each request in order (the last one repeats), or a function
   * of the uploaded WAV and the whole form.
   * @defaultValue ['hello from the fake transcriber']
   */
  transcripts?: readonly string[] | ((wav: Uint8Array, form: FormData) => string);
  /** Wait before answering (an engine's latency). @defaultValue 0 */
  delayMs?: number;
  /** Answer every transcription with this status and body (an object is sent as JSON). */
  failWith?: { status: number; body: unknown };
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401. */
  apiKey?: string;
  /** Served by `GET /v1/models`. @defaultValue ['whisper-1'] */
  models?: readonly string[];
  /** Called as each valid transcription request arrives (before any delay or failure). */
  onRequest?: (request: FakeSttRequest) => void;
}

/** A running fake. */
export interface FakeOpenAiStt {
  /** Base URL ending in `/v1`. */
  readonly url: string;
  /** Transcription requests that reached the fake with a valid body, in order. */
  readonly requests: FakeSttRequest[];
  close(): Promise<void>;
}

/**
 * Starts an OpenAI-compatible transcription server on loopback.
 *
 * @example
 * const fake = await startFakeOpenAiStt({ transcripts: ['what is the weather'] });
 * const stt = new OpenAiSttProvider({ baseURL: fake.url });
 * …
 * await fake.close();
 */
export async function startFakeOpenAiStt(
  options: FakeOpenAiSttOptions = {},
): Promise<FakeOpenAiStt> {
  const requests: FakeSttRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const transcripts = options.transcripts ?? [FAKE_STT_DEFAULT_TRANSCRIPT];

  const transcribe = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      sendJson(res, 401, openAiError('Incorrect API key provided.', 'invalid_api_key'));
      return;
    }
    const contentType = req.headers['content-type'] ?? '';
    if (!contentType.startsWith('multipart/form-data')) {
      sendJson(res, 400, openAiError(`expected multipart/form-data, got "${contentType}"`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > FAKE_STT_MAX_UPLOAD_BYTES) {
        sendJson(res, 413, openAiError('upload too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    }
    let form: FormData;
    try {
      // undici's multipart parser (Node's own fetch Request) reads the body.
      form = await new Request('http://fake.invalid/', {
        method: 'POST',
        headers: { 'content-type': contentType },
        body: Buffer.concat(chunks),
      }).formData();
    } catch (err) {
      sendJson(res, 400, openAiError(`unreadable multipart body: ${(err as Error).message}`));
      return;
    }
    const file = form.get('file');
    const model = form.get('model');
    if (!(file instanceof Blob)) {
      sendJson(res, 400, openAiError('missing the "file" field'));
      return;
    }
    if (typeof model !== 'string' || !model) {
      sendJson(res, 400, openAiError('missing the "model" field'));
      return;
    }
    const wav = new Uint8Array(await file.arrayBuffer());
    let parsed: ReturnType<typeof readWav>;
    try {
      parsed = readWav(wav);
    } catch (err) {
      sendJson(res, 400, openAiError(`file is not a PCM16 WAV: ${(err as Error).message}`));
      return;
    }
    const language = form.get('language');
    const responseFormat = form.get('response_format');
    requests.push({
      model,
      language: typeof language === 'string' ? language : undefined,
      responseFormat: typeof responseFormat === 'string' ? responseFormat : undefined,
      authorization: req.headers.authorization,
      wavBytes: wav.length,
      sampleRate: parsed.sampleRate,
      durationMs: (parsed.pcm.length / parsed.sampleRate) * 1000,
    });
    const index = requests.length - 1;
    options.onRequest?.(requests[index]!);
    if (options.delayMs) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          resolve();
        }, options.delayMs);
        timers.add(timer);
        // A client that gave up (timeout, abort) frees the wait at once.
        res.on('close', () => {
          clearTimeout(timer);
          timers.delete(timer);
          resolve();
        });
      });
      if (res.destroyed || res.writableEnded) return;
    }
    if (options.failWith) {
      sendJson(res, options.failWith.status, options.failWith.body);
      return;
    }
    const text =
      typeof transcripts === 'function'
        ? transcripts(wav, form)
        : (transcripts[Math.min(index, transcripts.length - 1)] ?? '');
    sendJson(res, 200, { text });
  };

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'POST' && path === '/v1/audio/transcriptions') {
      transcribe(req, res).catch((err: Error) => {
        if (!res.headersSent) sendJson(res, 500, openAiError(err.message, 'server_error'));
        else res.destroy();
      });
      return;
    }
    if (req.method === 'GET' && path === '/v1/models') {
      sendJson(res, 200, {
        object: 'list',
        data: (options.models ?? ['whisper-1']).map((id) => ({
          id,
          object: 'model',
          created: 0,
          owned_by: 'fake',
        })),
      });
      return;
    }
    sendJson(res, 404, openAiError(`no route ${req.method} ${path}`));
  });
  const { port, sockets } = await listenLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => {
      for (const timer of timers) clearTimeout(timer);
      return closeServer(server, sockets);
    },
  };
}

// ── Kyutai /api/asr-streaming ───────────────────────────────────────────────

/** Options of {@link startFakeKyutaiStt}. */
export interface FakeKyutaiSttOptions {
  /** Words each connection says, in order, as it hears speech. @defaultValue ['hello', 'world'] */
  words?: readonly string[];
  /** Non-silent frames heard per word. @defaultValue 3 (240 ms) */
  framesPerWord?: number;
  /** Steps between hearing audio and answering for it (the model's delay). @defaultValue 6 (480 ms) */
  delayFrames?: number;
  /**
   * Steps report a high pause probability (`prs[2]` = 0.95) on silent frames
   * once every scripted word is out; false keeps it low (0.05) throughout.
   * @defaultValue true
   */
  pauseAfterWords?: boolean;
  /** RMS (of samples in [-1, 1]) below which a frame counts as silence. @defaultValue 0.01 */
  silenceRms?: number;
  /** When set, a different `kyutai-api-key` gets HTTP 401 at the upgrade. */
  apiKey?: string;
  /** Answer the connection with `Error{message}` instead of `Ready` (a server at capacity). */
  rejectWith?: string;
  /** After this many frames, send `Error{message: 'fake failure'}` and close the socket. */
  errorAfterFrames?: number;
  /** After this many frames, send bytes that are not msgpack. */
  malformedAfterFrames?: number;
  /** Send an empty `Word` before the first scripted one, as moshi-server does. @defaultValue true */
  emptyFirstWord?: boolean;
}

/** What the fake Kyutai server has received, over all connections. */
export interface FakeKyutaiReceived {
  audioSamples: number;
  frames: number;
  /** Marker ids, in order. */
  markers: number[];
  connections: number;
  /** The `kyutai-api-key` header of each connection. */
  apiKeys: Array<string | undefined>;
}

/** A running fake. */
export interface FakeKyutaiStt {
  /** `ws://127.0.0.1:port`, the root the provider appends `/api/asr-streaming` to. */
  readonly url: string;
  readonly received: FakeKyutaiReceived;
  close(): Promise<void>;
}

/**
 * Starts a moshi-server look-alike for streaming STT on loopback.
 *
 * @example
 * const fake = await startFakeKyutaiStt({ words: ['what', 'time', 'is', 'it'] });
 * const stt = new KyutaiSttProvider({ url: fake.url });
 */
export async function startFakeKyutaiStt(
  options: FakeKyutaiSttOptions = {},
): Promise<FakeKyutaiStt> {
  const received: FakeKyutaiReceived = {
    audioSamples: 0,
    frames: 0,
    markers: [],
    connections: 0,
    apiKeys: [],
  };
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === KYUTAI_BUILD_INFO_PATH) {
      sendJson(res, 200, { build_timestamp: 'fake', git_describe: 'fake-stt', instance: 'fake' });
    } else sendJson(res, 404, `no route ${req.method} ${req.url}`);
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const key = req.headers[KYUTAI_API_KEY_HEADER];
    const refuse = (status: string): void => {
      socket.end(`HTTP/1.1 ${status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    };
    if (req.url?.split('?')[0] !== KYUTAI_STT_PATH) return refuse('404 Not Found');
    if (options.apiKey !== undefined && key !== options.apiKey) return refuse('401 Unauthorized');
    wss.handleUpgrade(req, socket, head, (ws) => {
      received.connections++;
      received.apiKeys.push(typeof key === 'string' ? key : undefined);
      serveKyutaiConnection(ws, options, received);
    });
  });
  const { port, sockets } = await listenLoopback(server);
  return {
    url: `ws://127.0.0.1:${port}`,
    received,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      await closeServer(server, sockets);
    },
  };
}

/** One connection of the fake: a tiny deterministic "model". */
function serveKyutaiConnection(
  ws: WebSocket,
  options: FakeKyutaiSttOptions,
  received: FakeKyutaiReceived,
): void {
  const words = options.words ?? ['hello', 'world'];
  const framesPerWord = Math.max(1, options.framesPerWord ?? 3);
  const delay = Math.max(0, options.delayFrames ?? 6);
  const silenceRms = options.silenceRms ?? 0.01;
  const pauseAfterWords = options.pauseAfterWords ?? true;

  const send = (message: KyutaiSttServerMessage): void => {
    if (ws.readyState === ws.OPEN) ws.send(encodeKyutaiMessage(message));
  };
  if (options.rejectWith !== undefined) {
    send({ type: 'Error', message: options.rejectWith });
    ws.close(); // moshi-server sends no status code
    return;
  }
  send({ type: 'Ready' });

  const buffer = new Float32Array(KYUTAI_FRAME_SAMPLES);
  let fill = 0;
  let step = 0;
  let spokenFrames = 0;
  let nextWord = 0;
  let emptyWordDue = options.emptyFirstWord ?? true;
  /** Answers due at a step: words found at step − delay, markers received at step − delay. */
  const due: Array<{ at: number; message: KyutaiSttServerMessage }> = [];

  const processFrame = (): void => {
    let energy = 0;
    for (let i = 0; i < KYUTAI_FRAME_SAMPLES; i++) energy += buffer[i]! * buffer[i]!;
    const silent = Math.sqrt(energy / KYUTAI_FRAME_SAMPLES) < silenceRms;
    if (!silent && nextWord < words.length) {
      spokenFrames++;
      if (emptyWordDue) {
        emptyWordDue = false;
        const start = (step * KYUTAI_FRAME_MS) / 1000;
        due.push({ at: step + delay, message: { type: 'Word', text: '', start_time: start } });
      }
      if (spokenFrames % framesPerWord === 0) {
        const start = ((step + 1 - framesPerWord) * KYUTAI_FRAME_MS) / 1000;
        due.push({
          at: step + delay,
          message: { type: 'Word', text: words[nextWord++]!, start_time: start },
        });
        due.push({
          at: step + delay,
          message: { type: 'EndWord', stop_time: ((step + 1) * KYUTAI_FRAME_MS) / 1000 },
        });
      }
    }
    // As moshi-server: the step's words, then the Step, then the markers now reached.
    const ready = (m: KyutaiSttServerMessage): boolean => m.type !== 'Marker';
    for (const d of due.filter((d) => d.at <= step && ready(d.message))) send(d.message);
    const scriptDone = nextWord >= words.length && !due.some((d) => d.message.type === 'Word');
    const pause = pauseAfterWords && silent && scriptDone ? 0.95 : 0.05;
    send({ type: 'Step', step_idx: step, prs: [pause, pause, pause, pause], buffered_pcm: 0 });
    for (const d of due.filter((d) => d.at <= step && !ready(d.message))) send(d.message);
    for (let i = due.length - 1; i >= 0; i--) if (due[i]!.at <= step) due.splice(i, 1);
    step++;
    received.frames++;
    if (options.errorAfterFrames !== undefined && received.frames === options.errorAfterFrames) {
      send({ type: 'Error', message: 'fake failure' });
      ws.close();
    }
    if (
      options.malformedAfterFrames !== undefined &&
      received.frames === options.malformedAfterFrames
    ) {
      // 0xc1 is the one byte msgpack never uses.
      ws.send(Buffer.from([0xc1, 0x00]));
    }
  };

  ws.on('message', (data: RawData, isBinary: boolean) => {
    if (!isBinary) return;
    const bytes = Buffer.isBuffer(data) ? data : Buffer.concat(data as Buffer[]);
    const parsed = parseKyutaiMessage(bytes, KYUTAI_STT_CLIENT_SCHEMAS);
    if (!parsed.ok) {
      // moshi-server ends the connection on a message it cannot read.
      send({
        type: 'Error',
        message: 'error' in parsed ? parsed.error : `unknown type ${parsed.unknownType}`,
      });
      ws.close();
      return;
    }
    const m = parsed.message;
    if (m.type === 'Marker') {
      received.markers.push(m.id);
      // The marker comes back once the model has stepped through the audio
      // sent before it (the part of a frame still buffered counts) and then
      // its delay.
      const buffered = fill > 0 ? 1 : 0;
      due.push({ at: step + delay + buffered, message: { type: 'Marker', id: m.id } });
      return;
    }
    received.audioSamples += m.pcm.length;
    for (const sample of m.pcm) {
      buffer[fill++] = sample;
      if (fill === KYUTAI_FRAME_SAMPLES) {
        fill = 0;
        processFrame();
      }
    }
  });
}
