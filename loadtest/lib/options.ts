/**
 * The load test's command line: parsed with node's parseArgs, checked, with
 * one clear message per mistake.
 */
import { parseArgs } from 'node:util';
import { PROFILE_NAMES, isProfileName } from '../../src/testing/simulator/index.js';
import type { ProfileName } from '../../src/testing/simulator/index.js';
import { SCENARIOS, type ScenarioName } from './scenarios.js';

/** Server settings the load test's servers take from its own environment. */
export const PASSED_SETTINGS = [
  'MAX_SESSIONS',
  'DELTA_BATCH_MS',
  'OVERLOAD_BUSY',
  'OVERLOAD_LAG_MS',
  'OVERLOAD_CPU',
  'RESUME_REPLY_SAVE_MS',
] as const;

/**
 * The {@link PASSED_SETTINGS} set in `env`, for the environment of the
 * servers the load test starts.
 *
 * @example const env = { LLM_BASE_URL: sim.url, ...passedSettings(process.env) };
 */
export function passedSettings(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of PASSED_SETTINGS) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

export const USAGE = `Usage: npm run loadtest -- [options]

Target (one of):
  --url URL              a running server's WebSocket URL (ws://host:port/v1/realtime)
  --sim                  start the LLM simulator and a server here (own processes)

Scale-out (--sim):
  --instances N          start N servers (own processes, own ports) behind nginx, sharing a
                         redis-server (both Debian packages; default 1: one server, no nginx)
  --workers N            WORKERS of each server (default 1; above 1 the servers run npm start)
  --kill-one             stop one instance with SIGTERM halfway through the run (needs --instances 2
                         or more); its sessions resume on the others and the report gives resume times
  --kill-signal SIG      the signal --kill-one sends: TERM (default: a drain) or KILL (a crash: no
                         drain, no last write; the sessions resume from what the store holds)
  --resume               (with --url too) a session closed by the server reconnects with its resume
                         token and carries on; the report gives resume times

What to run:
  --scenario NAME        ${SCENARIOS.join(' | ')} (default text)
  --character ID         character to talk to (default: plain for text, weather for tools and voice)
  --sessions N           concurrent sessions (default 20)
  --ramp T               start them evenly over T (default 5s)
  --duration T           length of the run, ramp included (default 30s)
  --think T              pause between a reply and the next line (default 1s)
  --think-jitter T       each pause drawn evenly from --think ± T (default 0: every pause the same,
                         so sessions that started together stay in step)
  --turn-timeout T       a turn longer than this counts as an error (default 30s)
  --silence-ms N         voice: the server VAD's silence window (default 500, Realtime's)

Modes:
  --compare baseline     run the tools scenario and the no-tools baseline (plain), print the p95 increase
                         (after a 10 s warm-up; one after the other)
  --together             with --compare baseline: both at once, half the sessions each, so a busy
                         machine weighs on both alike (server CPU is then not split between them)
  --compare direct       run the scenario, then the same conversation straight to the simulator (--sim);
                         prints TTFT through Troupe ÷ TTFT direct
  --compare workers      with --find-capacity and --workers N: the capacity with WORKERS=1, then with
                         WORKERS=N, and their ratio (two reports, NAME-workers1 and NAME-workersN)
  --find-capacity        add sessions step by step until p95 added latency per delta passes
                         --limit-ms or errors appear; prints the number
    --start N            sessions of the first step (default 100)
    --step N             sessions added per step (default 100)
    --step-duration T    how long each step is measured, after its ramp (default 15s)
    --max-sessions N     stop there (default 3000)
    --limit-ms N         p95 added latency limit (default 10)

Simulator (--sim):
  --sim-ttft T           time to first token (default 200ms)
  --sim-tps N            tokens per second per stream (default 50)
  --sim-jitter T         ± jitter on every wait (default 0ms)
  --sim-profile NAME     chunking profile: ${PROFILE_NAMES.join(', ')} (default openai)
  --cpu-prof DIR         run the server under node --cpu-prof, writing the profile into DIR

Output:
  --out DIR              where the report goes (default loadtest/reports)
  --name NAME            report file name, without extension (default loadtest)
  --help                 this text

Times take a unit: 500ms, 10s, 2m (a bare number is seconds; --sim-ttft and --sim-jitter: ms).

The servers it starts (--sim, --instances, --workers) take ${PASSED_SETTINGS.join(', ')}
from its environment, e.g. MAX_SESSIONS=250 npm run loadtest -- --sim --workers 2 --sessions 1000
(without MAX_SESSIONS, they take twice the sessions asked for).`;

