/**
 * Voice in the web client (src/web) in headless Chromium, with a fake
 * microphone fed by a WAV that Debian's flite speaks at test time.
 *
 * Two suites:
 * - against a scripted socket (Playwright's routeWebSocket plays the
 *   server): what the client sends when the mic turns on, how it plays and
 *   counts reply audio, barge-in and truncation, and its errors — every server
 *   event and its timing under the test's control;
 * - end to end against the real server (pocketsphinx STT, espeak TTS, the
 *   LLM simulator): a spoken question about the weather runs the tool and is
 *   answered aloud.
 *
 * Every wait is on a condition (a locator, expect.poll or a recorded frame),
 * never a sleep.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Page, WebSocketRoute } from 'playwright-core';
import type { SimReply, SimScript } from '../../src/testing/index.js';
import type { TestServer } from '../helpers/server.js';
import { DEFAULT_WAIT_MS } from '../helpers/wait.js';

/** Chromium to drive; Debian's package by default. */
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** How long a DOM condition may take before the test fails. */
const WAIT_MS = DEFAULT_WAIT_MS;
const POLL = { timeout: WAIT_MS, interval: 25 };
/** End to end: speech, recognition, the model, the tool and speech again, all in real time. */
const E2E_POLL = { timeout: DEFAULT_WAIT_MS, interval: 50 };

/** What the fake microphone says (flite's kal16 voice is heard well by pocketsphinx). */
const QUESTION = 'what is the weather like in paris';
/** Silence before the question (the capture starts with the mic) and after it (the VAD hears the end). */
const LEAD_SILENCE_MS = 500;
const TAIL_SILENCE_MS = 1_500;

/** The wire rate both ways. */
const RATE_HZ = 24_000;
const SAMPLES_PER_MS = RATE_HZ / 1000;
/** One microphone batch: 40 ms of PCM16 at 24 kHz. */
const MIC_BATCH_BYTES = 40 * SAMPLES_PER_MS * 2;
/** Above this RMS (int16) a microphone batch holds speech, not the lead silence. */
const SPEECH_RMS = 300;

const WEB_DIR = fileURLToPath(new URL('../../src/web/', import.meta.url));

let browser: Browser;
let workDir: string;
let contexts: BrowserContext[] = [];
let pageErrors: string[] = [];

// ---------------------------------------------------------------- WAV

interface Wav {
  sampleRate: number;
  channels: number;
  bitsPerSample: number;
  data: Buffer;
}

/** Reads a PCM WAV, walking its chunks (flite writes a plain 44-byte header, others may not). */
function parseWav(file: Buffer): Wav {
  if (file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') {
    throw new Error('not a RIFF/WAVE file');
  }
  let format: Omit<Wav, 'data'> | undefined;
  for (let at = 12; at + 8 <= file.length;) {
    const id = file.toString('ascii', at, at + 4);
    const size = file.readUInt32LE(at + 4);
    const body = at + 8;
    if (id === 'fmt ') {
      format = {
        channels: file.readUInt16LE(body + 2),
        sampleRate: file.readUInt32LE(body + 4),
        bitsPerSample: file.readUInt16LE(body + 14),
      };
    } else if (id === 'data') {
      if (!format) throw new Error('WAV data chunk before its fmt chunk');
      return { ...format, data: file.subarray(body, Math.min(file.length, body + size)) };
    }
    at = body + size + (size % 2);
  }
  throw new Error('WAV without a data chunk');
}

