import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fliteSpeech, soundBounds } from '../../src/testing/flite-speech.js';

const before = process.env.TMPDIR;
afterEach(() => {
  if (before === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = before;
});

describe('fliteSpeech', () => {
  it('speaks the text at 24 kHz and leaves no file behind', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-speech-test-'));
    try {
      // os.tmpdir() reads TMPDIR at each call: flite's files go here.
      process.env.TMPDIR = dir;
      const [one, two] = await Promise.all([
        fliteSpeech('the files are removed'),
        fliteSpeech('once they are read'),
      ]);
      // About a second and a half of speech each, 24 samples a millisecond.
      expect(soundBounds(one!).endMs).toBeGreaterThan(500);
      expect(two!.length).toBeGreaterThan(24 * 500);
      expect(await readdir(dir)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
