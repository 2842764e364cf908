/**
 * The load-test report: what `npm run loadtest` writes as JSON and renders as
 * HTML, and what the engine bench adds to it. Plain data, JSON-serialisable.
 */

/** A latency distribution, in milliseconds. Every value is null when n is 0. */
export interface Distribution {
  n: number;
  min: number | null;
  mean: number | null;
  p50: number | null;
  p90: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
  /**
   * Log-spaced histogram: `counts[i]` samples fell in `[edges[i], edges[i+1])`
   * (the last bin includes its upper edge). Empty when n is 0.
   */
  histogram: { edges: number[]; counts: number[] };
  /** The empirical CDF as `[value ms, fraction ≤ value]` points, fraction rising to 1. */
  cdf: Array<[number, number]>;
}

/** The metrics a phase measures; absent ones were not measurable in that phase. */
export interface PhaseMetrics {
  /** Turn start (user message sent) → first text (or transcript) delta received. */
  ttft: Distribution;
  /** Voice: end of the user's speech → first audio delta received. */
  firstAudio?: Distribution;
  /** Turn start → `response.done` received. */
  turnDuration: Distribution;
  /** Stream end of a tool round → request of the next round, handler time excluded (server-measured). */
  toolRoundOverhead?: Distribution;
  /** Text delta received − its send time stamped by the simulator. */
  addedPerDelta?: Distribution;
  /** TTFT with the model's own time in tool rounds taken out (compare baseline). */
  ttftExModel?: Distribution;
  /** `ttftExModel` of the turns that had a tool round before their text. */
  ttftExModelToolTurns?: Distribution;
  /** `ttftExModel` of the turns without one (all of a phase without tools). */
  ttftExModelOtherTurns?: Distribution;
  /**
   * `ttftExModel` less the model's own time to first token in the round
   * that spoke (server-measured): Troupe's part of the TTFT, the wire's
   * included, with the simulator's variance taken out.
   */
  ttftTroupe?: Distribution;
}

/** What ran in a phase and how it went. */
export interface PhaseReport {
  /** Unique within a report, e.g. "tools", "plain", "direct", "capacity 400". */
  name: string;
  scenario: 'text' | 'tools' | 'plain' | 'voice' | 'direct';
  /** Character id asked for; null for the direct phase. */
  character: string | null;
  /** Sessions asked for, opened successfully, the most open at once, and those that failed to open. */
  sessions: { target: number; reached: number; peak: number; failed: number };
  /** Wall time of the phase, ramp included, seconds. */
  durationS: number;
  turns: { completed: number; failed: number };
  /** Turns in flight (the user waiting for or receiving a reply): time-weighted mean and peak. */
  activeTurns: { mean: number; peak: number };
  /** The LLM's text deltas received per second over the phase. */
  deltasPerSec: number;
  /** Text delta frames received per second (fewer than the deltas when a send window joins them). */
  deltaFramesPerSec?: number;
  metrics: PhaseMetrics;
  /** Errors by kind (e.g. `connect`, `timeout`, `error:llm_error`, `closed:1013`, `lost_text`). */
  errors: Record<string, number>;
  /** Event-loop delay of the load-test client itself: large values make every number suspect. */
  clientLagMs: { p50: number; p99: number; max: number };
  /** The server's CPU use and event-loop delay, when the load test started the server (`--sim`). */
  server?: {
    cpuPercent: number;
    /** Server CPU time ÷ text deltas the clients received, µs (null without deltas). */
    cpuUsPerDelta?: number | null;
    /** The same split: user and system, and what ran off the main thread (absent in older reports, and without deltas). */
    cpuSplit?: CpuSplit;
    lagP99Ms: number;
    lagMaxMs: number;
    rssMiB: number;
    /** Garbage-collection pauses over the phase (absent in reports of older runs). */
    gc?: GcSummary;
  };
  /**
   * What each process on the machine used over the phase (`--sim` or
   * `--instances`/`--workers`, on Linux): the server (its workers too), the
   * simulator, nginx, Redis and the load test itself. On a shared machine
   * the server's capacity is what the others leave it.
   */
  machineCpu?: CpuBudget;
}

/** A server's CPU per delta, µs, split: `userUs` + `systemUs` is the whole; `offMainUs` is the part of it off the main thread (Linux only). */
export interface CpuSplit {
  userUs: number;
  systemUs: number;
  offMainUs?: number;
}