/** A PCM WAV file of `wav`'s format holding `data`. */
function encodeWav(wav: Wav, data: Buffer): Buffer {
  const header = Buffer.alloc(44);
  const blockAlign = (wav.channels * wav.bitsPerSample) / 8;
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(wav.channels, 22);
  header.writeUInt32LE(wav.sampleRate, 24);
  header.writeUInt32LE(wav.sampleRate * blockAlign, 28);
  header.writeUInt16LE(blockAlign, 32);
  header.writeUInt16LE(wav.bitsPerSample, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** Speaks `text` with flite into a WAV padded with silence before and after. */
async function speak(text: string, path: string): Promise<void> {
  const raw = `${path}.raw.wav`;
  await promisify(execFile)('flite', ['-voice', 'kal16', '-t', text, '-o', raw], {
    timeout: DEFAULT_WAIT_MS,
  });
  const wav = parseWav(await readFile(raw));
  const bytesPerMs = (wav.sampleRate * wav.channels * wav.bitsPerSample) / 8 / 1000;
  const silence = (ms: number) => Buffer.alloc(Math.round(ms * bytesPerMs));
  await writeFile(
    path,
    encodeWav(wav, Buffer.concat([silence(LEAD_SILENCE_MS), wav.data, silence(TAIL_SILENCE_MS)])),
  );
}

// ---------------------------------------------------------------- audio on the wire

/** `ms` of a 440 Hz tone as PCM16 LE bytes at 24 kHz (what the server's TTS would send). */
function tone(ms: number): Buffer {
  const samples = ms * SAMPLES_PER_MS;
  const bytes = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) {
    bytes.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / RATE_HZ)), i * 2);
  }
  return bytes;
}

/** Root mean square of PCM16 LE bytes. */
function rms(bytes: Buffer): number {
  let sum = 0;
  const n = bytes.length >> 1;
  for (let i = 0; i < n; i++) sum += bytes.readInt16LE(i * 2) ** 2;
  return Math.sqrt(sum / Math.max(1, n));
}

// ---------------------------------------------------------------- browser

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'troupe-web-voice-'));
  const question = join(workDir, 'q.wav');
  await speak(QUESTION, question);
  browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      // Tests run as root, where Chromium's sandbox cannot start.
      '--no-sandbox',
      // Grant the microphone without a prompt, and make the WAV the microphone;
      // %noloop: it plays once, from when a capture starts.
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${question}%noloop`,
    ],
  });
});

afterEach(async () => {
  await Promise.all(contexts.map((context) => context.close()));
  contexts = [];
  const errors = pageErrors;
  pageErrors = [];
  // An uncaught exception in the client fails the test that caused it.
  expect(errors).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** Opens the client in a fresh context; `init` runs in the page before app.js. */
async function openClient(baseUrl: string, init?: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1000, height: 800 } });
  contexts.push(context);
  if (init) await context.addInitScript(init);
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.goto(`${baseUrl}/?character=weather`);
  return page;
}

async function connected(page: Page): Promise<void> {
  await page.locator('[data-testid="status"][data-state="open"]').waitFor();
}

function voiceState(page: Page): Promise<string | null> {
  return page.getByTestId('voice-state').getAttribute('data-state');
}

function bubbles(page: Page, role: 'user' | 'assistant'): Promise<string[]> {
  return page
    .locator(`[data-testid="message"][data-role="${role}"] [data-testid="message-text"]`)
    .allTextContents();
}

/** The bubble of an item. */
function bubbleOf(page: Page, itemId: string) {
  return page.locator(`[data-testid="message"][data-item-id="${itemId}"]`);
}

async function playedMs(page: Page, itemId: string): Promise<number> {
  return Number((await bubbleOf(page, itemId).first().getAttribute('data-played-ms')) ?? NaN);
}

async function totalPlayedMs(page: Page): Promise<number> {
  return Number(await page.getByTestId('audio-played-ms').getAttribute('data-ms'));
}

/**
 * Records every value the voice indicator takes, so a test sees states
 * shorter than a poll. Built from the mutation records' old values: changes
 * made in one task reach the observer together, and only the records still
 * hold the values in between.
 */
async function recordVoiceStates(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    const indicator = document.querySelector('[data-testid="voice-state"]');
    const states = [indicator.dataset.state];
    window.__voiceStates = states;
    new MutationObserver((records) => {
      records.forEach((record, i) => {
        const value = i + 1 < records.length ? records[i + 1].oldValue : indicator.dataset.state;
        if (states.at(-1) !== value) states.push(value);
      });
    }).observe(indicator, { attributeFilter: ['data-state'], attributeOldValue: true });
  })()`);
}

