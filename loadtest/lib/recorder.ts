/**
 * What the simulated users measure. A pool's sessions write into the current
 * recorder; a capacity search swaps in a fresh one at each step, so each
 * step is judged on its own samples.
 */
import type { PhaseMetrics } from '../report/model.js';
import { Samples, summarize } from './stats.js';

/** The metrics a recorder keeps, by their report names. */
export const METRIC_NAMES = [
  'ttft',
  'firstAudio',
  'turnDuration',
  'toolRoundOverhead',
  'addedPerDelta',
  'ttftExModel',
  'ttftExModelToolTurns',
  'ttftExModelOtherTurns',
  'ttftTroupe',
] as const satisfies ReadonlyArray<keyof PhaseMetrics>;
export type MetricName = (typeof METRIC_NAMES)[number];

/** Samples and counts of one measuring window. */
export class Recorder {
  readonly startedAt = performance.now();
  readonly samples: Record<MetricName, Samples> = {
    ttft: new Samples(),
    firstAudio: new Samples(),
    turnDuration: new Samples(),
    toolRoundOverhead: new Samples(),
    addedPerDelta: new Samples(),
    ttftExModel: new Samples(),
    ttftExModelToolTurns: new Samples(),
    ttftExModelOtherTurns: new Samples(),
    ttftTroupe: new Samples(),
  };
  readonly errors = new Map<string, number>();
  turnsCompleted = 0;
  turnsFailed = 0;
  /** The LLM's deltas the clients received (a frame joining several counts each: its stamps). */
  deltas = 0;
  /** Text delta frames the clients received. */
  deltaFrames = 0;
  /** Turns in flight (the pool counts them), the most at once, and their integral over time (turn·ms). */
  #active: number;
  #activePeak: number;
  #activeArea = 0;
  #activeSince = performance.now();

  /** @param active turns already in flight when this window opens */
  constructor(active = 0) {
    this.#active = active;
    this.#activePeak = active;
  }

  /** The pool's count of turns in flight changed. */
  noteActive(active: number): void {
    const now = performance.now();
    this.#activeArea += this.#active * (now - this.#activeSince);
    this.#activeSince = now;
    this.#active = active;
    if (active > this.#activePeak) this.#activePeak = active;
  }

  /** Turns in flight over the window so far: time-weighted mean and peak. */
  activeTurns(): { mean: number; peak: number } {
    const now = performance.now();
    const area = this.#activeArea + this.#active * (now - this.#activeSince);
    const span = now - this.startedAt;
    return { mean: span > 0 ? area / span : 0, peak: this.#activePeak };
  }

  /** Counts an error of a kind (`timeout`, `error:llm_error`, `closed:1013`, …). */
  error(kind: string): void {
    this.errors.set(kind, (this.errors.get(kind) ?? 0) + 1);
  }

  get errorCount(): number {
    let n = 0;
    for (const count of this.errors.values()) n += count;
    return n;
  }

  /** Summaries of the metrics; `ttft` and `turnDuration` always, the rest when sampled. */
  metrics(): PhaseMetrics {
    const out: PhaseMetrics = {
      ttft: summarize(this.samples.ttft.slice()),
      turnDuration: summarize(this.samples.turnDuration.slice()),
    };
    for (const name of METRIC_NAMES) {
      if (name === 'ttft' || name === 'turnDuration') continue;
      if (this.samples[name].size > 0) out[name] = summarize(this.samples[name].slice());
    }
    return out;
  }
}