/** The parsed command line. */
export interface LoadtestOptions {
  url: string | null;
  sim: boolean;
  scenario: ScenarioName;
  character: string | null;
  sessions: number;
  rampMs: number;
  durationMs: number;
  thinkMs: number;
  /** Each pause is drawn evenly from `thinkMs` ± this. */
  thinkJitterMs: number;
  turnTimeoutMs: number;
  silenceMs: number;
  compare: 'baseline' | 'direct' | 'workers' | null;
  capacity: {
    start: number;
    step: number;
    stepMs: number;
    maxSessions: number;
    limitMs: number;
  } | null;
  simLatency: { ttftMs: number; tokensPerSec: number; jitterMs: number; profile: ProfileName };
  /** Servers to start (--sim). */
  instances: number;
  /** WORKERS of each server (--sim). */
  workers: number;
  /** Stop one instance halfway through. */
  killOne: boolean;
  /** What `--kill-one` sends: a drain, or a crash. */
  killSignal: KillSignal;
  /** `--compare baseline` runs tools and plain at once, half the sessions each. */
  together: boolean;
  /** Sessions closed by the server reconnect with their resume token. */
  resume: boolean;
  cpuProfDir: string | null;
  outDir: string;
  name: string;
}

/** A mistake on the command line: printed with the usage, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A duration in ms: `500ms`, `10s`, `2m`, or a bare number in `bareUnit`. */
export function parseDuration(flag: string, raw: string, bareUnit: 'ms' | 's'): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(raw.trim());
  if (m === null) {
    throw new UsageError(`--${flag} must be a time such as 500ms, 10s or 2m (got "${raw}").`);
  }
  const value = Number(m[1]);
  const unit = m[2] ?? bareUnit;
  return unit === 'ms' ? value : unit === 's' ? value * 1000 : value * 60_000;
}

function parseCount(flag: string, raw: string, min: number): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n) || n < min) {
    throw new UsageError(`--${flag} must be a whole number >= ${min} (got "${raw}").`);
  }
  return n;
}

/** The signals `--kill-one` can send. */
export const KILL_SIGNALS = ['SIGTERM', 'SIGKILL'] as const;
export type KillSignal = (typeof KILL_SIGNALS)[number];

/** `--kill-signal`: TERM or KILL, with or without `SIG`, any case. */
function killSignal(raw: string | undefined): KillSignal {
  if (raw === undefined) return 'SIGTERM';
  const name = raw.toUpperCase().replace(/^SIG/, '');
  const signal = `SIG${name}`;
  if (!(KILL_SIGNALS as readonly string[]).includes(signal)) {
    throw new UsageError(`--kill-signal must be TERM or KILL (got "${raw}").`);
  }
  return signal as KillSignal;
}

function parseNumber(flag: string, raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0) {
    throw new UsageError(`--${flag} must be a number >= 0 (got "${raw}").`);
  }
  return n;
}

/**
 * Parses the load test's arguments; `null` when `--help` was asked for.
 *
 * @throws UsageError naming the flag and what it takes.
 * @example parseLoadtestArgs(['--sim', '--sessions', '200', '--duration', '60s'])
 */
