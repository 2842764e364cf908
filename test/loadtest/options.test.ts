/**
 * The load test's command line: defaults, durations with and without units,
 * and one UsageError naming the flag for every mistake.
 */
import { describe, expect, it } from 'vitest';
import {
  USAGE,
  UsageError,
  parseDuration,
  parseLoadtestArgs,
  passedSettings,
} from '../../loadtest/lib/options.js';
import type { LoadtestOptions } from '../../loadtest/lib/options.js';

/** Parses arguments that must be valid. */
function parse(...argv: string[]): LoadtestOptions {
  const options = parseLoadtestArgs(argv);
  expect(options).not.toBeNull();
  return options!;
}

/** The UsageError that parsing these arguments throws. */
function usageError(...argv: string[]): UsageError {
  try {
    parseLoadtestArgs(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return err as UsageError;
  }
  throw new Error(`no UsageError for ${argv.join(' ')}`);
}

describe('parseLoadtestArgs', () => {
  it('fills in every default around --sim', () => {
    expect(parse('--sim')).toEqual({
      url: null,
      sim: true,
      scenario: 'text',
      character: null,
      sessions: 20,
      rampMs: 5_000,
      durationMs: 30_000,
      thinkMs: 1_000,
      thinkJitterMs: 0,
      turnTimeoutMs: 30_000,
      silenceMs: 500,
      compare: null,
      capacity: null,
      simLatency: { ttftMs: 200, tokensPerSec: 50, jitterMs: 0, profile: 'openai' },
      cpuProfDir: null,
      instances: 1,
      workers: 1,
      killOne: false,
      killSignal: 'SIGTERM',
      together: false,
      resume: false,
      outDir: 'loadtest/reports',
      name: 'loadtest',
    } satisfies LoadtestOptions);
  });

  it('takes --instances, --workers and --kill-one with --sim, and resumes when killing', () => {
    expect(parse('--sim', '--instances', '2', '--workers', '2', '--kill-one')).toMatchObject({
      instances: 2,
      workers: 2,
      killOne: true,
      resume: true,
    });
    for (const name of ['KILL', 'SIGKILL', 'kill']) {
      expect(parse('--sim', '--instances', '2', '--kill-one', '--kill-signal', name)).toMatchObject(
        { killOne: true, killSignal: 'SIGKILL' },
      );
    }
    expect(parse('--url', 'ws://127.0.0.1:8080/v1/realtime', '--resume')).toMatchObject({
      resume: true,
      killOne: false,
    });
  });

  it('refuses scale-out flags without --sim and --kill-one with a single instance', () => {
    expect(() => parse('--url', 'ws://127.0.0.1:8080/v1/realtime', '--instances', '2')).toThrow(
      /use them with --sim/,
    );
    expect(() => parse('--sim', '--kill-one')).toThrow(/--kill-one needs --instances 2 or more/);
    expect(() => parse('--sim', '--instances', '2', '--kill-signal', 'KILL')).toThrow(
      /--kill-signal is the signal of --kill-one/,
    );
    expect(() => parse('--sim', '--instances', '2', '--kill-one', '--kill-signal', 'HUP')).toThrow(
      /--kill-signal must be TERM or KILL \(got "HUP"\)/,
    );
    expect(() => parse('--sim', '--instances', '0')).toThrow(/--instances must be a whole number/);
  });

  it('takes a ws:// or wss:// URL instead of --sim', () => {
    expect(parse('--url', 'ws://127.0.0.1:8787/v1/realtime')).toMatchObject({
      url: 'ws://127.0.0.1:8787/v1/realtime',
      sim: false,
    });
    expect(parse('--url', 'wss://troupe.test/v1/realtime').url).toBe(
      'wss://troupe.test/v1/realtime',
    );
  });

  it('reads every flag it is given', () => {
    const options = parse(
      '--sim',
      '--scenario',
      'tools',
      '--character',
      'weather',
      '--sessions',
      '300',
      '--silence-ms',
      '0',
      '--sim-tps',
      '75.5',
      '--sim-profile',
      'vllm-hermes',
      '--cpu-prof',
      '/tmp/prof',
      '--out',
      'out/dir',
      '--name',
      'run-1.v2',
    );
    expect(options).toMatchObject({
      scenario: 'tools',
      character: 'weather',
      sessions: 300,
      silenceMs: 0,
      simLatency: { tokensPerSec: 75.5, profile: 'vllm-hermes' },
      cpuProfDir: '/tmp/prof',
      outDir: 'out/dir',
      name: 'run-1.v2',
    });
  });

  it('reads durations in ms, s and m, and bare numbers as seconds', () => {
    const options = parse(
      '--sim',
      '--ramp',
      '1500ms',
      '--duration',
      '2m',
      '--think',
      '0.5',
      '--turn-timeout',
      '12s',
    );
    expect(options).toMatchObject({
      rampMs: 1_500,
      durationMs: 120_000,
      thinkMs: 500,
      turnTimeoutMs: 12_000,
    });
    expect(parse('--sim', '--duration', '45').durationMs).toBe(45_000);
  });

  it('takes --think-jitter up to --think, and names both when it is more', () => {
    expect(parse('--sim', '--think', '2s', '--think-jitter', '500ms')).toMatchObject({
      thinkMs: 2_000,
      thinkJitterMs: 500,
    });
    expect(usageError('--sim', '--think', '1s', '--think-jitter', '2s').message).toMatch(
      /--think-jitter \(2000 ms\) must be at most --think \(1000 ms\)/,
    );
  });

  it('reads bare --sim-ttft and --sim-jitter as milliseconds', () => {
    expect(parse('--sim', '--sim-ttft', '250', '--sim-jitter', '20').simLatency).toMatchObject({
      ttftMs: 250,
      jitterMs: 20,
    });
    expect(parse('--sim', '--sim-ttft', '1s', '--sim-jitter', '0.5s').simLatency).toMatchObject({
      ttftMs: 1_000,
      jitterMs: 500,
    });
  });

  it('fills in the capacity search defaults for --find-capacity', () => {
    expect(parse('--sim', '--find-capacity').capacity).toEqual({
      start: 100,
      step: 100,
      stepMs: 15_000,
      maxSessions: 3_000,
      limitMs: 10,
    });
  });

  it('reads the capacity search flags', () => {
    const options = parse(
      '--sim',
      '--find-capacity',
      '--start',
      '50',
      '--step',
      '25',
      '--step-duration',
      '20',
      '--max-sessions',
      '400',
      '--limit-ms',
      '2.5',
    );
    expect(options.capacity).toEqual({
      start: 50,
      step: 25,
      stepMs: 20_000,
      maxSessions: 400,
      limitMs: 2.5,
    });
  });

  it('compares capacities with one worker and N: --compare workers', () => {
    const options = parse('--sim', '--find-capacity', '--workers', '2', '--compare', 'workers');
    expect(options.compare).toBe('workers');
    expect(options.workers).toBe(2);
    expect(options.capacity).not.toBeNull();
  });

  it('returns null for --help and -h', () => {
    expect(parseLoadtestArgs(['--help'])).toBeNull();
    expect(parseLoadtestArgs(['-h'])).toBeNull();
    expect(parseLoadtestArgs(['--sim', '--help'])).toBeNull();
  });

  it.each<[string, string[], RegExp]>([
    ['neither --url nor --sim', [], /--url.*--sim/],
    ['both --url and --sim', ['--sim', '--url', 'ws://127.0.0.1:1/v1/realtime'], /--url.*--sim/],
    ['an http:// url', ['--url', 'http://127.0.0.1:1/v1/realtime'], /--url/],
    ['an unknown scenario', ['--sim', '--scenario', 'video'], /--scenario.*"video"/],
    ['an unknown compare mode', ['--sim', '--compare', 'both'], /--compare.*"both"/],
    [
      '--compare direct without --sim',
      ['--url', 'ws://127.0.0.1:1/v1/realtime', '--compare', 'direct'],
      /--compare direct.*--sim/,
    ],
    [
      '--compare with voice',
      ['--sim', '--scenario', 'voice', '--compare', 'baseline'],
      /--compare/,
    ],
    [
      '--find-capacity with --compare',
      ['--sim', '--find-capacity', '--compare', 'direct'],
      /--find-capacity/,
    ],
    [
      '--compare workers without --find-capacity',
      ['--sim', '--workers', '2', '--compare', 'workers'],
      /--compare workers.*--find-capacity/,
    ],
    [
      '--compare workers with one worker',
      ['--sim', '--find-capacity', '--compare', 'workers'],
      /--workers 2 or more/,
    ],
    ['an unknown simulator profile', ['--sim', '--sim-profile', 'gpt'], /--sim-profile.*"gpt"/],
    ['a name with a slash', ['--sim', '--name', '../escape'], /--name.*"\.\.\/escape"/],
    ['a name with a space', ['--sim', '--name', 'my run'], /--name/],
    [
      '--cpu-prof without --sim',
      ['--url', 'ws://127.0.0.1:1/v1/realtime', '--cpu-prof', 'prof'],
      /--cpu-prof.*--sim/,
    ],
    [
      'a duration shorter than the ramp',
      ['--sim', '--ramp', '10s', '--duration', '5s'],
      /--duration.*--ramp/,
    ],
    ['a fractional session count', ['--sim', '--sessions', '2.5'], /--sessions.*"2\.5"/],
    ['a session count of 0', ['--sim', '--sessions', '0'], /--sessions.*>= 1/],
    ['an empty session count', ['--sim', '--sessions', ''], /--sessions/],
    ['a negative silence window', ['--sim', '--silence-ms', '-1'], /--silence-ms/],
    ['a duration without a number', ['--sim', '--duration', 'long'], /--duration.*"long"/],
    ['an unknown time unit', ['--sim', '--think', '3h'], /--think.*"3h"/],
    ['a zero turn timeout', ['--sim', '--turn-timeout', '0'], /--turn-timeout/],
    ['a negative --sim-tps', ['--sim', '--sim-tps', '-5'], /--sim-tps/],
    ['a bad --limit-ms', ['--sim', '--find-capacity', '--limit-ms', 'ten'], /--limit-ms.*"ten"/],
    ['a bad --step', ['--sim', '--find-capacity', '--step', '0'], /--step/],
    ['a bad --sim-ttft', ['--sim', '--sim-ttft', 'soon'], /--sim-ttft/],
    ['an unknown flag', ['--sim', '--sesions', '10'], /--sesions/],
    ['a missing value', ['--sim', '--sessions'], /--sessions/],
    ['a positional argument', ['--sim', 'extra'], /extra/],
  ])('rejects %s with a UsageError naming the flag', (_what, argv, message) => {
    expect(usageError(...argv).message).toMatch(message);
  });

  it('names its errors UsageError', () => {
    expect(usageError('--sim', '--scenario', 'video').name).toBe('UsageError');
  });
});

describe('parseDuration', () => {
  it('reads ms, s and m, with decimals', () => {
    expect(parseDuration('ramp', '750ms', 's')).toBe(750);
    expect(parseDuration('ramp', '1.5s', 's')).toBe(1_500);
    expect(parseDuration('ramp', '2m', 's')).toBe(120_000);
    expect(parseDuration('ramp', ' 3s ', 's')).toBe(3_000);
  });

  it('reads a bare number in the unit it is given', () => {
    expect(parseDuration('think', '2', 's')).toBe(2_000);
    expect(parseDuration('sim-ttft', '2', 'ms')).toBe(2);
  });

  it('rejects what is not a time, naming the flag', () => {
    for (const raw of ['', 'fast', '-1s', '1h', '1 s', '.5s']) {
      expect(() => parseDuration('ramp', raw, 's')).toThrow(UsageError);
      expect(() => parseDuration('ramp', raw, 's')).toThrow(/^--ramp must be a time/);
    }
  });
});

describe('passedSettings', () => {
  it('hands the servers their session cap, send window, reply writes and overload guard, nothing else', () => {
    const env = {
      MAX_SESSIONS: '250',
      OVERLOAD_BUSY: '0.75',
      OVERLOAD_LAG_MS: '0',
      DELTA_BATCH_MS: '5',
      OVERLOAD_CPU: '0.8',
      RESUME_REPLY_SAVE_MS: '0',
      LLM_BASE_URL: 'http://elsewhere',
      PORT: '9999',
    };
    expect(passedSettings(env)).toEqual({
      MAX_SESSIONS: '250',
      OVERLOAD_BUSY: '0.75',
      OVERLOAD_LAG_MS: '0',
      DELTA_BATCH_MS: '5',
      OVERLOAD_CPU: '0.8',
      RESUME_REPLY_SAVE_MS: '0',
    });
    expect(passedSettings({})).toEqual({});
    expect(USAGE).toContain('OVERLOAD_BUSY');
  });
});
