/**
 * The load test: N concurrent simulated users over the public protocol, each
 * a scripted multi-turn conversation, against a running server (`--url`) or
 * one it starts with the LLM simulator (`--sim`). Prints a live progress
 * line, a final table and the targets; writes a JSON and a self-contained
 * HTML report. The exit code says whether the run itself worked (2 for a
 * bad command line), not whether targets were met.
 *
 * @example npm run loadtest -- --sim --sessions 200 --ramp 10s --duration 60s --scenario tools
 * @example npm run loadtest -- --sim --compare baseline --sessions 200
 * @example npm run loadtest -- --url ws://127.0.0.1:8080/v1/realtime --scenario text --sessions 50
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fliteSpeech, soundBounds } from '../src/testing/index.js';
import { startServerChild, startSimChild, type Child } from './lib/children.js';
import { runDirectSession } from './lib/direct-client.js';
import {
  USAGE,
  UsageError,
  parseLoadtestArgs,
  passedSettings,
  type LoadtestOptions,
} from './lib/options.js';
import { findCapacity, runPhase, type PhaseSpec } from './lib/phase.js';
import type { PoolOptions } from './lib/pool.js';
import type { CpuPart } from './lib/process-cpu.js';
import { CONVERSATION, DEFAULT_CHARACTER, LOADTEST_SCRIPT } from './lib/scenarios.js';
import {
  formatResumes,
  startScaleOut,
  summarizeResumes,
  type ScaleOutTarget,
} from './lib/scale-out.js';
import { newResumeLog, type ResumeLog } from './lib/resume-log.js';
import { runSession, type Utterance } from './lib/session-client.js';
import { engineBenchSection } from './report/engine-section.js';
import { renderHtmlReport } from './report/html.js';
import { reportMachine } from './report/machine.js';
import type { LoadtestReport, PhaseReport } from './report/model.js';
import { printReport } from './report/table.js';
import { checkTargets, compare } from './report/targets.js';

/** Where `npm run bench` leaves its numbers; the report includes the latest. */
const ENGINE_BENCH_JSON = path.join('loadtest', 'reports', 'engine-bench.json');
/** `--compare baseline` warms the server up this long (at least the ramp) before it measures. */
const WARMUP_MS = 10_000;

