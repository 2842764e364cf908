/**
 * Speech engines for session suites: a scripted STT (it answers from a
 * list), a tone TTS (instant, deterministic), the real VAD, and settings;
 * engines that fail or record what they were given; a server with fixture
 * characters, spoken sessions, speaking into them, and waits that do not
 * stand on sleeps (`barrier`, `waitForEvent`).
 */
import { SpeechProviderError } from '../../src/errors.js';
import type { ServerVoice } from '../../src/server/voice.js';
import type { VoiceSettings } from '../../src/session/voice-settings.js';
import {
  createScriptedStt,
  type ScriptedStt,
  type ScriptedSttOptions,
} from '../../src/testing/scripted-stt.js';
import { createToneTts } from '../../src/testing/fake-tts.js';
import type {
  SttProvider,
  SttStream,
  TtsOpenOptions,
  TtsProvider,
  TtsStream,
} from '../../src/voice/types.js';
import { loadVad } from '../../src/voice/vad.js';
import { concat, sendAudio, silence, speech } from './audio.js';
import { character, characterDir } from './characters.js';
import type { Received, TestClient } from './realtime-client.js';
import { startTestServer, type TestServer, type TestServerOptions } from './server.js';
import { openSession } from './session.js';
import { DEFAULT_WAIT_MS, within } from './wait.js';

/** Settings as config's defaults give them. */
export const VOICE_SETTINGS: VoiceSettings = {
  vad: { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500 },
  bargeInMinMs: 300,
  pauseThreshold: 0.6,
  audioLeadMs: 300,
  maxUtteranceMs: 60_000,
};

/** Fake engines, ready for `startTestServer({ voice })`. */
export async function fakeVoice(
  options: {
    transcripts?: ScriptedSttOptions['transcripts'];
    stt?: ScriptedStt | null;
    tts?: TtsProvider | null;
    settings?: Partial<VoiceSettings>;
  } = {},
): Promise<ServerVoice & { stt: ScriptedStt | null }> {
  const stt =
    options.stt !== undefined
      ? options.stt
      : createScriptedStt({ transcripts: options.transcripts ?? [] });
  const tts = options.tts !== undefined ? options.tts : createToneTts({ msPerChar: 20 });
  return {
    session: {
      stt,
      tts,
      vad: await loadVad(),
      settings: { ...VOICE_SETTINGS, ...options.settings },
    },
    stt,
    tts,
    async close() {},
  };
}

// ── Servers, sessions and speech for voice suites ───────────────────────────

/** A character with neither greeting nor tools: turns start without a spoken greeting in the way. */
export const QUIET_CHARACTER = character({
  name: 'Quiet',
  prompt: 'You are a quiet test character.',
});

/** Options of {@link startVoiceServer}. */
export interface VoiceServerOptions extends TestServerOptions {
  /** Character files beside `quiet.ts`, by file name. */
  characters?: Record<string, string>;
}

/**
 * A test server whose characters directory is a temp dir holding `quiet`
 * (no greeting, no tools) and `characters`; closing it removes the dir.
 *
 * @example
 * const t = await startVoiceServer({ voice: await fakeVoice({ transcripts: ['hi'] }), script });
 * const c = await openVoiceSession(t);
 */
export async function startVoiceServer(options: VoiceServerOptions = {}): Promise<TestServer> {
  const { characters, ...rest } = options;
  const chars = await characterDir({ 'quiet.ts': QUIET_CHARACTER, ...characters });
  let t: TestServer;
  try {
    t = await startTestServer({
      ...rest,
      env: { CHARACTERS_DIR: chars.dir, DEFAULT_CHARACTER: 'quiet', ...rest.env },
    });
  } catch (err) {
    await chars.cleanup();
    throw err;
  }
  const close = t.close;
  return {
    ...t,
    async close() {
      await close();
      await chars.cleanup();
    },
  };
}

/**
 * Opens a session (query without `?`) and applies `session` (spoken replies
 * by default), waiting for its `session.updated`.
 *
 * @example const c = await openVoiceSession(t, 'character=quiet');
 */
