/**
 * One eSpeak NG engine in a worker thread (see espeak.ts). The engine
 * synthesises synchronously; here it can take its time without stalling the
 * event loop that serves the sessions.
 *
 * Plain JavaScript on purpose: a worker does not inherit the `tsx` loader the
 * server runs under, nor vitest's transform, so a `.mjs` file starts the same
 * way everywhere, and without a loader's start-up cost.
 *
 * Protocol (all messages are plain objects):
 *   in:  { type: 'synth', job, text, voice }   voice = an identifier from `ready.voices`
 *   out: { type: 'ready', sampleRate, voices, startupMs }
 *        { type: 'init-failed', message }
 *        { type: 'warm', ms, sentences }   the background warm-up is over
 *        { type: 'audio', job, pcm: Int16Array, words: [{ text, ms }] }
 *        { type: 'done', job, cancelled }
 *        { type: 'failed', job, message, fatal }   after a fatal one the worker exits
 * Cancelling: the parent writes the job number into `workerData.cancel`
 * (a shared Int32Array); the engine's callback sees it and stops synthesis.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers';

/** @typedef {{ type: string, text_position: number, word_length: number, audio_position: number }} EspeakEvent */

const port = parentPort;
if (port === null) throw new Error('espeak-worker.mjs must run in a worker thread');

/** @type {Int32Array} */
const cancel = new Int32Array(workerData.cancel);
/** @type {Int32Array} How many jobs run in the whole pool; warm-up waits for 0. */
const busy = new Int32Array(workerData.busy);

/**
 * The npm build is eSpeak compiled by Emscripten to plain JavaScript (wasm2js,
 * with a JavaScript stand-in for the WebAssembly API), so V8 must
 * first optimise its huge synthesis functions: the first sentences run at
 * ~15× real time, then ~200×. Synthesising a few throw-away phrases after
 * start-up gets there before the sessions need it. The warm-up only runs
 * while no job runs anywhere in the pool (it would take their CPU): a phrase
 * stops as soon as a job is dispatched, and waits for the pool to be idle.
 */
const WARM_UP_TEXTS = [
  'Hello! How are you?',
  'The quick brown fox',
  'jumps over the lazy dog.',
  'I think the weather',
  'in Paris is sunny.',
  'Could you book a table',
  'for two at seven thirty?',
  'Sure, I can help with that:',
  '42 zebras quietly vexed',
  'jumping wizards, yesterday.',
];
/** Warm-up stops once a sentence synthesises at least this many times faster than real time. */
const WARM_UP_TARGET_SPEED = 100;
/** At most this many phrases (rounds of the list). */
const WARM_UP_MAX_PHRASES = 40;
/** Warm-up stops after this much synthesis time, in ms, whatever the speed. */
const WARM_UP_BUDGET_MS = 1_000;
/**
 * Samples (~370 ms at 22,050 Hz) gathered before posting audio after the
 * first buffer of a job; eSpeak's own buffers hold ~2,000.
 */
const BATCH_SAMPLES = 8_192;
/** The voice the warm-up speaks with (the default of most deployments). */
const WARM_UP_VOICE = 'gmw/en-US';

/**
 * Escapes the characters eSpeak's SSML parser would read as markup, keeping
 * for every code point of the result the UTF-16 offset it came from in the
 * original (eSpeak reports word positions in code points of what it was given).
 *
 * @param {string} text
 * @returns {{ escaped: string, origin: number[] }}
 */
function escapeForEspeak(text) {
  let escaped = '';
  /** @type {number[]} */
  const origin = [];
  let offset = 0;
  for (const ch of text) {
    const entity = ch === '&' ? '&amp;' : ch === '<' ? '&lt;' : ch === '>' ? '&gt;' : undefined;
    if (entity === undefined) {
      escaped += ch;
      origin.push(offset);
    } else {
      escaped += entity;
      for (let i = 0; i < entity.length; i++) origin.push(offset);
    }
    offset += ch.length;
  }
  origin.push(offset);
  return { escaped, origin };
}

let engine;
let currentVoice = '';
try {
  const started = performance.now();
  const { default: loadEspeak } = await import('@echogarden/espeak-ng-emscripten');
  const module = await loadEspeak();
  engine = new module.eSpeakNGWorker();
  const voices = engine.list_voices().map((v) => ({
    identifier: v.identifier,
    name: v.name,
    languages: v.languages.map((l) => ({ name: l.name, priority: l.priority })),
  }));
  port.postMessage({
    type: 'ready',
    sampleRate: engine.get_samplerate(),
    voices,
    startupMs: performance.now() - started,
  });
} catch (error) {
  port.postMessage({ type: 'init-failed', message: String(error?.message ?? error) });
  process.exit(1);
}

