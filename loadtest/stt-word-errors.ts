/**
 * Word errors of pocketsphinx on shared decoders: does a speaker's transcript
 * depend on who used the decoder before (live cepstral mean normalisation)?
 *
 * The seed characters' 10 sentences (as in
 * test/voice/tts/flite-word-errors.test.ts) are spoken by two Flite
 * "speakers": A with each character's own voice (`rms` at 0.9–1), B with
 * `slt`. Scenarios, each on a provider with one decoder:
 *
 * - `alone`: A's sentences in order in one session, then B's in another.
 * - `interleaved`: A and B take turns on the one decoder, A1 B1 A2 B2 ….
 * - `first`: each sentence is a new session's first utterance, after the
 *   decoder has heard the other speaker.
 *
 * Prints word errors per speaker and scenario for today's mode
 * (`--cmn shared`, the mean carries over) or per-session CMN (`--cmn session`).
 *
 * @example npx tsx loadtest/stt-word-errors.ts --cmn session
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import hello from '../characters/hello.js';
import narrator from '../characters/narrator.js';
import plain from '../characters/plain.js';
import quizmaster from '../characters/quizmaster.js';
import weather from '../characters/weather.js';
import { createTtsRecorder } from '../src/testing/fake-tts.js';
import { resample } from '../src/voice/audio/resample.js';
import { PocketsphinxSttProvider } from '../src/voice/stt/pocketsphinx.js';
import { createFliteTts } from '../src/voice/tts/flite.js';
import { wordErrors } from '../src/voice/word-error-rate.js';

const { values: args } = parseArgs({
  options: {
    cmn: { type: 'string', default: 'session' },
    'cmn-default': { type: 'string' },
    scenarios: { type: 'string', default: 'alone,interleaved,first' },
  },
});

const SENTENCES: Array<{ voice: string; text: string }> = [
  [hello, hello.greeting ?? '', 'Hello there! It is nice to meet you.'],
  [
    narrator,
    'Once upon a time, in a small village by the sea, there lived an old fisherman.',
    'Every morning he sailed out before the sun came up. What do you think he found?',
  ],
  [plain, plain.greeting ?? '', 'Sure, I can help you with that.'],
  [quizmaster, quizmaster.greeting ?? '', 'That is correct! You have three points so far.'],
  [weather, weather.greeting ?? '', 'It is sunny in Paris today, with a high of twenty degrees.'],
].flatMap(([c, ...texts]) =>
  (texts as string[]).map((text) => ({
    voice: (c as typeof hello).voice?.flite ?? 'rms',
    text,
  })),
);

const PADDING = new Int16Array(4_800);
const tts = createFliteTts({ workers: 1 });

/** Flite's speech is the same on every run: kept in the temp directory between runs. */
async function speak(text: string, voice: string): Promise<Int16Array> {
  const key = createHash('sha256').update(`${voice}\n${text}`).digest('hex').slice(0, 16);
  const file = path.join(os.tmpdir(), `troupe-stt-word-errors-${key}.pcm`);
  const cached = await readFile(file).catch(() => undefined);
  if (cached) return new Int16Array(cached.buffer, cached.byteOffset, cached.byteLength / 2);
  const pcm = await synthesise(text, voice);
  await writeFile(file, pcm);
  return pcm;
}

async function synthesise(text: string, voice: string): Promise<Int16Array> {
  const rec = createTtsRecorder();
  const stream = tts.open({ signal: new AbortController().signal, voice, onEvent: rec.onEvent });
  stream.push(text);
  await stream.end();
  const speech = resample(rec.pcm(), tts.sampleRate, 16_000);
  const out = new Int16Array(speech.length + 2 * PADDING.length);
  out.set(speech, PADDING.length);
  return out;
}

interface Utterance {
  speaker: 'A' | 'B';
  text: string;
  pcm: Int16Array;
}
const A: Utterance[] = [];
const B: Utterance[] = [];
for (const s of SENTENCES) {
  A.push({ speaker: 'A', text: s.text, pcm: await speak(s.text, s.voice) });
  B.push({ speaker: 'B', text: s.text, pcm: await speak(s.text, 'slt') });
}
await tts.close();

function provider(): PocketsphinxSttProvider {
  return new PocketsphinxSttProvider({
    maxWorkers: 1,
    maxDecoders: 1,
    cmnPerSession: args.cmn === 'session',
    ...(args['cmn-default'] ? { cmnDefault: args['cmn-default'].split(',').map(Number) } : {}),
  });
}

type Session = ReturnType<PocketsphinxSttProvider['open']>;
const open = (stt: PocketsphinxSttProvider): Session =>
  stt.open({ signal: new AbortController().signal, onEvent: () => undefined });

/** Runs `plan` (utterance, session key) and sums word errors per speaker. */
async function run(plan: Array<{ u: Utterance; session: string }>): Promise<string> {
  const stt = provider();
  const sessions = new Map<string, Session>();
  const tally = { A: { words: 0, errors: 0 }, B: { words: 0, errors: 0 } };
  for (const { u, session } of plan) {
    let s = sessions.get(session);
    if (!s) sessions.set(session, (s = open(stt)));
    s.write(u.pcm);
    const heard = await s.commit();
    const r = wordErrors(u.text, heard);
    tally[u.speaker].words += r.words;
    tally[u.speaker].errors += r.errors;
  }
  for (const s of sessions.values()) s.close();
  await stt.close();
  const pct = (t: { words: number; errors: number }): string =>
    `${t.errors}/${t.words} (${((100 * t.errors) / t.words).toFixed(1)}%)`;
  return `A ${pct(tally.A)}  B ${pct(tally.B)}`;
}

const scenarios = new Set(args.scenarios.split(','));
console.log(
  `cmn=${args.cmn} default=${args['cmn-default'] ?? 'the decoder’s'} load ${os.loadavg()[0]!.toFixed(1)}`,
);
if (scenarios.has('alone')) {
  const plan = [...A.map((u) => ({ u, session: 'a' })), ...B.map((u) => ({ u, session: 'b' }))];
  console.log(`alone        ${await run(plan)}`);
}
if (scenarios.has('interleaved')) {
  const plan = A.flatMap((a, i) => [
    { u: a, session: 'a' },
    { u: B[i]!, session: 'b' },
  ]);
  console.log(`interleaved  ${await run(plan)}`);
}
if (scenarios.has('first')) {
  // Every sentence a new session; the decoder heard the other speaker just before.
  const plan = A.flatMap((a, i) => [
    { u: B[(i + 1) % B.length]!, session: `b${i}` },
    { u: a, session: `a${i}` },
  ]);
  console.log(`first        ${await run(plan)}  (each utterance a new session)`);
}
