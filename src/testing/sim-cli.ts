/**
 * Runs the LLM simulator as a standalone server.
 *
 * @example npm run sim -- --port 8000 --profile vllm-hermes --script src/testing/scripts/example.json
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { closest } from '../characters/closest.js';
import { TroupeError } from '../errors.js';
import { PROFILE_NAMES, isProfileName, parseSimScript, startSimulator } from './simulator/index.js';
import type { SimScript, SimulatorOptions } from './simulator/index.js';

const USAGE = `Usage: npm run sim -- [options]

  --port N             port to listen on (default 8000; 0 = any free port)
  --host H             interface to bind (default 127.0.0.1)
  --profile NAME       vendor profile: ${PROFILE_NAMES.join(', ')} (default openai)
  --script FILE        JSON script of replies (see src/testing/scripts/example.json)
  --ttft-ms N          wait before the first chunk (default 0)
  --tokens-per-sec N   chunk pacing, 0 = as fast as possible (default 0)
  --jitter-ms N        uniform ± jitter on every wait (default 0)
  --model NAME         a model to list in /v1/models (repeatable; default sim-model)
  --seed N             seed for splitting, jitter and ids (default 1)
  --stamp              end each streamed text fragment with its send time (load tests)
  --help               show this text`;

/** CLI failures: printed without a stack trace, exit code 1. */
class CliError extends TroupeError {
  override name = 'CliError';
  constructor(message: string) {
    super('E_CONFIG', message);
  }
}

function parseNumber(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) {
    throw new CliError(`--${flag} must be a number >= 0 (got "${value}").`);
  }
  return n;
}

async function loadScript(file: string): Promise<SimScript> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(`Cannot read script file ${file}: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CliError(`Script file ${file} is not valid JSON: ${(err as Error).message}`);
  }
  return parseSimScript(json, file);
}

/** The simulator's long flags, for "did you mean". */
const SIM_FLAGS = [
  'port',
  'host',
  'profile',
  'script',
  'ttft-ms',
  'tokens-per-sec',
  'jitter-ms',
  'model',
  'seed',
  'stamp',
  'help',
];

/** Parses the flags; an unknown one is answered with the nearest known one. */
function parseFlags(argv: string[]) {
  try {
    return parseSimFlags(argv);
  } catch (err) {
    const unknown = /^Unknown option '--?([^'=]+)'/.exec((err as Error).message);
    if (!unknown)
      throw new CliError((err as Error).message.replace(/\. To specify a positional.*$/s, '.'));
    const guess = closest(unknown[1]!, SIM_FLAGS);
    throw new CliError(
      `unknown flag --${unknown[1]!}${guess ? `; did you mean --${guess}?` : '.'}`,
    );
  }
}

function parseSimFlags(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      profile: { type: 'string' },
      script: { type: 'string' },
      'ttft-ms': { type: 'string' },
      'tokens-per-sec': { type: 'string' },
      'jitter-ms': { type: 'string' },
      model: { type: 'string', multiple: true },
      seed: { type: 'string' },
      stamp: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseFlags(argv);
  if (values.help === true) {
    console.log(USAGE);
    return;
  }
  const profile = values.profile ?? 'openai';
  if (!isProfileName(profile)) {
    throw new CliError(`Unknown --profile "${profile}". Use one of: ${PROFILE_NAMES.join(', ')}.`);
  }
  const options: SimulatorOptions = {
    port: parseNumber('port', values.port, 8000),
    host: values.host ?? '127.0.0.1',
    profile,
    latency: {
      ttftMs: parseNumber('ttft-ms', values['ttft-ms'], 0),
      tokensPerSec: parseNumber('tokens-per-sec', values['tokens-per-sec'], 0),
      jitterMs: parseNumber('jitter-ms', values['jitter-ms'], 0),
    },
    seed: parseNumber('seed', values.seed, 1),
    stamp: values.stamp === true,
  };
  if (values.model !== undefined && values.model.length > 0) options.models = values.model;
  if (values.script !== undefined) options.script = await loadScript(values.script);

  const sim = await startSimulator(options);
  console.log(sim.url);
  console.error(
    `troupe simulator: profile ${profile}, ${options.script?.rules.length ?? 0} script rule(s); Ctrl-C to stop`,
  );

  const stop = (): void => {
    sim.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof TroupeError || (err instanceof Error && 'code' in err)) {
    console.error(`sim: ${err.message}`);
    if (err instanceof CliError) console.error(`\n${USAGE}`);
  } else {
    console.error(err);
  }
  process.exit(1);
});