function recordedVoiceStates(page: Page): Promise<string[]> {
  return page.evaluate('window.__voiceStates') as Promise<string[]>;
}

// ---------------------------------------------------------------- scripted socket

/** A client event as the scripted server received it. */
type ClientFrame = { type: string } & Record<string, unknown>;

/** The server end of the page's realtime socket, played by the test. */
interface ScriptedServer {
  /** Client events in the order they arrived. */
  frames: ClientFrame[];
  /** Sends server events (GA shapes), each as one frame. */
  send(...events: Array<Record<string, unknown>>): void;
  /** The first frame (already received or still to come) of `type`. */
  next(type: string, after?: number): Promise<ClientFrame>;
  /** Frames of one type. */
  ofType(type: string): ClientFrame[];
}

interface ScriptOptions {
  /** Answer `session.update` with this error instead of `session.updated`. */
  refuseVoice?: { code: string; message: string; param: string };
  /** The greeting the session opens with, as text (item `item_greeting`). */
  greeting?: string;
}

/** An assistant message item as the server announces it. */
function assistantItem(id: string, content: unknown[], status = 'completed') {
  return { id, object: 'realtime.item', type: 'message', status, role: 'assistant', content };
}

/** A session object as the server echoes it. */
function sessionObject(modalities: string[]) {
  const pcm = { type: 'audio/pcm', rate: RATE_HZ };
  const audio = modalities.includes('audio');
  return {
    type: 'realtime',
    object: 'realtime.session',
    id: 'sess_test',
    model: 'simulator',
    character: 'weather',
    instructions: '',
    output_modalities: modalities,
    tools: [],
    tool_choice: 'auto',
    temperature: null,
    max_output_tokens: 'inf',
    audio: {
      input: { format: pcm, turn_detection: audio ? { type: 'server_vad' } : null },
      output: { format: pcm, voice: null },
    },
  };
}

/** Plays the server for the page's realtime socket: greets, and answers `session.update`. */
async function scriptSocket(page: Page, options: ScriptOptions = {}): Promise<ScriptedServer> {
  const frames: ClientFrame[] = [];
  const waiters = new Set<() => void>();
  let socket: WebSocketRoute | undefined;
  const pendingSends: string[] = [];
  let eventCount = 0;
  const send = (event: Record<string, unknown>) => {
    const frame = JSON.stringify({ event_id: `evt_${++eventCount}`, ...event });
    if (socket) socket.send(frame);
    else pendingSends.push(frame);
  };
  await page.routeWebSocket(/\/v1\/realtime/, (ws) => {
    socket = ws;
    send({ type: 'session.created', session: sessionObject(['text']) });
    if (options.greeting) {
      const item = assistantItem('item_greeting', [
        { type: 'output_text', text: options.greeting },
      ]);
      send({ type: 'conversation.item.added', previous_item_id: null, item });
      send({ type: 'conversation.item.done', previous_item_id: null, item });
    }
    for (const frame of pendingSends.splice(0)) ws.send(frame);
    ws.onMessage((message) => {
      const frame = JSON.parse(String(message)) as ClientFrame;
      frames.push(frame);
      if (frame.type === 'session.update') {
        if (options.refuseVoice) {
          send({
            type: 'error',
            error: {
              type: 'invalid_request_error',
              ...options.refuseVoice,
              event_id: frame.event_id ?? null,
            },
          });
        } else {
          send({ type: 'session.updated', session: sessionObject(['audio']) });
        }
      }
      for (const wake of waiters) wake();
    });
  });
  const ofType = (type: string) => frames.filter((f) => f.type === type);
  return {
    frames,
    ofType,
    send: (...events) => events.forEach(send),
    next(type, after = 0) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = frames.slice(after).find((f) => f.type === type);
          if (!found) return false;
          waiters.delete(wake);
          clearTimeout(timer);
          resolve(found);
          return true;
        };
        const wake = () => void check();
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`the client sent no ${type} within ${WAIT_MS} ms`));
        }, WAIT_MS);
        if (!check()) waiters.add(wake);
      });
    },
  };
}

