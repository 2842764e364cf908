import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';

describe('config', () => {
  it('has defaults for the characters: the characters folder, lenient, watched in development', () => {
    expect(loadConfig({}).characters).toEqual({ dir: 'characters', strict: false, watch: true });
    expect(loadConfig({ NODE_ENV: 'production' }).characters.watch).toBe(false);
  });

  it('reads the environment', () => {
    const config = loadConfig({
      CHARACTERS_DIR: 'my-characters',
      CHARACTERS_STRICT: 'true',
      CHARACTERS_WATCH: 'off',
    });
    expect(config.characters).toEqual({ dir: 'my-characters', strict: true, watch: false });
  });

  it('lets CLI flags override the environment', () => {
    const config = loadConfig({ CHARACTERS_DIR: 'a', NODE_ENV: 'production' }, [
      '--characters-dir',
      'b',
      '--strict',
      '--watch',
    ]);
    expect(config.characters).toEqual({ dir: 'b', strict: true, watch: true });
    expect(loadConfig({}, ['--no-watch']).characters.watch).toBe(false);
  });

  it('names every bad value in one error', () => {
    let error: unknown;
    try {
      loadConfig({ CHARACTERS_STRICT: 'maybe', CHARACTERS_WATCH: 'sometimes' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(
      'invalid configuration:\n' +
        '  CHARACTERS_STRICT: expected true or false (or 1/0, yes/no, on/off), got "maybe"\n' +
        '  CHARACTERS_WATCH: expected true or false (or 1/0, yes/no, on/off), got "sometimes"',
    );
  });

  it('rejects unknown flags', () => {
    expect(() => loadConfig({}, ['--wacth'])).toThrow(/invalid command line: .*--wacth/);
  });
});