let warmUpIndex = 0;
let warmUpMs = 0;

/** Warms the engine up, a phrase at a time, whenever the pool is idle. */
async function warmUp() {
  for (;;) {
    const running = Atomics.load(busy, 0);
    if (running > 0) {
      const wait = Atomics.waitAsync(busy, 0, running);
      if (wait.async) await wait.value;
      continue;
    }
    if (warmUpStep()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Synthesises one warm-up phrase; true once the engine is warm (or the
 * budget is spent).
 */
function warmUpStep() {
  const text = WARM_UP_TEXTS[warmUpIndex % WARM_UP_TEXTS.length];
  warmUpIndex++;
  if (currentVoice !== WARM_UP_VOICE) {
    if (engine.set_voice(WARM_UP_VOICE) !== 0) return true;
    currentVoice = WARM_UP_VOICE;
  }
  const started = performance.now();
  let samples = 0;
  let interrupted = false;
  engine.synthesize(text, (/** @type {Int16Array} */ pcm) => {
    samples += pcm.length;
    // A job was handed to a worker of the pool: stop this phrase now, within
    // one audio buffer, so the job neither waits for it nor shares the CPU.
    interrupted = Atomics.load(busy, 0) > 0;
    return interrupted ? 1 : 0;
  });
  const ms = performance.now() - started;
  warmUpMs += ms;
  if (interrupted) {
    warmUpIndex--; // the same phrase again next time
    return warmUpMs >= WARM_UP_BUDGET_MS;
  }
  const speed = ((samples / engine.get_samplerate()) * 1000) / Math.max(ms, 0.001);
  if (
    speed >= WARM_UP_TARGET_SPEED ||
    warmUpMs >= WARM_UP_BUDGET_MS ||
    warmUpIndex >= WARM_UP_MAX_PHRASES
  ) {
    port.postMessage({ type: 'warm', ms: warmUpMs, sentences: warmUpIndex });
    return true;
  }
  return false;
}
// After the message handler below is in place.
if (workerData.warmUp !== false) setImmediate(() => void warmUp());

port.on('message', (message) => {
  if (message?.type !== 'synth') return;
  const { job, text, voice } = message;
  try {
    if (voice !== currentVoice) {
      const code = engine.set_voice(voice);
      if (code !== 0) {
        // The parent resolves names against `ready.voices`; this is a voice
        // file that exists but does not load. The engine itself is fine.
        port.postMessage({
          type: 'failed',
          job,
          message: `set_voice("${voice}") returned ${code}`,
          fatal: false,
        });
        return;
      }
      currentVoice = voice;
    }
    const { escaped, origin } = escapeForEspeak(text);
    let cancelled = false;
    /** Audio and words not yet posted (see BATCH_SAMPLES). */
    let batch = [];
    let batchSamples = 0;
    let batchWords = [];
    let posted = false;
    const post = () => {
      if (batchSamples === 0 && batchWords.length === 0) return;
      const pcm = new Int16Array(batchSamples);
      let at = 0;
      for (const part of batch) {
        pcm.set(part, at);
        at += part.length;
      }
      port.postMessage({ type: 'audio', job, pcm, words: batchWords }, [pcm.buffer]);
      batch = [];
      batchSamples = 0;
      batchWords = [];
      posted = true;
    };
    engine.synthesize(
      escaped,
      (/** @type {Int16Array} */ pcm, /** @type {EspeakEvent[]} */ events) => {
        if (Atomics.load(cancel, 0) === job) {
          cancelled = true;
          return 1; // non-zero: eSpeak stops synthesising
        }
        for (const e of events) {
          if (e.type !== 'word' || e.word_length <= 0) continue;
          // text_position is 1-based, in code points of the escaped text.
          const from = origin[e.text_position - 1];
          const to = origin[Math.min(e.text_position - 1 + e.word_length, origin.length - 1)];
          if (from === undefined || to === undefined) continue;
          const word = text.slice(from, to).trim();
          if (word !== '') batchWords.push({ text: word, ms: e.audio_position });
        }
        batch.push(pcm);
        batchSamples += pcm.length;
        // The first buffer goes at once (time to first audio); later ones in
        // batches, so that a fast engine does not flood the parent's event
        // loop with hundreds of tiny messages.
        if (!posted || batchSamples >= BATCH_SAMPLES) post();
        return 0;
      },
    );
    if (!cancelled) post();
    port.postMessage({ type: 'done', job, cancelled });
  } catch (error) {
    // A WASM abort leaves the engine in an unknown state: report and let the
    // parent start a fresh worker.
    port.postMessage({
      type: 'failed',
      job,
      message: String(error?.message ?? error),
      fatal: true,
    });
    process.exit(1);
  }
});