/** Serves src/web and a one-character list: all the page needs besides its socket. */
async function startStaticServer(): Promise<{ url: string; close(): Promise<void> }> {
  const types: Record<string, string> = {
    '.html': 'text/html; charset=utf-8',
    '.js': 'text/javascript; charset=utf-8',
    '.css': 'text/css; charset=utf-8',
  };
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path === '/v1/characters') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          characters: [
            {
              id: 'weather',
              name: 'Weather',
              description: 'Tells the weather.',
              tools: ['get_current_weather'],
            },
          ],
        }),
      );
      return;
    }
    const name = path === '/' ? 'index.html' : path.slice(1);
    const type = types[extname(name)];
    if (!type || !/^[a-z0-9-]+\.[a-z]+$/.test(name)) {
      res.writeHead(404).end();
      return;
    }
    readFile(join(WEB_DIR, name)).then(
      (body) => res.writeHead(200, { 'content-type': type }).end(body),
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Opens the client on a scripted socket and turns the mic on; resolves once voice is confirmed. */
async function micOn(
  baseUrl: string,
  options?: ScriptOptions,
): Promise<{ page: Page; server: ScriptedServer }> {
  const context = await browser.newContext({ viewport: { width: 1000, height: 800 } });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', (error) => pageErrors.push(error.message));
  const server = await scriptSocket(page, options);
  await page.goto(`${baseUrl}/?character=weather`);
  await connected(page);
  await page.getByTestId('mic').click();
  return { page, server };
}

// Server events of one reply, in the GA shapes.
const RESPONSE = (id: string) => ({
  object: 'realtime.response',
  id,
  status: 'in_progress',
  status_details: null,
  output: [],
  output_modalities: ['audio'],
  usage: null,
  metadata: null,
});

function replyStart(responseId: string, itemId: string): Array<Record<string, unknown>> {
  return [
    { type: 'response.created', response: RESPONSE(responseId) },
    {
      type: 'conversation.item.added',
      previous_item_id: null,
      item: assistantItem(itemId, [], 'in_progress'),
    },
  ];
}

function transcriptDelta(responseId: string, itemId: string, delta: string) {
  return {
    type: 'response.output_audio_transcript.delta',
    response_id: responseId,
    item_id: itemId,
    output_index: 0,
    content_index: 0,
    delta,
  };
}

/** Audio deltas of `bytes`, cut at the given byte offsets (odd ones split a sample). */
function audioDeltas(responseId: string, itemId: string, bytes: Buffer, cuts: number[]) {
  const edges = [0, ...cuts, bytes.length];
  return edges.slice(1).map((end, i) => ({
    type: 'response.output_audio.delta',
    response_id: responseId,
    item_id: itemId,
    output_index: 0,
    content_index: 0,
    delta: bytes.subarray(edges[i], end).toString('base64'),
  }));
}

function replyEnd(responseId: string, itemId: string, transcript: string) {
  const where = { response_id: responseId, item_id: itemId, output_index: 0, content_index: 0 };
  return [
    { type: 'response.output_audio.done', ...where },
    { type: 'response.output_audio_transcript.done', ...where, transcript },
    {
      type: 'conversation.item.done',
      previous_item_id: null,
      item: assistantItem(itemId, [{ type: 'output_audio', transcript }]),
    },
    { type: 'response.done', response: { ...RESPONSE(responseId), status: 'completed' } },
  ];
}

describe('web client voice, against a scripted socket', () => {
  let site: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    site = await startStaticServer();
  });

  afterAll(async () => {
    await site?.close();
  });

  it('asks the session for voice, then streams the microphone as 40 ms PCM16 batches', async () => {
    const { page, server } = await micOn(site.url);
    const mic = page.getByTestId('mic');

    const update = await server.next('session.update');
    expect(update).toEqual({
      type: 'session.update',
      event_id: expect.any(String),
      session: {
        output_modalities: ['audio'],
        audio: {
          input: {
            format: { type: 'audio/pcm', rate: 24000 },
            turn_detection: { type: 'server_vad' },
          },
          output: { format: { type: 'audio/pcm', rate: 24000 } },
        },
      },
    });
    expect(await mic.getAttribute('aria-pressed')).toBe('true');
    await expect.poll(() => voiceState(page), POLL).toBe('listening');

    // The WAV's speech (after its lead silence) comes through as loud batches.
    const appended = () =>
      server.ofType('input_audio_buffer.append').map((f) => Buffer.from(String(f.audio), 'base64'));
    await expect
      .poll(() => Math.max(0, ...appended().map(rms)), { ...POLL, interval: 50 })
      .toBeGreaterThan(SPEECH_RMS);
    // Nothing before the session took voice; every batch is 40 ms at 24 kHz.
    expect(server.frames.findIndex((f) => f.type === 'input_audio_buffer.append')).toBeGreaterThan(
      server.frames.indexOf(update),
    );
    expect(new Set(appended().map((b) => b.length))).toEqual(new Set([MIC_BATCH_BYTES]));
    // The lead silence is quiet: the batches are the WAV, in order, not noise.
    expect(rms(appended()[0]!)).toBeLessThan(SPEECH_RMS);

    await mic.click();
    expect(await mic.getAttribute('aria-pressed')).toBe('false');
    await expect.poll(() => voiceState(page), POLL).toBe('idle');
    expect(await page.getByTestId('voice-state').isVisible()).toBe(false);
    expect(await page.getByTestId('error').count()).toBe(0);
  });

  it('resamples a 48 kHz microphone to 24 kHz where the browser does not', async () => {
    // Firefox will not run a microphone into a 24 kHz context; the worklet
    // then resamples. A 1 kHz tone rendered offline at 48 kHz stands in for it.
    const page = await openClient(site.url);
    const result = (await page.evaluate(`(async () => {
      const context = new OfflineAudioContext(1, 48000, 48000);
      await context.audioWorklet.addModule('/mic-worklet.js');
      const node = new AudioWorkletNode(context, 'troupe-mic', {
        numberOfOutputs: 0,
        processorOptions: { targetRate: 24000, batchMs: 40 },
      });
      const batches = [];
      const all = new Promise((resolve) => {
        node.port.onmessage = (event) => {
          batches.push(new Int16Array(event.data));
          if (batches.length === 24) resolve();
        };
      });
      const tone = new OscillatorNode(context, { frequency: 1000 });
      tone.connect(node);
      tone.start();
      await context.startRendering();
      await all;
      // More may have come in the same task as the 24th: the first 24 are 0.96 s.
      const samples = batches.slice(0, 24).flatMap((b) => [...b]);
      let crossings = 0;
      for (let i = 1; i < samples.length; i++) {
        if ((samples[i - 1] < 0) !== (samples[i] < 0)) crossings++;
      }
      return { lengths: [...new Set(batches.map((b) => b.length))], count: samples.length, crossings,
        peak: Math.max(...samples.map(Math.abs)) };
    })()`)) as { lengths: number[]; count: number; crossings: number; peak: number };
    // 40 ms batches of 24 kHz samples: 960 each, 24 full ones from 1 s.
    expect(result.lengths).toEqual([960]);
    expect(result.count).toBe(24 * 960);
    // Still a 1 kHz tone at the new rate: two crossings per period, about 1,920 in 0.96 s.
    expect(result.crossings).toBeGreaterThanOrEqual(1915);
    expect(result.crossings).toBeLessThanOrEqual(1925);
    expect(result.peak).toBeGreaterThan(30_000);
  });

  it('plays a spoken reply to the end and counts its ms, with both transcripts shown', async () => {
    const { page, server } = await micOn(site.url);
    await server.next('session.update');
    await expect.poll(() => voiceState(page), POLL).toBe('listening');
    await recordVoiceStates(page);

    server.send(
      { type: 'input_audio_buffer.speech_started', audio_start_ms: 500, item_id: 'item_u1' },
      { type: 'input_audio_buffer.speech_stopped', audio_end_ms: 2500, item_id: 'item_u1' },
      { type: 'input_audio_buffer.committed', previous_item_id: null, item_id: 'item_u1' },
      {
        type: 'conversation.item.added',
        previous_item_id: null,
        item: {
          id: 'item_u1',
          object: 'realtime.item',
          type: 'message',
          status: 'completed',
          role: 'user',
          content: [{ type: 'input_audio', transcript: null }],
        },
      },
      ...['what is the', ' weather'].map((delta) => ({
        type: 'conversation.item.input_audio_transcription.delta',
        item_id: 'item_u1',
        content_index: 0,
        delta,
      })),
    );
    await expect.poll(() => bubbles(page, 'user'), POLL).toEqual(['what is the weather']);
    expect(await recordedVoiceStates(page)).toEqual(['listening', 'user-speaking', 'thinking']);

    // 300 ms of audio in four deltas, two of them ending mid-sample.
    const audio = tone(300);
    const deltas = audioDeltas('resp_1', 'item_a1', audio, [3601, 7200, 10801]);
    server.send(
      {
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: 'item_u1',
        content_index: 0,
        transcript: QUESTION,
      },
      ...replyStart('resp_1', 'item_a1'),
      transcriptDelta('resp_1', 'item_a1', 'It is sunny '),
      ...deltas.slice(0, 2),
      transcriptDelta('resp_1', 'item_a1', 'in Paris.'),
      ...deltas.slice(2),
      ...replyEnd('resp_1', 'item_a1', 'It is sunny in Paris.'),
    );

    await expect.poll(() => playedMs(page, 'item_a1'), POLL).toBe(300);
    expect(await totalPlayedMs(page)).toBe(300);
    await expect.poll(() => voiceState(page), POLL).toBe('listening');
    const states = await recordedVoiceStates(page);
    expect(states.slice(0, 4)).toEqual(['listening', 'user-speaking', 'thinking', 'speaking']);
    expect(states.at(-1)).toBe('listening');
    // A machine too busy to hand over the audio in time may make playback run
    // dry (back to "thinking" while the response runs), never anything else.
    expect(states.slice(4, -1).filter((s) => s !== 'thinking' && s !== 'speaking')).toEqual([]);
    expect(await bubbles(page, 'user')).toEqual([QUESTION]);
    expect(await bubbles(page, 'assistant')).toEqual(['It is sunny in Paris.']);
    // Played out to the end: nothing to truncate.
    expect(server.ofType('conversation.item.truncate')).toEqual([]);
    expect(await page.getByTestId('error').count()).toBe(0);
  });

  it('stops the reply when the user talks over it and truncates the item at the ms played', async () => {
    const greeting = 'Hi! Ask me about the weather.';
    const { page, server } = await micOn(site.url, { greeting });
    await server.next('session.update');
    expect(await bubbles(page, 'assistant')).toEqual([greeting]);

    // As Troupe does once voice is on, the greeting (shown as text) is spoken,
    // under its own item id: 4 s of audio sent ahead, and each piece of the
    // transcript as its speech starts to play.
    const speech = tone(4000);
    const where = { response_id: 'resp_g', item_id: 'item_greeting', output_index: 0 };
    server.send(
      { type: 'response.created', response: RESPONSE('resp_g') },
      ...audioDeltas('resp_g', 'item_greeting', speech, [9600, 19200, 28800, 38400, 96000]),
      transcriptDelta('resp_g', 'item_greeting', 'Hi! '),
    );
    await expect.poll(() => playedMs(page, 'item_greeting'), POLL).toBeGreaterThan(200);
    expect(await voiceState(page)).toBe('speaking');
    // The words come as they are heard, in the greeting's own bubble, not as a copy.
    expect(await bubbles(page, 'assistant')).toEqual(['Hi! ']);

    const before = server.frames.length;
    server.send({
      type: 'input_audio_buffer.speech_started',
      audio_start_ms: 3000,
      item_id: 'item_u2',
    });
    const truncate = await server.next('conversation.item.truncate', before);
    expect(truncate).toEqual({
      type: 'conversation.item.truncate',
      item_id: 'item_greeting',
      content_index: 0,
      audio_end_ms: expect.any(Number),
    });
    const heardMs = truncate.audio_end_ms as number;
    expect(heardMs).toBeGreaterThan(200);
    expect(heardMs).toBeLessThan(4000);
    // The page counted exactly what it told the server, and playback stopped there.
    expect(await playedMs(page, 'item_greeting')).toBe(heardMs);
    expect(await voiceState(page)).toBe('user-speaking');

    // What the server sent before it heard of the cut must neither show nor
    // play; then it confirms the cut and ends the response.
    server.send(
      transcriptDelta('resp_g', 'item_greeting', 'Ask me about the weather.'),
      ...audioDeltas('resp_g', 'item_greeting', tone(100), []),
      {
        type: 'conversation.item.truncated',
        item_id: 'item_greeting',
        content_index: 0,
        audio_end_ms: heardMs,
      },
      { type: 'response.output_audio.done', ...where, content_index: 0 },
      {
        type: 'response.output_audio_transcript.done',
        ...where,
        content_index: 0,
        transcript: 'Hi!',
      },
      { type: 'response.done', response: { ...RESPONSE('resp_g'), status: 'cancelled' } },
      { type: 'input_audio_buffer.speech_stopped', audio_end_ms: 4000, item_id: 'item_u2' },
    );
    await expect
      .poll(() => bubbleOf(page, 'item_greeting').getAttribute('data-truncated'), POLL)
      .toBe('true');
    await expect.poll(() => page.getByTestId('turn-meta').count(), POLL).toBe(1);
    expect(await bubbles(page, 'assistant')).toEqual(['Hi!']);

    // The next reply plays; had the late delta been queued, it would have played first.
    server.send(
      ...replyStart('resp_2', 'item_a2'),
      transcriptDelta('resp_2', 'item_a2', 'Okay.'),
      ...audioDeltas('resp_2', 'item_a2', tone(100), []),
      ...replyEnd('resp_2', 'item_a2', 'Okay.'),
    );
    await expect.poll(() => playedMs(page, 'item_a2'), POLL).toBe(100);
    expect(await playedMs(page, 'item_greeting')).toBe(heardMs);
    expect(await totalPlayedMs(page)).toBe(heardMs + 100);
    expect(server.ofType('conversation.item.truncate')).toHaveLength(1);
  });

  it('shows a plain error and leaves the session alone when the microphone is refused', async () => {
    const refuse = `navigator.mediaDevices.getUserMedia = () =>
      Promise.reject(new DOMException('Permission denied', 'NotAllowedError'));`;
    const context = await browser.newContext();
    contexts.push(context);
    await context.addInitScript(refuse);
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    const server = await scriptSocket(page);
    await page.goto(`${site.url}/?character=weather`);
    await connected(page);

    await page.getByTestId('mic').click();
    const error = page.getByTestId('error');
    await error.waitFor();
    expect(await error.getAttribute('data-code')).toBe('mic_denied');
    expect(await error.textContent()).toContain('Microphone access was refused');
    expect(await page.getByTestId('mic').getAttribute('aria-pressed')).toBe('false');
    expect(await voiceState(page)).toBe('idle');
    expect(server.ofType('session.update')).toEqual([]);
    // Text chat is unaffected.
    expect(await page.getByTestId('send').isDisabled()).toBe(false);
    expect(await page.getByTestId('message-input').isDisabled()).toBe(false);
  });

  it('turns the mic off and shows why when the server refuses voice', async () => {
    const { page, server } = await micOn(site.url, {
      refuseVoice: {
        code: 'audio_not_supported',
        message: 'session.output_modalities: audio needs a voice session.',
        param: 'session.output_modalities',
      },
    });
    await server.next('session.update');
    const error = page.getByTestId('error');
    await error.waitFor();
    expect(await error.getAttribute('data-code')).toBe('audio_not_supported');
    await expect
      .poll(() => page.getByTestId('mic').getAttribute('aria-pressed'), POLL)
      .toBe('false');
    expect(await voiceState(page)).toBe('idle');
    // The audio held back while waiting for the answer was never sent.
    expect(server.ofType('input_audio_buffer.append')).toEqual([]);
  });
});