/** The machine's CPU over a phase, by process. */
export interface CpuBudget {
  cores: number;
  /**
   * Each process (with what it started, for a server's workers): CPU time ÷
   * wall time, percent of one core, and its CPU seconds.
   */
  parts: Array<{ name: string; percent: number; cpuS: number; server?: boolean }>;
  /** All of them together, percent of one core (the machine has `cores` × 100). */
  totalPercent: number;
  /**
   * The servers' CPU time (every part marked `server`) ÷ text deltas the clients
   * received, µs: the CPU per delta of a run whose servers are `npm start`
   * processes (`--workers`, `--instances`), primary and workers together.
   */
  serversUsPerDelta?: number | null;
}

/** A server's garbage-collection pauses over a phase. */
export interface GcSummary {
  minorPerS: number;
  minorMeanMs: number;
  minorMaxMs: number;
  majorCount: number;
  majorMaxMs: number;
  /** Share of the phase's wall time the event loop spent paused for GC, percent. */
  pausePercent: number;
}

/** A stated goal and whether the run met it. */
export interface TargetCheck {
  name: string;
  value: number | null;
  target: number;
  /** How value must relate to target to pass. */
  op: '≤' | '≥';
  unit: string;
  pass: boolean;
}

/** Two phases side by side on one statistic. */
export interface Comparison {
  /** E.g. "tools vs plain". */
  name: string;
  /** E.g. "TTFT p95". */
  metric: string;
  /** Phase names: `subject` is measured against `baseline`. */
  subject: string;
  baseline: string;
  subjectValue: number | null;
  baselineValue: number | null;
  /** subject ÷ baseline. */
  ratio: number | null;
  /** Percent increase: (ratio − 1) × 100. */
  increasePct: number | null;
}

/** One step of `--find-capacity`. */
export interface CapacityStep {
  sessions: number;
  /** p95 added latency per delta over the step, ms. */
  p95AddedMs: number | null;
  errors: number;
  pass: boolean;
}

/** The outcome of `--find-capacity`. */
export interface CapacityResult {
  /** Sessions at the last passing step; null when even the first failed. */
  sessions: number | null;
  /** Why the search stopped. */
  stoppedBecause: string;
  limitP95AddedMs: number;
  steps: CapacityStep[];
}

/** The engine bench's numbers (see loadtest/engine-bench.ts). */
export interface EngineBenchSection {
  generatedAt: string;
  assembler: Array<{ shape: string; chunksPerPass: number; mChunksPerSec: number }>;
  overhead: {
    targetP99Ms: number;
    rows: Array<{
      label: string;
      ms: { p50: number; p90: number; p99: number; max: number };
      failures: number;
    }>;
  };
  headToHead: {
    results: Array<{
      label: string;
      cpuUs: { p50: number; mean: number; p90: number };
      wallMs: { p50: number; mean: number; p90: number };
      failures: number;
    }>;
    /** Troupe's mean CPU per turn ÷ the better of the other engines. */
    vsBetter: number;
    betterEngine: string;
    targetRatio: number;
  };
}

/** The whole report. */
export interface LoadtestReport {
  kind: 'troupe-loadtest';
  version: 1;
  generatedAt: string;
  /** The command line, for rerunning. */
  command: string;
  machine: { cpuModel: string; cpus: number; memGiB: number; node: string; platform: string };
  target: {
    /** WebSocket URL driven. */
    url: string;
    /** The simulator's latency model when `--sim` started it, else null (any LLM). */
    sim: { ttftMs: number; tokensPerSec: number; jitterMs: number; profile: string } | null;
  };
  phases: PhaseReport[];
  comparisons: Comparison[];
  targets: TargetCheck[];
  capacity?: CapacityResult;
  engineBench?: EngineBenchSection;
  /** With `--resume`/`--kill-one`: sessions the server closed that reconnected with their token. */
  resume?: {
    resumed: number;
    /** Reconnections that got a fresh session (or none): conversations lost. */
    failed: number;
    /** Reconnect → first text delta of the next reply. */
    p50Ms: number | null;
    p95Ms: number | null;
    maxMs: number | null;
    /** Reconnections refused before their session opened, tried again. */
    retries: number;
    /** Connections lost while their reply streamed (some of its text had come). */
    cutMidReply: number;
    /** Resumed conversations that ended with that reply, cut where its last write left it. */
    repliesKept: number;
    /** Connections lost while their reply was past a round of the server's tools. */
    toolsMidReply: number;
    /** Resumed conversations that ended with such a round: its calls and their results. */
    toolRoundsKept: number;
    /** Where the time went: lost → open, → session.created, → next turn asked, → first delta. */
    splits: Record<
      'connect' | 'restore' | 'ask' | 'reply',
      { p50Ms: number | null; p95Ms: number | null; maxMs: number | null }
    >;
  };
}