export async function openVoiceSession(
  t: TestServer,
  query = 'character=quiet',
  session: Record<string, unknown> = { output_modalities: ['audio'] },
): Promise<TestClient> {
  const c = await openSession(t, query);
  c.send({ type: 'session.update', session });
  await c.next('session.updated');
  return c;
}

/** Options of {@link speak}. */
export interface SpeakOptions {
  /** Silence before the words, ms. @defaultValue 300 */
  leadMs?: number;
  /** Silence after them, ms: more than the VAD's silence window ends the turn. @defaultValue 900 */
  tailMs?: number;
}

/**
 * Says `text` (flite) into the session, faster than real time, with silence
 * around it; returns the audio sent.
 *
 * @example await speak(c, 'tell me a story');
 */
export async function speak(
  client: TestClient,
  text: string,
  options: SpeakOptions = {},
): Promise<Int16Array> {
  const pcm = concat(
    silence(options.leadMs ?? 300),
    await speech(text),
    silence(options.tailMs ?? 900),
  );
  sendAudio(client, pcm);
  return pcm;
}

let barriers = 0;

/**
 * Resolves once the server has handled every event sent before it: it asks
 * for an item that does not exist and waits for that error (the server
 * handles a connection's frames in order). Leaves the client's `next()`
 * cursor alone.
 *
 * @example
 * sendAudio(c, silence(1000));
 * await barrier(c); // every append above has been handled
 * expect(c.events.some((e) => e.type === 'input_audio_buffer.speech_started')).toBe(false);
 */
export function barrier(client: TestClient): Promise<void> {
  const id = `barrier_${barriers++}`;
  return waitForEvent(
    client,
    'error',
    (e) => (e.error as { event_id?: unknown }).event_id === id,
    () => client.send({ type: 'conversation.item.retrieve', item_id: id, event_id: id }),
  ).then(() => undefined);
}

/**
 * The first event of `type` matching `where` among all the client has
 * received (from index `from`), now or later. Unlike `client.next()` it does
 * not move the cursor, so later `next()` calls still see earlier events.
 * `start` runs once the wait is armed.
 *
 * @example
 * const stopped = await waitForEvent(c, 'input_audio_buffer.speech_stopped');
 */
export function waitForEvent(
  client: TestClient,
  type: string,
  where: (e: Received) => boolean = () => true,
  start?: () => void,
  timeoutMs = DEFAULT_WAIT_MS,
  from = 0,
): Promise<Received> {
  const find = () => client.events.slice(from).find((e) => e.type === type && where(e));
  const found = find();
  if (found) {
    start?.();
    return Promise.resolve(found);
  }
  let listener: (() => void) | undefined;
  const seen = new Promise<Received>((resolve) => {
    // The client records each event in its own listener, registered first.
    listener = () => {
      const e = find();
      if (e) resolve(e);
    };
    client.ws.on('message', listener);
    start?.();
  });
  return within(seen, `a ${type} event`, timeoutMs).finally(() =>
    client.ws.off('message', listener!),
  );
}

/** The output audio deltas (base64 PCM16) of `events`, decoded, optionally of one item. */
export function audioChunks(events: readonly Received[], itemId?: string): Buffer[] {
  return events
    .filter(
      (e) =>
        e.type === 'response.output_audio.delta' && (itemId === undefined || e.item_id === itemId),
    )
    .map((e) => Buffer.from(e.delta as string, 'base64'));
}

/** Ms of 24 kHz PCM16 output audio in `events`, optionally of one item. */
export function audioMs(events: readonly Received[], itemId?: string): number {
  return audioChunks(events, itemId).reduce((n, b) => n + b.length / 2, 0) / 24;
}

/** The output audio transcript deltas of `events` joined, optionally of one item. */
export function spokenText(events: readonly Received[], itemId?: string): string {
  return events
    .filter(
      (e) =>
        e.type === 'response.output_audio_transcript.delta' &&
        (itemId === undefined || e.item_id === itemId),
    )
    .map((e) => e.delta as string)
    .join('');
}

/** The types of `events`, for ordering assertions and failure messages. */
export function typesOf(events: readonly Received[]): string[] {
  return events.map((e) => e.type);
}

