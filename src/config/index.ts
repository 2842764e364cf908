/**
 * Settings, read from the environment and CLI flags and checked with zod.
 * Nothing else in Troupe reads `process.env`.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { DEFAULT_CHARACTERS_DIR, DEFAULT_CHARACTERS_STRICT } from './defaults.js';

export * from './defaults.js';

/** Where characters come from and how they are loaded. */
export interface CharactersConfig {
  /** The characters directory. @defaultValue `characters` */
  dir: string;
  /** Fail on any bad character instead of skipping it. @defaultValue false */
  strict: boolean;
  /** Reload characters when their files change. @defaultValue true unless NODE_ENV=production */
  watch: boolean;
}

/** Troupe's settings. */
export interface Config {
  characters: CharactersConfig;
}

const flag = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no', 'on', 'off'], {
    error: 'expected true or false (or 1/0, yes/no, on/off)',
  })
  .transform((v) => ['1', 'true', 'yes', 'on'].includes(v));

const envSchema = z.object({
  CHARACTERS_DIR: z.string().trim().min(1, { error: 'expected a directory path' }).optional(),
  CHARACTERS_STRICT: flag.optional(),
  CHARACTERS_WATCH: flag.optional(),
  NODE_ENV: z.string().optional(),
});

/** CLI flags that override the environment. */
const FLAGS = {
  'characters-dir': { type: 'string' },
  strict: { type: 'boolean' },
  watch: { type: 'boolean' },
  'no-watch': { type: 'boolean' },
} as const;

/**
 * Reads the settings. Throws one {@link ConfigError} listing every bad value.
 *
 * @example
 * const config = loadConfig(process.env, process.argv.slice(2));
 */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  argv: readonly string[] = [],
): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      `invalid configuration:\n${parsed.error.issues
        .map(
          (i) =>
            `  ${i.path.join('.')}: ${i.message}, got ${JSON.stringify((env as Record<string, unknown>)[String(i.path[0])])}`,
        )
        .join('\n')}`,
    );
  }
  let values: {
    'characters-dir'?: string;
    strict?: boolean;
    watch?: boolean;
    'no-watch'?: boolean;
  };
  try {
    values = parseArgs({
      args: [...argv],
      options: FLAGS,
      allowPositionals: true,
      strict: true,
    }).values;
  } catch (err) {
    throw new ConfigError(`invalid command line: ${(err as Error).message}`, { cause: err });
  }
  const e = parsed.data;
  const watchFlag = values['no-watch'] ? false : values.watch;
  return {
    characters: {
      dir: values['characters-dir'] ?? e.CHARACTERS_DIR ?? DEFAULT_CHARACTERS_DIR,
      strict: values.strict ?? e.CHARACTERS_STRICT ?? DEFAULT_CHARACTERS_STRICT,
      watch: watchFlag ?? e.CHARACTERS_WATCH ?? e.NODE_ENV !== 'production',
    },
  };
}
