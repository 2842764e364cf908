import { execFile } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpeechProviderError } from '../../../src/errors.js';
import { createTtsRecorder } from '../../../src/testing/fake-tts.js';
import type { TtsRecorder } from '../../../src/testing/fake-tts.js';
import { createMemoryLogger } from '../../../src/testing/memory-logger.js';
import {
  ESPEAK_SAMPLE_RATE_HZ,
  createEspeakTts,
  resolveEspeakVoice,
} from '../../../src/voice/tts/espeak.js';
import type { EspeakTts } from '../../../src/voice/tts/espeak.js';
import { within } from '../../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SENTENCE = 'The quick brown fox jumps over the lazy dog.';

/** Prints a measurement in the test output. */
function report(what: string, value: string): void {
  console.log(`[espeak] ${what}: ${value}`);
}

let tts: EspeakTts;
/** One worker: makes queueing and cancelling observable. */
let single: EspeakTts;
const singleLog = createMemoryLogger();

beforeAll(async () => {
  const started = performance.now();
  tts = createEspeakTts({ workers: 2 });
  single = createEspeakTts({ workers: 1, warmUp: false, log: singleLog });
  const [health] = await Promise.all([tts.health(), single.health()]);
  report(
    'worker start-up (2 + 1 workers, cold, to health ok)',
    `${(performance.now() - started).toFixed(0)} ms`,
  );
  expect(health.ok).toBe(true);
}, 15_000);

afterAll(async () => {
  await Promise.all([tts?.close(), single?.close()]);
});

/** Speaks the segments on a stream of `provider` and records it. */
async function speak(
  segments: string[],
  options: { provider?: EspeakTts; voice?: string } = {},
): Promise<TtsRecorder> {
  const rec = createTtsRecorder();
  const stream = (options.provider ?? tts).open({
    signal: new AbortController().signal,
    voice: options.voice,
    onEvent: rec.onEvent,
  });
  for (const segment of segments) stream.push(segment);
  await within(stream.end(), 'the end of the speech', 10_000);
  return rec;
}

