/**
 * pocketsphinx's partial hypotheses (`partialEveryMs`): words come while the
 * utterance is being decoded, each only once two hypotheses agree on it, and
 * they are the start of the utterance's final text. Real engine, real speech
 * (Debian's flite and pocketsphinx).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readWav } from '../../../src/voice/audio/pcm.js';
import { PocketsphinxSttProvider } from '../../../src/voice/stt/pocketsphinx.js';
import type { SttEvent } from '../../../src/voice/types.js';
import { within } from '../../helpers/wait.js';

const run = promisify(execFile);
const SENTENCE = 'what is the weather like in paris';

let dir: string;
let pcm: Int16Array;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-partials-'));
  const file = join(dir, 'weather.wav');
  await run('flite', ['-voice', 'kal16', '-t', SENTENCE, '-o', file]);
  pcm = readWav(await readFile(file)).pcm;
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('pocketsphinx partial hypotheses', () => {
  it('streams agreed words during the utterance, a prefix of its final text', async () => {
    const stt = new PocketsphinxSttProvider({ partialEveryMs: 200, maxDecoders: 1, maxWorkers: 1 });
    const texts: string[] = [];
    let heard: (() => void) | undefined;
    const some = new Promise<void>((resolve) => (heard = resolve));
    const controller = new AbortController();
    const stream = stt.open({
      signal: controller.signal,
      onEvent: (e: SttEvent) => {
        if (e.type !== 'text') return;
        texts.push(e.text);
        if (texts.join('').split(' ').filter(Boolean).length >= 2) heard?.();
      },
    });
    for (let i = 0; i < pcm.length; i += 320) stream.write(pcm.subarray(i, i + 320));
    // Words arrive before the commit: the utterance is still open.
    await within(some, 'two words from partial hypotheses');
    const streamed = texts.join('');
    const final = await stream.commit();
    expect(final.startsWith(streamed.trim())).toBe(true);
    expect(streamed.trim().split(' ').length).toBeGreaterThanOrEqual(2);
    // With partials, the commit sends no text event of its own: the session sends the rest.
    expect(texts.join('')).toBe(streamed);
    controller.abort();
    await stt.close();
  });

  it('sends nothing while the option is off (the default)', async () => {
    const stt = new PocketsphinxSttProvider({ maxDecoders: 1, maxWorkers: 1 });
    const texts: string[] = [];
    const controller = new AbortController();
    const stream = stt.open({
      signal: controller.signal,
      onEvent: (e) => e.type === 'text' && texts.push(e.text),
    });
    for (let i = 0; i < pcm.length; i += 320) stream.write(pcm.subarray(i, i + 320));
    const final = await stream.commit();
    // One text event, the whole utterance, at its end.
    expect(texts).toEqual([final]);
    controller.abort();
    await stt.close();
  });
});