// ── Failing engines ─────────────────────────────────────────────────────────

/** An STT engine that takes audio and then fails each commit with `message`. */
export function failingStt(message = 'the scripted engine broke'): SttProvider {
  return {
    name: 'failing',
    sampleRate: 16000,
    continuous: false,
    reportsPauses: false,
    open(): SttStream {
      return {
        write() {},
        commit: () => Promise.reject(new SpeechProviderError('stt', 'failing', message)),
        clear() {},
        close() {},
      };
    },
    health: async () => ({ ok: false, detail: message }),
    async close() {},
  };
}

/**
 * A tone TTS that speaks the first `failAt - 1` segments of each stream and
 * then emits an `error` (after the audio already given, as an engine whose
 * connection breaks mid-reply).
 */
export function failingTts(failAt = 2, msPerChar = 20): TtsProvider {
  const tone = createToneTts({ msPerChar, name: 'failing' });
  return {
    name: 'failing',
    sampleRate: tone.sampleRate,
    open(open: TtsOpenOptions): TtsStream {
      let pushed = 0;
      let failed = false;
      const inner = tone.open(open);
      return {
        push(text) {
          if (failed) return;
          if (++pushed < failAt) return inner.push(text);
          failed = true;
          // After the segments before it have been spoken (the tone engine answers on setImmediate).
          setImmediate(() =>
            open.onEvent({
              type: 'error',
              error: new SpeechProviderError('tts', 'failing', 'the scripted engine broke'),
            }),
          );
        },
        end: () => inner.end(),
      };
    },
    health: async () => ({ ok: true }),
    async close() {},
  };
}

/** An STT engine that keeps the audio it was given, for checking what reached it. */
export interface RecordingStt extends SttProvider {
  /** The audio of each committed utterance (24 kHz, as the wire carries it), in order. */
  readonly utterances: Int16Array[];
}

/** An STT engine at 24 kHz that records each utterance's audio and hears `transcript`. */
export function recordingStt(transcript = 'I was recorded.'): RecordingStt {
  const utterances: Int16Array[] = [];
  return {
    name: 'recording',
    sampleRate: 24000,
    continuous: false,
    reportsPauses: false,
    utterances,
    open(): SttStream {
      let parts: Int16Array[] = [];
      return {
        write(pcm) {
          parts.push(pcm.slice());
        },
        async commit() {
          utterances.push(concat(...parts));
          const heard = parts.length > 0 ? transcript : '';
          parts = [];
          return heard;
        },
        clear() {
          parts = [];
        },
        close() {},
      };
    },
    health: async () => ({ ok: true }),
    async close() {},
  };
}

/**
 * Speech for `startTestServer({ voice })` from engines a suite made itself
 * (any STT, not only the scripted one); the real VAD; config's settings.
 *
 * @example
 * const t = await startVoiceServer({ voice: await voiceOf({ stt: recordingStt() }) });
 */
export async function voiceOf(engines: {
  stt: SttProvider | null;
  tts?: TtsProvider | null;
  settings?: Partial<VoiceSettings>;
}): Promise<ServerVoice> {
  const tts = engines.tts !== undefined ? engines.tts : createToneTts({ msPerChar: 20 });
  return {
    session: {
      stt: engines.stt,
      tts,
      vad: await loadVad(),
      settings: { ...VOICE_SETTINGS, ...engines.settings },
    },
    stt: engines.stt,
    tts,
    async close() {},
  };
}

/**
 * A voice server whose model tells `story` when the user asks for a story
 * and says "Okay." otherwise; the scripted STT hears `heard` in order
 * ("hello" once it is empty), so a test pushes what the user says next.
 */
export async function startStoryServer(story: string, heard: string[]): Promise<TestServer> {
  return startVoiceServer({
    voice: await fakeVoice({ transcripts: () => heard.shift() ?? 'hello' }),
    script: {
      rules: [{ when: { user: 'story' }, reply: { parts: [{ text: story }] } }],
      fallback: { parts: [{ text: 'Okay.' }] },
    },
  });
}