export function parseLoadtestArgs(argv: readonly string[]): LoadtestOptions | null {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string' },
        sim: { type: 'boolean' },
        scenario: { type: 'string' },
        character: { type: 'string' },
        sessions: { type: 'string' },
        ramp: { type: 'string' },
        duration: { type: 'string' },
        think: { type: 'string' },
        'think-jitter': { type: 'string' },
        'turn-timeout': { type: 'string' },
        'silence-ms': { type: 'string' },
        compare: { type: 'string' },
        'find-capacity': { type: 'boolean' },
        start: { type: 'string' },
        step: { type: 'string' },
        'step-duration': { type: 'string' },
        'max-sessions': { type: 'string' },
        'limit-ms': { type: 'string' },
        'sim-ttft': { type: 'string' },
        'sim-tps': { type: 'string' },
        'sim-jitter': { type: 'string' },
        'sim-profile': { type: 'string' },
        'cpu-prof': { type: 'string' },
        instances: { type: 'string' },
        workers: { type: 'string' },
        'kill-one': { type: 'boolean' },
        'kill-signal': { type: 'string' },
        together: { type: 'boolean' },
        resume: { type: 'boolean' },
        out: { type: 'string' },
        name: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help === true) return null;

  const sim = values.sim === true;
  const url = values.url ?? null;
  if (sim === (url !== null)) {
    throw new UsageError('Give either --url ws://… (a running server) or --sim (start one here).');
  }
  if (url !== null && !/^wss?:\/\//.test(url)) {
    throw new UsageError(`--url must be a ws:// or wss:// URL (got "${url}").`);
  }
  const scenario = values.scenario ?? 'text';
  if (!(SCENARIOS as readonly string[]).includes(scenario)) {
    throw new UsageError(`--scenario must be one of ${SCENARIOS.join(', ')} (got "${scenario}").`);
  }
  const compare = values.compare ?? null;
  if (compare !== null && compare !== 'baseline' && compare !== 'direct' && compare !== 'workers') {
    throw new UsageError(`--compare must be baseline, direct or workers (got "${compare}").`);
  }
  if (compare === 'direct' && !sim) {
    throw new UsageError('--compare direct needs --sim: it talks to the simulator directly.');
  }
  if (compare !== null && scenario === 'voice') {
    throw new UsageError('--compare works on typed scenarios (text, tools), not voice.');
  }
  const findCapacity = values['find-capacity'] === true;
  if (values.together === true && compare !== 'baseline') {
    throw new UsageError(
      '--together goes with --compare baseline: it runs its two phases at once.',
    );
  }
  if (compare === 'workers' && (!findCapacity || !sim)) {
    throw new UsageError(
      '--compare workers compares capacities: use it with --find-capacity, --sim and --workers N.',
    );
  }
  if (findCapacity && compare !== null && compare !== 'workers') {
    throw new UsageError('--find-capacity and --compare are separate runs: pick one.');
  }
  const profile = values['sim-profile'] ?? 'openai';
  if (!isProfileName(profile)) {
    throw new UsageError(
      `--sim-profile must be one of ${PROFILE_NAMES.join(', ')} (got "${profile}").`,
    );
  }
  const name = values.name ?? 'loadtest';
  if (!/^[\w.-]+$/.test(name)) {
    throw new UsageError(`--name must be a plain file name (got "${name}").`);
  }
  const ms = (flag: keyof typeof values, fallback: string, bare: 'ms' | 's' = 's'): number =>
    parseDuration(flag, (values[flag] as string | undefined) ?? fallback, bare);
  const count = (flag: keyof typeof values, fallback: number, min: number): number => {
    const raw = values[flag] as string | undefined;
    return raw === undefined ? fallback : parseCount(flag, raw, min);
  };
  const options: LoadtestOptions = {
    url,
    sim,
    scenario: scenario as ScenarioName,
    character: values.character ?? null,
    sessions: count('sessions', 20, 1),
    rampMs: ms('ramp', '5s'),
    durationMs: ms('duration', '30s'),
    thinkMs: ms('think', '1s'),
    thinkJitterMs: ms('think-jitter', '0s'),
    turnTimeoutMs: ms('turn-timeout', '30s'),
    silenceMs: count('silence-ms', 500, 0),
    compare,
    capacity: findCapacity
      ? {
          start: count('start', 100, 1),
          step: count('step', 100, 1),
          stepMs: ms('step-duration', '15s'),
          maxSessions: count('max-sessions', 3000, 1),
          limitMs:
            values['limit-ms'] === undefined ? 10 : parseNumber('limit-ms', values['limit-ms']),
        }
      : null,
    simLatency: {
      ttftMs: ms('sim-ttft', '200', 'ms'),
      tokensPerSec:
        values['sim-tps'] === undefined ? 50 : parseNumber('sim-tps', values['sim-tps']),
      jitterMs: ms('sim-jitter', '0', 'ms'),
      profile,
    },
    cpuProfDir: values['cpu-prof'] ?? null,
    instances: count('instances', 1, 1),
    workers: count('workers', 1, 1),
    killOne: values['kill-one'] === true,
    killSignal: killSignal(values['kill-signal']),
    together: values.together === true,
    resume: values['kill-one'] === true || values.resume === true,
    outDir: values.out ?? 'loadtest/reports',
    name,
  };
  if (options.cpuProfDir !== null && !sim) {
    throw new UsageError('--cpu-prof profiles the server the load test starts: use it with --sim.');
  }
  if (!sim && (options.instances > 1 || options.workers > 1 || options.killOne)) {
    throw new UsageError(
      '--instances, --workers and --kill-one start servers: use them with --sim (with --url, put nginx in front yourself).',
    );
  }
  if (values['kill-signal'] !== undefined && !options.killOne) {
    throw new UsageError('--kill-signal is the signal of --kill-one: give --kill-one too.');
  }
  if (options.killOne && options.instances < 2) {
    throw new UsageError(
      '--kill-one needs --instances 2 or more: the sessions move to the others.',
    );
  }
  if (options.cpuProfDir !== null && (options.instances > 1 || options.workers > 1)) {
    throw new UsageError(
      '--cpu-prof profiles one server process: not with --instances or --workers.',
    );
  }
  if (options.compare === 'workers' && options.workers < 2) {
    throw new UsageError(
      '--compare workers needs --workers 2 or more: it compares with WORKERS=1.',
    );
  }
  if (options.durationMs < options.rampMs) {
    throw new UsageError(
      `--duration (${options.durationMs} ms) must be at least --ramp (${options.rampMs} ms): it includes the ramp.`,
    );
  }
  if (options.thinkJitterMs > options.thinkMs) {
    throw new UsageError(
      `--think-jitter (${options.thinkJitterMs} ms) must be at most --think (${options.thinkMs} ms): a pause is never below 0.`,
    );
  }
  if (options.turnTimeoutMs <= 0) throw new UsageError('--turn-timeout must be more than 0.');
  return options;
}
