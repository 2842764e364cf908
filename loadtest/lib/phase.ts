/**
 * Phases of a load test: a fixed number of sessions for a while, or a
 * capacity search that adds sessions step by step. Each yields a
 * {@link PhaseReport}; a live progress line runs meanwhile.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CapacityResult, CapacityStep, CpuBudget, PhaseReport } from '../report/model.js';
import { LAG_RESOLUTION_MS, lagMs, splitPerDelta, summarizeGc } from './child-ipc.js';
import type { Child } from './children.js';
import { Pool, type PoolOptions, type SessionRunner } from './pool.js';
import { watchCpu, type CpuPart } from './process-cpu.js';
import type { Recorder } from './recorder.js';
import { percentile, round } from './stats.js';

/** Extra time sessions get to finish their turn when a phase ends. */
const STOP_GRACE_EXTRA_MS = 5_000;
/** Progress: a line a second on a terminal, one every 5 s in a log. */
const PROGRESS_TTY_MS = 1_000;
const PROGRESS_LOG_MS = 5_000;

/** What a phase runs. */
export interface PhaseSpec {
  name: string;
  scenario: PhaseReport['scenario'];
  pool: PoolOptions;
  runner: SessionRunner;
  sessions: number;
  rampMs: number;
  durationMs: number;
  /** The server the load test started, to report its CPU and lag. */
  server?: Child;
  /** The machine's processes (server, simulator, nginx, …), to report what each used. */
  cpuParts?: CpuPart[];
}

/**
 * Runs a phase: ramps up, holds until the duration has passed (ramp
 * included), lets the last turns finish and reports.
 *
 * @example const report = await runPhase({ name: 'text', scenario: 'text', pool, runner: runSession, sessions: 200, rampMs: 10_000, durationMs: 60_000 });
 */
export async function runPhase(spec: PhaseSpec): Promise<PhaseReport> {
  const pool = new Pool(spec.pool, spec.runner);
  const lag = startLag();
  await spec.server?.stats();
  const cpu = spec.cpuParts && watchCpu(spec.cpuParts);
  const begin = performance.now();
  const progress = startProgress(spec.name, pool, spec.sessions, begin, spec.durationMs);
  try {
    await pool.add(spec.sessions, spec.rampMs);
    const left = begin + spec.durationMs - performance.now();
    if (left > 0) await sleep(left);
  } finally {
    progress.stop();
    await pool.stop(spec.pool.turnTimeoutMs + STOP_GRACE_EXTRA_MS);
  }
  const seconds = (performance.now() - begin) / 1000;
  const used = cpu?.take();
  return phaseReport(spec, pool, pool.rec, seconds, lag, await spec.server?.stats(), used);
}

/** How a capacity search steps. */
export interface CapacitySpec {
  start: number;
  step: number;
  stepMs: number;
  maxSessions: number;
  limitMs: number;
}

/**
 * Adds sessions step by step (each step ramps, then is measured on its own
 * samples) until p95 added latency per delta passes the limit, errors
 * appear or the maximum is reached.
 *
 * @example const { result } = await findCapacity(spec, { start: 100, step: 100, stepMs: 15_000, maxSessions: 3000, limitMs: 10 });
 */
export async function findCapacity(
  spec: PhaseSpec,
  capacity: CapacitySpec,
): Promise<{ result: CapacityResult; phases: PhaseReport[] }> {
  const pool = new Pool(spec.pool, spec.runner);
  const steps: CapacityStep[] = [];
  const phases: PhaseReport[] = [];
  let best: number | null = null;
  let stoppedBecause = '';
  try {
    for (let target = capacity.start; ; target += capacity.step) {
      target = Math.min(target, capacity.maxSessions);
      const name = `capacity ${target}`;
      await pool.add(target - pool.started, spec.rampMs);
      // Samples of the ramp are not the step's: measure at full strength only.
      pool.swap();
      const lag = startLag();
      await spec.server?.stats();
      const cpu = spec.cpuParts && watchCpu(spec.cpuParts);
      const begin = performance.now();
      const progress = startProgress(name, pool, target, begin, capacity.stepMs);
      await sleep(capacity.stepMs);
      progress.stop();
      const rec = pool.swap();
      const seconds = (performance.now() - begin) / 1000;
      const used = cpu?.take();
      const report = phaseReport(
        { ...spec, name, sessions: target },
        pool,
        rec,
        seconds,
        lag,
        await spec.server?.stats(),
        used,
      );
      phases.push(report);
      const p95 = report.metrics.addedPerDelta?.p95 ?? null;
      const errors = rec.errorCount + pool.silentFailures;
      const pass = p95 !== null && p95 <= capacity.limitMs && errors === 0;
      steps.push({ sessions: target, p95AddedMs: p95, errors, pass });
      process.stderr.write(
        `\n${name}: p95 added ${p95 === null ? '—' : `${p95.toFixed(2)} ms`}, ${errors} error(s): ${pass ? 'pass' : 'fail'}\n`,
      );
      if (!pass) {
        stoppedBecause =
          p95 === null
            ? 'no added-latency samples: the LLM must be the simulator with stamps (--sim)'
            : errors > 0
              ? `${errors} error(s) at ${target} sessions (${[...rec.errors.keys()].join(', ') || 'sessions that did not open'})`
              : `p95 added latency ${p95.toFixed(2)} ms > ${capacity.limitMs} ms at ${target} sessions`;
        break;
      }
      best = target;
      if (target >= capacity.maxSessions) {
        stoppedBecause = `reached --max-sessions ${capacity.maxSessions} within the limit`;
        break;
      }
    }
  } finally {
    await pool.stop(spec.pool.turnTimeoutMs + STOP_GRACE_EXTRA_MS);
  }
  return {
    result: { sessions: best, stoppedBecause, limitP95AddedMs: capacity.limitMs, steps },
    phases,
  };
}