// ---------------------------------------------------------------- end to end

/** The model's side of the spoken conversation. */
const say = (text: string): SimReply => ({ parts: [{ text }] });
const VOICE_SCRIPT: SimScript = {
  description: 'web voice test: a spoken weather question runs get_current_weather',
  rules: [
    {
      when: { user: 'weather', round: 0 },
      reply: {
        parts: [
          { text: 'Let me look. ' },
          {
            toolCall: {
              name: 'get_current_weather',
              arguments: { location: 'Paris, France', format: 'celsius' },
            },
          },
        ],
      },
    },
    { when: { user: 'weather' }, reply: say('It is mild in Paris right now.') },
  ],
  fallback: say('Sorry, I did not catch that.'),
};

describe('web client voice, end to end', () => {
  let server: TestServer;

  beforeAll(async () => {
    // Imported here, not at the top: the scripted suite above needs nothing
    // of the server, and keeps running while the server does not build.
    const { startTestServer } = await import('../helpers/server.js');
    // The default engines, which need no network: pocketsphinx hears, espeak speaks.
    server = await startTestServer({
      script: VOICE_SCRIPT,
      env: { STT_PROVIDER: 'pocketsphinx', TTS_PROVIDER: 'espeak' },
    });
  });

  afterAll(async () => {
    await server?.close();
  });

  it('hears a spoken question, runs get_current_weather and speaks the answer', async () => {
    const page = await openClient(server.url);
    await connected(page);
    // The greeting first: the session is ready, so the WAV starts with the capture.
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toHaveLength(1);
    await page.getByTestId('mic').click();

    // pocketsphinx may mishear other words; "weather" is the one the script needs.
    await expect
      .poll(async () => (await bubbles(page, 'user')).join(' '), E2E_POLL)
      .toMatch(/weather/i);
    const card = page.locator('[data-testid="tool-card"][data-name="get_current_weather"]');
    await expect.poll(() => card.getByTestId('tool-outcome').textContent(), E2E_POLL).toBe('ok');

    const spoken = page.locator('[data-testid="message"][data-role="assistant"][data-played-ms]');
    await expect
      .poll(
        () =>
          spoken.evaluateAll(
            (elements) =>
              elements.filter(
                (e) => Number(e.getAttribute('data-played-ms')) > 0 && e.textContent?.trim(),
              ).length,
          ),
        E2E_POLL,
      )
      .toBeGreaterThan(0);
    expect(await totalPlayedMs(page)).toBeGreaterThan(0);
    expect(await bubbles(page, 'user')).toHaveLength(1);
    // Read as the model spoke: its words before the call, the card, then the answer
    // (the words arrive as they are heard, after the tool has long run).
    const afterQuestion = `[...document.querySelectorAll('[data-testid="transcript"] > *')]
      .map((e) => e.getAttribute('data-role') ?? e.getAttribute('data-testid'))
      .join(' ').replace(/^.*?user /, '')`;
    await expect
      .poll(() => page.evaluate(afterQuestion), E2E_POLL)
      .toMatch(/^assistant tool-card assistant/);
    expect(await page.getByTestId('error').count()).toBe(0);
  });
});