async function main(argv: readonly string[]): Promise<void> {
  let options: LoadtestOptions | null;
  try {
    options = parseLoadtestArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`loadtest: ${err.message}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (options === null) {
    console.log(USAGE);
    return;
  }
  if (options.compare !== 'workers') {
    await runAndReport(options);
    return;
  }
  // The same search with one worker, then with N: the ratio is what the workers add.
  const one = await runAndReport({ ...options, workers: 1, name: `${options.name}-workers1` });
  const many = await runAndReport({
    ...options,
    name: `${options.name}-workers${options.workers}`,
  });
  const [a, b] = [one.capacity?.sessions ?? null, many.capacity?.sessions ?? null];
  const ratio = a !== null && b !== null && a > 0 ? (b / a).toFixed(2) : 'n/a';
  console.log(
    `\ncapacity: WORKERS=1 ${a ?? 'below the first step'}, WORKERS=${options.workers} ${b ?? 'below the first step'} sessions; ratio ${ratio}`,
  );
}

/** Starts the target, runs, closes it; prints and writes the report. */
async function runAndReport(options: LoadtestOptions): Promise<LoadtestReport> {
  const started = await startTarget(options);
  let report: LoadtestReport;
  try {
    report = await run(options, started);
  } finally {
    await started.server?.close();
    await started.scaleOut?.close();
    await started.sim?.close();
  }
  printReport(report);
  if (report.resume !== undefined) {
    console.log(`\n${formatResumes(report.resume)}`);
  }
  await mkdir(options.outDir, { recursive: true });
  const base = path.join(options.outDir, options.name);
  await writeFile(`${base}.json`, `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(`${base}.html`, renderHtmlReport(report));
  console.log(`\nreport: ${base}.json, ${base}.html`);
  return report;
}

interface Target {
  url: string;
  sim?: Child;
  server?: Child;
  /** `--instances`/`--workers`: the servers, Redis and nginx. */
  scaleOut?: ScaleOutTarget;
}

/** With `--sim`: the simulator and a server, each in its own process. */
async function startTarget(options: LoadtestOptions): Promise<Target> {
  if (!options.sim) return { url: options.url! };
  const voice = options.scenario === 'voice';
  const { ttftMs, tokensPerSec, jitterMs, profile } = options.simLatency;
  const sim = await startSimChild({
    profile,
    script: LOADTEST_SCRIPT,
    latency: { ttftMs, tokensPerSec, jitterMs },
    // Stamps would be spoken: the voice scenario measures audio instead.
    stamp: !voice,
  });
  const most = Math.max(options.sessions, options.capacity?.maxSessions ?? 0);
  const env = {
    PORT: '0',
    LLM_BASE_URL: sim.url,
    CHARACTERS_DIR: 'characters',
    CHARACTERS_WATCH: 'false',
    // What `npm start` logs (a line a turn), as the scale-out servers do.
    LOG_LEVEL: 'info',
    MAX_SESSIONS: String(most * 2 + 10),
    STT_PROVIDER: voice ? 'pocketsphinx' : 'none',
    TTS_PROVIDER: voice ? 'espeak' : 'none',
    // The session cap (in place of the one above), the delta send window and
    // the overload guard are the server's to choose: the load test measures
    // what they do.
    ...passedSettings(process.env),
  };
  try {
    if (options.instances > 1 || options.workers > 1) {
      const scaleOut = await startScaleOut({
        instances: options.instances,
        workers: options.workers,
        env,
      });
      return { url: scaleOut.url, sim, scaleOut };
    }
    const server = await startServerChild({
      env,
      ...(options.cpuProfDir === null ? {} : { cpuProfDir: path.resolve(options.cpuProfDir) }),
    });
    return { url: server.url, sim, server };
  } catch (err) {
    await sim.close();
    throw err;
  }
}

async function run(options: LoadtestOptions, target: Target): Promise<LoadtestReport> {
  const speech = options.scenario === 'voice' ? await utterances() : undefined;
  const resume: ResumeLog | undefined = options.resume ? newResumeLog() : undefined;
  // Halfway through the (first) phase.
  const kill = options.killOne
    ? setTimeout(() => void target.scaleOut?.killOne(options.killSignal), options.durationMs / 2)
    : undefined;
  const pool = (character: string | null, direct = false): PoolOptions => ({
    url: direct ? simUrl(target) : target.url,
    character,
    thinkMs: options.thinkMs,
    thinkJitterMs: options.thinkJitterMs,
    turnTimeoutMs: options.turnTimeoutMs,
    checkText: options.sim,
    ...(speech === undefined ? {} : { speech }),
    silenceMs: options.silenceMs,
    ...(resume === undefined || direct ? {} : { resume }),
  });
  // What each process on the machine uses, the load test's own included.
  const cpuParts: CpuPart[] = [
    ...(target.server
      ? [{ name: 'server', pid: target.server.pid, tree: false, server: true }]
      : []),
    ...(target.scaleOut?.cpuParts ?? []),
    ...(target.sim ? [{ name: 'simulator', pid: target.sim.pid, tree: false }] : []),
    { name: 'load test', pid: process.pid, tree: false },
  ];
  const spec = (
    name: string,
    scenario: PhaseReport['scenario'],
    character: string | null,
  ): PhaseSpec => ({
    name,
    scenario,
    pool: pool(character, scenario === 'direct'),
    runner: scenario === 'direct' ? runDirectSession : runSession,
    sessions: options.sessions,
    rampMs: options.rampMs,
    durationMs: options.durationMs,
    ...(scenario === 'direct' || target.server === undefined ? {} : { server: target.server }),
    cpuParts,
  });
  const character = options.character ?? DEFAULT_CHARACTER[options.scenario];
  const phases: PhaseReport[] = [];
  let capacity: LoadtestReport['capacity'];
  if (options.capacity !== null) {
    const found = await findCapacity(
      spec(options.scenario, options.scenario, character),
      options.capacity,
    );
    phases.push(...found.phases);
    capacity = found.result;
  } else if (options.compare === 'baseline') {
    // Unmeasured: the server's first minute (JIT, lazy modules, the first
    // connections) would otherwise all land on the phase that runs first.
    const warm = spec('warm-up', 'tools', options.character ?? 'weather');
    await runPhase({ ...warm, durationMs: Math.max(WARMUP_MS, options.rampMs) });
    const tools = spec('tools', 'tools', options.character ?? 'weather');
    const plain = spec('plain', 'text', 'plain');
    if (options.together) {
      // At the same moments on the same server: only the tools differ. The
      // server's CPU (and the machine's) covers both halves, so neither phase reports it.
      const half = Math.ceil(options.sessions / 2);
      const shared = ({ server: _server, cpuParts: _cpu, ...rest }: PhaseSpec): PhaseSpec => rest;
      const t = { ...shared(tools), sessions: half };
      const p = { ...shared(plain), sessions: options.sessions - half };
      phases.push(...(await Promise.all([runPhase(t), runPhase(p)])));
    } else {
      phases.push(await runPhase(tools));
      phases.push(await runPhase(plain));
    }
  } else {
    phases.push(await runPhase(spec(options.scenario, options.scenario, character)));
    if (options.compare === 'direct') phases.push(await runPhase(spec('direct', 'direct', null)));
  }
  clearTimeout(kill);
  // `--compare workers` compares two runs' capacities (see main), not phases.
  const comparisons = compare(phases, options.compare === 'workers' ? null : options.compare);
  const report: LoadtestReport = {
    kind: 'troupe-loadtest',
    version: 1,
    generatedAt: new Date().toISOString(),
    command: `npm run loadtest -- ${process.argv.slice(2).join(' ')}`.trim(),
    machine: reportMachine(),
    target: {
      url: target.url,
      sim: options.sim ? { ...options.simLatency } : null,
    },
    phases,
    comparisons,
    targets: checkTargets(phases, comparisons, capacity),
    ...(capacity === undefined ? {} : { capacity }),
    ...(resume === undefined ? {} : { resume: summarizeResumes(resume) }),
  };
  const bench = await latestEngineBench();
  if (bench !== undefined) report.engineBench = bench;
  return report;
}

function simUrl(target: Target): string {
  if (target.sim === undefined) throw new UsageError('The direct phase needs --sim.');
  return target.sim.url;
}

/** The conversation spoken by flite, once, for every voice session. */
async function utterances(): Promise<Utterance[]> {
  return Promise.all(
    CONVERSATION.map(async (turn) => {
      const pcm = await fliteSpeech(turn.user);
      return { pcm, endMs: soundBounds(pcm).endMs };
    }),
  );
}

async function latestEngineBench(): Promise<LoadtestReport['engineBench']> {
  let text: string;
  try {
    text = await readFile(ENGINE_BENCH_JSON, 'utf8');
  } catch {
    return undefined;
  }
  try {
    return engineBenchSection(JSON.parse(text) as unknown);
  } catch {
    // Half written by a bench still running, or damaged: the run's own report matters more.
    console.error(
      `loadtest: ${ENGINE_BENCH_JSON} is not valid JSON; the report leaves the engine bench out.`,
    );
    return undefined;
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error('loadtest failed:', err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