describe('eSpeak NG TTS', () => {
  it('loads in worker threads and reports its default voice healthy', async () => {
    const health = await tts.health();
    expect(health).toEqual({ ok: true, detail: expect.stringMatching(/en-us \(gmw\/en-US\)/) });
    expect(tts.sampleRate).toBe(ESPEAK_SAMPLE_RATE_HZ);
  });

  it('speaks a clause as 22,050 Hz audio as long as the words need, with word timings', async () => {
    const rec = createTtsRecorder();
    let firstAudioMs = 0;
    const started = performance.now();
    const stream = tts.open({
      signal: new AbortController().signal,
      onEvent: (e) => {
        if (e.type === 'audio' && firstAudioMs === 0) firstAudioMs = performance.now() - started;
        rec.onEvent(e);
      },
    });
    stream.push('Hello there, how are you today?');
    await within(stream.end(), 'the end of the clause');
    report('time to first audio of a first clause', `${firstAudioMs.toFixed(1)} ms`);
    const seconds = rec.pcm().length / ESPEAK_SAMPLE_RATE_HZ;
    expect(seconds).toBeGreaterThan(1);
    expect(seconds).toBeLessThan(3.5);
    expect(rec.texts()).toEqual(['Hello there, how are you today?']);
    const words = rec.words();
    expect(words.map((w) => w.text)).toEqual(['Hello', 'there', 'how', 'are', 'you', 'today']);
    for (let i = 1; i < words.length; i++) {
      expect(words[i]!.startSample).toBeGreaterThan(words[i - 1]!.startSample);
    }
    expect(words.at(-1)!.startSample).toBeLessThan(rec.pcm().length);
    // Speech, not silence.
    expect(Math.max(...rec.pcm().map(Math.abs))).toBeGreaterThan(1_000);
  });

  it('gives out segments in order, each one’s text on its first chunk', async () => {
    const segments = ['First things first.', 'Then the second,', 'and a third.'];
    const together = await speak(segments);
    expect(together.texts()).toEqual(segments);
    // Each segment lasts what it lasts on its own (eSpeak's voicing carries
    // a little state from one utterance to the next, so not to the sample).
    const alone = await Promise.all(segments.map((s) => speak([s])));
    const starts = [...together.segments().map((s) => s.startSample), together.pcm().length];
    alone.forEach((rec, i) => {
      expect(starts[i + 1]! - starts[i]!).toBeCloseTo(rec.pcm().length, -3);
    });
    expect(together.words().map((w) => w.text)).toEqual(
      alone.flatMap((r) => r.words().map((w) => w.text)),
    );
  });

  it('keeps two streams that speak at once apart', async () => {
    const a = ['Alice speaks first.', 'Alice goes on.'];
    const b = ['Bob answers at the same time, with rather more words.', 'Bob ends.'];
    const [soloA, soloB] = [await speak(a), await speak(b)];
    const [bothA, bothB] = await Promise.all([speak(a), speak(b)]);
    expect(bothA.texts()).toEqual(a);
    expect(bothB.texts()).toEqual(b);
    expect(bothA.words().map((w) => w.text)).toEqual(soloA.words().map((w) => w.text));
    expect(bothB.words().map((w) => w.text)).toEqual(soloB.words().map((w) => w.text));
    expect(bothA.pcm().length).toBeCloseTo(soloA.pcm().length, -3);
    expect(bothB.pcm().length).toBeCloseTo(soloB.pcm().length, -3);
  });

  it('serves streams in turn, a segment each, so a long answer cannot starve a short one', async () => {
    const order: string[] = [];
    const open = (who: string) =>
      single.open({
        signal: new AbortController().signal,
        onEvent: (e) => {
          if (e.type === 'audio' && e.text) order.push(`${who}:${e.text}`);
        },
      });
    const long = open('A');
    const short = open('B');
    for (const s of ['One.', 'Two.', 'Three.', 'Four.']) long.push(s);
    short.push('Me too.');
    await within(Promise.all([long.end(), short.end()]), 'both streams');
    expect(order).toEqual(['A:One.', 'B:Me too.', 'A:Two.', 'A:Three.', 'A:Four.']);
  });

  it('stops synthesis at once when the signal fires, and no event follows', async () => {
    const controller = new AbortController();
    const rec = createTtsRecorder();
    let eventsAtAbort = -1;
    const stream = single.open({
      signal: controller.signal,
      onEvent: (e) => {
        rec.onEvent(e);
        if (e.type === 'audio' && eventsAtAbort < 0) {
          eventsAtAbort = rec.events.length;
          controller.abort();
        }
      },
    });
    stream.push(Array.from({ length: 20 }, () => SENTENCE).join(' '));
    stream.push('A segment that never starts.');
    await within(stream.end(), 'end() after the abort');
    // The only worker must finish (or drop) the aborted job before this one.
    const next = await speak(['Next.'], { provider: single });
    expect(next.texts()).toEqual(['Next.']);
    expect(rec.events).toHaveLength(eventsAtAbort);
    expect(singleLog.entries.some((e) => e.msg === 'speech segment cancelled')).toBe(true);
  });

  it('reports an unknown voice as an error event and goes on serving', async () => {
    const rec = await speak(['Hello.'], { voice: 'xx-nowhere' });
    const error = rec.error();
    expect(error).toBeInstanceOf(SpeechProviderError);
    expect((error as SpeechProviderError).code).toBe('E_TTS');
    expect(error?.message).toMatch(/no voice "xx-nowhere"/);
    expect(error?.message).toMatch(/en-us/);
    expect(rec.events.map((e) => e.type)).toEqual(['error']);
    expect((await speak(['Still here.'])).pcm().length).toBeGreaterThan(0);
  });

  it('speaks other accents and languages named by their code', async () => {
    const [gb, fr] = await Promise.all([
      speak(['Good evening.'], { voice: 'en-gb' }),
      speak(['Bonjour, comment ça va ?'], { voice: 'fr' }),
    ]);
    expect(gb.error()).toBeUndefined();
    expect(fr.error()).toBeUndefined();
    expect(gb.pcm().length).toBeGreaterThan(0);
    expect(fr.words().map((w) => w.text)).toEqual(['Bonjour', 'comment', 'ça', 'va']);
  });

  it('finds voices by language code, identifier or name', async () => {
    const voices = await tts.voices();
    expect(resolveEspeakVoice('en-us', voices)).toBe('gmw/en-US');
    expect(resolveEspeakVoice('EN-GB', voices)).toBe('gmw/en');
    expect(resolveEspeakVoice('fr', voices)).toBe('roa/fr');
    expect(resolveEspeakVoice('gmw/en-GB-x-rp', voices)).toBe('gmw/en-GB-x-rp');
    expect(resolveEspeakVoice('en-GB-x-rp', voices)).toBe('gmw/en-GB-x-rp');
    expect(resolveEspeakVoice('English (Scotland)', voices)).toBe('gmw/en-GB-scotland');
    expect(resolveEspeakVoice('', voices)).toBeUndefined();
    expect(resolveEspeakVoice('xx-nowhere', voices)).toBeUndefined();
  });

  it('reads markup characters as text, with word texts taken from what was pushed', async () => {
    const text = 'Is 3 < 4 & 5 > 2? <speak>café 😀 naïve</speak>';
    const rec = await speak([text]);
    expect(rec.error()).toBeUndefined();
    expect(rec.texts()).toEqual([text]);
    for (const word of rec.words()) expect(text).toContain(word.text);
    expect(rec.words().map((w) => w.text)).toEqual(expect.arrayContaining(['café', 'naïve']));
  });

  it('keeps the event loop responsive while it synthesises a long text, much faster than real time', async () => {
    // One segment of ~40 s of speech: on this thread, even a warm engine
    // would block it for 150 ms or more.
    const text = Array.from({ length: 16 }, (_, i) => `${SENTENCE} That was number ${i + 1}.`).join(
      ' ',
    );
    const histogram = monitorEventLoopDelay({ resolution: 5 });
    histogram.enable();
    const started = performance.now();
    const rec = await speak([text]);
    const ms = performance.now() - started;
    histogram.disable();
    const maxMs = histogram.max / 1e6;
    const p99Ms = histogram.percentile(99) / 1e6;
    const seconds = rec.pcm().length / ESPEAK_SAMPLE_RATE_HZ;
    report(
      'synthesis speed',
      `${seconds.toFixed(1)} s of audio in ${ms.toFixed(0)} ms = ${((seconds * 1000) / ms).toFixed(0)}× real time`,
    );
    report(
      'event-loop delay during that synthesis',
      `max ${maxMs.toFixed(1)} ms, p99 ${p99Ms.toFixed(1)} ms`,
    );
    expect(seconds).toBeGreaterThan(30);
    expect(seconds * 1000).toBeGreaterThan(ms * 2);
    // Were the engine on this thread, one call would stall it for (nearly)
    // the whole synthesis.
    expect(maxMs).toBeLessThan(ms / 2);
    // Absolute bounds, unless other processes oversubscribe the CPU (a
    // shared box): then the OS scheduler, not this code, sets the delays.
    const oversubscribed = loadavg()[0]! > 2 * availableParallelism();
    if (oversubscribed) {
      report('note', `load average ${loadavg()[0]!.toFixed(1)}: only p99 < 150 ms asserted`);
      expect(p99Ms).toBeLessThan(150);
    } else {
      expect(maxMs).toBeLessThan(50);
    }
  });

  it('reports an error to a stream pushed to after close()', async () => {
    const closed = createEspeakTts({ workers: 1 });
    await closed.close();
    const rec = await speak(['Too late.'], { provider: closed });
    expect(rec.error()?.message).toMatch(/provider is closed/);
  });

  it('rejects a worker count it cannot run', () => {
    expect(() => createEspeakTts({ workers: 0 })).toThrow(/workers must be a whole number/);
  });

  it('starts its worker under tsx, the way the server runs', async () => {
    const script = [
      "import { createEspeakTts } from './src/voice/tts/espeak.ts';",
      'const tts = createEspeakTts({ workers: 1, warmUp: false });',
      'let samples = 0;',
      "const s = tts.open({ signal: new AbortController().signal, onEvent: (e) => { if (e.type === 'audio') samples += e.pcm.length; } });",
      "s.push('Hello from tsx.');",
      'await s.end();',
      'await tts.close();',
      'console.log(JSON.stringify({ samples }));',
    ].join('\n');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: ROOT, timeout: 10_000 },
    );
    expect(JSON.parse(stdout.trim()).samples).toBeGreaterThan(10_000);
  });
});
