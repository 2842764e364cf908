/**
 * The machine's CPU by process (loadtest/lib/process-cpu.ts): read from
 * /proc for a real process and the one it starts, counted once each; and
 * the servers' part of it per delta.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { withServersPerDelta } from '../../loadtest/lib/phase.js';
import { watchCpu } from '../../loadtest/lib/process-cpu.js';
import type { CpuBudget } from '../../loadtest/report/model.js';

const linux = process.platform === 'linux';

/**
 * A node process that starts a child; each burns CPU until it has used
 * `ms` of it, then says `done` and waits to be killed (no clock involved:
 * the CPU used is what both report).
 */
function burner(ms: number): ChildProcess {
  const burn = `const t=process.cpuUsage();while((process.cpuUsage(t).user+process.cpuUsage(t).system)/1000<${ms});`;
  const child = `${burn}process.stdout.write('done\\n');setInterval(()=>{},1e6);`;
  const parent =
    `const {spawn}=require('node:child_process');` +
    `const c=spawn(process.execPath,['-e',${JSON.stringify(child)}],{stdio:['ignore','pipe','inherit']});` +
    `c.stdout.once('data',()=>{${burn}process.stdout.write('done\\n');});` +
    `process.on('SIGTERM',()=>{c.kill();process.exit(0);});setInterval(()=>{},1e6);`;
  return spawn(process.execPath, ['-e', parent], { stdio: ['ignore', 'pipe', 'inherit'] });
}

describe.runIf(linux)('watchCpu', () => {
  let proc: ChildProcess | undefined;
  afterEach(() => {
    proc?.kill();
  });

  it('counts a process with what it started (tree) or alone, as percent of one core', async () => {
    proc = burner(300);
    const watch = watchCpu([
      { name: 'tree', pid: proc.pid!, tree: true },
      { name: 'alone', pid: proc.pid!, tree: false },
      { name: 'load test', pid: process.pid, tree: false },
    ]);
    await once(proc.stdout!, 'data');
    const used = watch.take()!;
    expect(used.cores).toBeGreaterThan(0);
    expect(used.parts.map((p) => p.name)).toEqual(['tree', 'alone', 'load test']);
    const [tree, alone] = used.parts;
    // Both burned ≥ 300 ms of CPU; the tree holds the child's burn as well as the parent's.
    expect(alone!.percent).toBeGreaterThan(0);
    expect(alone!.cpuS).toBeGreaterThanOrEqual(0.3);
    expect(tree!.percent).toBeGreaterThan(alone!.percent);
    expect(used.totalPercent).toBe(used.parts.reduce((s, p) => s + p.percent, 0));
  });

  it('gives the use since the last reading', async () => {
    proc = burner(200);
    const watch = watchCpu([{ name: 'alone', pid: proc.pid!, tree: false }]);
    await once(proc.stdout!, 'data');
    const first = watch.take()!;
    expect(first.parts[0]!.percent).toBeGreaterThan(0);
    // A process gone since (reaped): nothing of it is left to count, and no throw.
    proc.kill('SIGTERM');
    await once(proc, 'exit');
    const second = watch.take()!;
    expect(second.parts[0]!.percent).toBe(0);
  });
});

describe('withServersPerDelta', () => {
  const cpu: CpuBudget = {
    cores: 2,
    parts: [
      { name: 'server', percent: 40, cpuS: 2, server: true },
      { name: 'simulator', percent: 20, cpuS: 1 },
    ],
    totalPercent: 60,
  };

  it("divides the servers' CPU by the deltas of a phase that went through them", () => {
    expect(withServersPerDelta(cpu, 40_000, 'text').serversUsPerDelta).toBe(50);
    expect(withServersPerDelta(cpu, 0, 'text').serversUsPerDelta).toBeNull();
  });

  it('gives none for the direct phase, whose deltas skip the servers', () => {
    expect(withServersPerDelta(cpu, 40_000, 'direct')).not.toHaveProperty('serversUsPerDelta');
  });
});
