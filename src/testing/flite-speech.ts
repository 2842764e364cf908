/**
 * Real speech for tests, benchmarks and load tests: utterances spoken by
 * Debian's `flite -voice kal16` (pocketsphinx hears it well, see
 * VOICE-STACK.md), at 24 kHz as the Realtime protocol takes it.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ConfigError } from '../errors.js';
import { readWav } from '../voice/audio/pcm.js';
import { resample } from '../voice/audio/resample.js';

const run = promisify(execFile);
const cache = new Map<string, Promise<Int16Array>>();

/**
 * `text` spoken by flite (kal16), as 24 kHz PCM16. Cached per process; the
 * file flite writes is removed once read.
 *
 * @throws ConfigError when flite is not installed (it names the apt-get line).
 * @example const pcm = await fliteSpeech("what's the weather in glasgow");
 */
export function fliteSpeech(text: string): Promise<Int16Array> {
  let pcm = cache.get(text);
  if (!pcm) {
    pcm = (async () => {
      const dir = await mkdtemp(join(tmpdir(), 'troupe-speech-'));
      const file = join(dir, 'utterance.wav');
      try {
        await run('flite', ['-voice', 'kal16', '-t', text, '-o', file]);
        const wav = readWav(new Uint8Array(await readFile(file)));
        return resample(wav.pcm, wav.sampleRate, 24000);
      } catch (err) {
        if (
          (err as NodeJS.ErrnoException).code === 'ENOENT' &&
          (err as { path?: string }).path === 'flite'
        ) {
          throw new ConfigError(
            'Speaking test utterances needs Debian\'s flite: run "apt-get install flite".',
          );
        }
        throw err;
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    })();
    cache.set(text, pcm);
  }
  return pcm;
}

/**
 * Where sound begins and ends in 24 kHz audio, in ms: the first and last
 * sample louder than `level` (flite leaves silence around its speech).
 *
 * @example soundBounds(pcm).endMs // the user's last sound
 */
export function soundBounds(pcm: Int16Array, level = 500): { startMs: number; endMs: number } {
  let first = 0;
  while (first < pcm.length && Math.abs(pcm[first]!) < level) first++;
  let last = pcm.length - 1;
  while (last > first && Math.abs(pcm[last]!) < level) last--;
  return { startMs: first / 24, endMs: (last + 1) / 24 };
}