function startLag(): IntervalHistogram {
  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  lag.enable();
  return lag;
}

function phaseReport(
  spec: PhaseSpec,
  pool: Pool,
  rec: Recorder,
  seconds: number,
  lag: IntervalHistogram,
  server: Awaited<ReturnType<Child['stats']>> | undefined,
  machineCpu: CpuBudget | undefined,
): PhaseReport {
  lag.disable();
  const kinds = [...rec.errors];
  // A session that never opened is an error even when nothing else said so.
  if (pool.silentFailures > 0) kinds.push(['not_opened', pool.silentFailures]);
  const errors = Object.fromEntries(kinds.sort(([a], [b]) => a.localeCompare(b)));
  return {
    name: spec.name,
    scenario: spec.scenario,
    character: spec.scenario === 'direct' ? null : spec.pool.character,
    sessions: {
      target: spec.sessions,
      reached: pool.reached,
      peak: pool.peak,
      failed: pool.started - pool.reached,
    },
    durationS: round(seconds, 1),
    turns: { completed: rec.turnsCompleted, failed: rec.turnsFailed },
    activeTurns: (({ mean, peak }) => ({ mean: round(mean, 1), peak }))(rec.activeTurns()),
    deltasPerSec: round(rec.deltas / seconds, 0),
    deltaFramesPerSec: round(rec.deltaFrames / seconds, 0),
    metrics: rec.metrics(),
    errors,
    clientLagMs: {
      p50: round(lagMs(lag.percentile(50)), 2),
      p99: round(lagMs(lag.percentile(99)), 2),
      max: round(lagMs(lag.max), 2),
    },
    ...(server === undefined
      ? {}
      : {
          server: {
            cpuPercent: round(server.cpuPercent, 0),
            // The issue's measure of the hot path: server CPU seconds ÷ deltas forwarded.
            cpuUsPerDelta: rec.deltas > 0 ? round((server.cpuS * 1e6) / rec.deltas, 1) : null,
            ...(rec.deltas > 0 ? { cpuSplit: splitPerDelta(server, rec.deltas) } : {}),
            lagP99Ms: round(server.lagP99Ms, 2),
            lagMaxMs: round(server.lagMaxMs, 2),
            rssMiB: round(server.rssMiB, 0),
            gc: summarizeGc(server.gc, seconds),
          },
        }),
    ...(machineCpu === undefined
      ? {}
      : { machineCpu: withServersPerDelta(machineCpu, rec.deltas, spec.scenario) }),
  };
}

/**
 * The machine's CPU with the servers' CPU per delta (every part marked
 * `server`). Not for the direct phase: its deltas never pass through the
 * servers, which sit idle meanwhile.
 */
export function withServersPerDelta(
  cpu: CpuBudget,
  deltas: number,
  scenario: PhaseReport['scenario'],
): CpuBudget {
  const servers = cpu.parts.filter((p) => p.server === true);
  if (servers.length === 0 || scenario === 'direct') return cpu;
  const cpuS = servers.reduce((sum, p) => sum + p.cpuS, 0);
  return { ...cpu, serversUsPerDelta: deltas > 0 ? round((cpuS * 1e6) / deltas, 1) : null };
}

/**
 * The live progress line on stderr: time, sessions, turns, TTFT and added
 * latency over the last interval, errors.
 */
function startProgress(
  name: string,
  pool: Pool,
  target: number,
  begin: number,
  durationMs: number,
): { stop(): void } {
  const tty = process.stderr.isTTY === true;
  let rec = pool.rec;
  let seen = { ttft: 0, added: 0 };
  const tick = (): void => {
    if (pool.rec !== rec) {
      rec = pool.rec;
      seen = { ttft: 0, added: 0 };
    }
    const ttft = rec.samples.ttft.slice(seen.ttft).sort();
    const added = rec.samples.addedPerDelta.slice(seen.added).sort();
    seen = { ttft: seen.ttft + ttft.length, added: seen.added + added.length };
    const f = (v: number | null, d = 0): string => (v === null ? '—' : v.toFixed(d));
    const line =
      `[${name}] ${f((performance.now() - begin) / 1000)}/${f(durationMs / 1000)} s · ` +
      `sessions ${pool.open}/${target} · in turn ${pool.active} · turns ${rec.turnsCompleted} ok ${rec.turnsFailed} failed · ` +
      `TTFT p50 ${f(percentile(ttft, 0.5))} p95 ${f(percentile(ttft, 0.95))} ms · ` +
      `added p99 ${f(percentile(added, 0.99), 2)} ms · errors ${rec.errorCount}`;
    const width = Math.max(0, (process.stderr.columns ?? 0) - 1);
    process.stderr.write(tty ? `\r${line.slice(0, width).padEnd(width)}` : `${line}\n`);
  };
  const timer = setInterval(tick, tty ? PROGRESS_TTY_MS : PROGRESS_LOG_MS);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      if (tty) process.stderr.write('\n');
    },
  };
}
