/** The load test's final table on stdout: phases, comparisons, capacity, targets. */
import { METRICS, formatMs } from './format.js';
import type { CpuBudget, CpuSplit, Distribution, GcSummary, LoadtestReport } from './model.js';

function row(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
}

function distributionRow(title: string, d: Distribution): string[] {
  return [
    title,
    String(d.n),
    formatMs(d.p50),
    formatMs(d.p90),
    formatMs(d.p95),
    formatMs(d.p99),
    formatMs(d.max),
  ];
}

/**
 * Prints the report as tables.
 *
 * @example printReport(report)
 */
export function printReport(report: LoadtestReport): void {
  const out: string[] = [];
  const m = report.machine;
  const sim = report.target.sim;
  out.push(
    `\nTroupe load test — ${m.cpuModel} × ${m.cpus}, Node ${m.node}; ` +
      (sim === null
        ? `target ${report.target.url} (any LLM)`
        : `simulator: TTFT ${sim.ttftMs} ms, ${sim.tokensPerSec} tokens/s, jitter ±${sim.jitterMs} ms, ${sim.profile}`),
  );
  const widths = [38, 8, 9, 9, 9, 9, 9];
  for (const p of report.phases) {
    const s = p.sessions;
    out.push(
      '',
      `${p.name} (${p.scenario}${p.character === null ? '' : `, ${p.character}`}): ` +
        `sessions ${s.reached}/${s.target} reached, peak ${s.peak}, ${s.failed} failed · ` +
        `${p.durationS} s · turns ${p.turns.completed} ok, ${p.turns.failed} failed, ` +
        `in flight ${p.activeTurns.mean} mean ${p.activeTurns.peak} peak · ${p.deltasPerSec} deltas/s` +
        (p.deltaFramesPerSec === undefined || p.deltaFramesPerSec === p.deltasPerSec
          ? ''
          : ` in ${p.deltaFramesPerSec} frames/s`),
    );
    out.push(row(['ms', 'n', 'p50', 'p90', 'p95', 'p99', 'max'], widths));
    for (const { key, title } of METRICS) {
      const d = p.metrics[key];
      if (d !== undefined && d.n > 0) out.push(row(distributionRow(title, d), widths));
    }
    const errors = Object.entries(p.errors);
    out.push(
      `errors: ${errors.length === 0 ? 'none' : errors.map(([k, n]) => `${k} ${n}`).join(', ')}` +
        ` · client lag p99 ${formatMs(p.clientLagMs.p99)} ms` +
        (p.server === undefined
          ? ''
          : ` · server CPU ${p.server.cpuPercent}%` +
            (p.server.cpuUsPerDelta == null
              ? ''
              : ` (${p.server.cpuUsPerDelta} µs per delta${splitText(p.server.cpuSplit)})`) +
            `, lag p99 ${formatMs(p.server.lagP99Ms)} ms, ${p.server.rssMiB} MiB` +
            (p.server.gc === undefined ? '' : ` · ${gcLine(p.server.gc)}`)),
    );
    // The servers' CPU per delta, where the server line above does not give it (`--workers`, `--instances`).
    if (p.machineCpu !== undefined) out.push(cpuLine(p.machineCpu, p.server === undefined));
  }
  if (report.comparisons.length > 0) {
    out.push('', 'comparisons');
    for (const c of report.comparisons) {
      const pct =
        c.increasePct === null
          ? '—'
          : `${c.increasePct >= 0 ? '+' : ''}${c.increasePct.toFixed(2)}%`;
      out.push(
        `  ${c.metric}: ${c.subject} ${formatMs(c.subjectValue)} ms vs ${c.baseline} ${formatMs(c.baselineValue)} ms` +
          ` → ×${c.ratio === null ? '—' : c.ratio.toFixed(4)} (${pct})`,
      );
    }
  }
  if (report.capacity !== undefined) {
    const c = report.capacity;
    out.push('', `capacity: ${c.sessions ?? 'none'} sessions — stopped: ${c.stoppedBecause}`);
    for (const s of c.steps) {
      out.push(
        `  ${String(s.sessions).padStart(6)} sessions  p95 added ${formatMs(s.p95AddedMs).padStart(8)} ms  errors ${s.errors}  ${s.pass ? 'pass' : 'FAIL'}`,
      );
    }
  }
  if (report.targets.length > 0) {
    out.push('', 'targets');
    for (const t of report.targets) {
      const v =
        t.value === null
          ? '—'
          : t.unit === 'ms'
            ? formatMs(t.value)
            : String(Number(t.value.toFixed(4)));
      out.push(
        `  ${t.pass ? 'PASS' : 'FAIL'}  ${t.name}: ${v} ${t.op} ${t.target}${t.unit === '' ? '' : ` ${t.unit}`}`,
      );
    }
  }
  console.log(out.join('\n'));
}

/** A server's garbage collection over a phase, in one line. */
export function gcLine(gc: GcSummary): string {
  return (
    `GC ${gc.pausePercent}% of the time: ${gc.minorPerS} scavenges/s of ${formatMs(gc.minorMeanMs)} ms ` +
    `(max ${formatMs(gc.minorMaxMs)}), ${gc.majorCount} major (max ${formatMs(gc.majorMaxMs)} ms)`
  );
}

/**
 * The split of a server's CPU per delta, e.g. `: 70.1 user + 18.2 system, 9.4 off the main thread`
 * (empty for reports without it).
 */
export function splitText(split: CpuSplit | undefined): string {
  if (split === undefined) return '';
  const off = split.offMainUs === undefined ? '' : `, ${split.offMainUs} off the main thread`;
  return `: ${split.userUs} user + ${split.systemUs} system${off}`;
}

/** What each process on the machine used, e.g. `machine CPU: server 29%, simulator 21%, load test 11% · 61% of 200% (2 cores)`. */
function cpuLine(cpu: CpuBudget, perDelta: boolean): string {
  const parts = cpu.parts.map((p) => `${p.name} ${p.percent}%`).join(', ');
  const servers =
    !perDelta || cpu.serversUsPerDelta == null
      ? ''
      : ` · servers ${cpu.serversUsPerDelta} µs per delta`;
  return `machine CPU: ${parts} · ${cpu.totalPercent}% of ${cpu.cores * 100}% (${cpu.cores} cores)${servers}`;
}
