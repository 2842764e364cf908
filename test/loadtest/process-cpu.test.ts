/**
 * The machine's CPU by process (loadtest/lib/process-cpu.ts): read from
 * /proc for a real process and the one it starts, counted once each; and
 * the servers' part of it per delta.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { splitPerDelta } from '../../loadtest/lib/child-ipc.js';
import { withServersPerDelta } from '../../loadtest/lib/phase.js';
import { mainThreadCpuS, watchCpu } from '../../loadtest/lib/process-cpu.js';
import type { CpuBudget } from '../../loadtest/report/model.js';

const linux = process.platform === 'linux';

/** Script that burns `ms` of the process's CPU (user + system), then goes on. */
const burn = (ms: number): string =>
  `const t=process.cpuUsage();while((process.cpuUsage(t).user+process.cpuUsage(t).system)/1000<${ms});`;

/**
 * A node process that starts a child; each burns CPU until it has used
 * `ms` of it, then says `done` and waits to be killed (no clock involved:
 * the CPU used is what both report).
 */
function burner(ms: number): ChildProcess {
  const child = `${burn(ms)}process.stdout.write('done\\n');setInterval(()=>{},1e6);`;
  const parent =
    `const {spawn}=require('node:child_process');` +
    `const c=spawn(process.execPath,['-e',${JSON.stringify(child)}],{stdio:['ignore','pipe','inherit']});` +
    `c.stdout.once('data',()=>{${burn(ms)}process.stdout.write('done\\n');});` +
    `process.on('SIGTERM',()=>{c.kill();process.exit(0);});setInterval(()=>{},1e6);`;
  return spawn(process.execPath, ['-e', parent], { stdio: ['ignore', 'pipe', 'inherit'] });
}

/**
 * A node process whose worker thread burns `workerMs` of CPU while the main
 * thread waits (blocked, using none), then its main thread burns `mainMs`;
 * says `done` and waits to be killed.
 */
function threadBurner(workerMs: number, mainMs: number): ChildProcess {
  const worker =
    `const {workerData}=require('node:worker_threads');${burn(workerMs)}` +
    `const a=new Int32Array(workerData);Atomics.store(a,0,1);Atomics.notify(a,0);`;
  const script =
    `const {Worker}=require('node:worker_threads');const sab=new SharedArrayBuffer(4);` +
    `new Worker(${JSON.stringify(worker)},{eval:true,workerData:sab});` +
    `Atomics.wait(new Int32Array(sab),0,0);${burn(mainMs)}` +
    `process.stdout.write('done\\n');setInterval(()=>{},1e6);`;
  return spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
}

describe.runIf(linux)('watchCpu and mainThreadCpuS', () => {
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

  it("reads the main thread's CPU apart from the process's other threads", async () => {
    proc = threadBurner(300, 100);
    const watch = watchCpu([{ name: 'all', pid: proc.pid!, tree: false }]);
    await once(proc.stdout!, 'data');
    const all = watch.take()!.parts[0]!.cpuS;
    const main = mainThreadCpuS(proc.pid!)!;
    expect(main).toBeGreaterThanOrEqual(0.1);
    // The worker's burn is in the process's time and not in the main thread's.
    expect(all - main).toBeGreaterThanOrEqual(0.1);
  });

  it('gives undefined for a process that is not there', () => {
    expect(mainThreadCpuS(2 ** 30)).toBeUndefined();
  });
});

describe('splitPerDelta', () => {
  const stats = {
    cpuPercent: 50,
    cpuS: 10,
    systemS: 2,
    lagP99Ms: 1,
    lagMaxMs: 2,
    rssMiB: 100,
    gc: { minorCount: 0, minorMeanMs: 0, minorMaxMs: 0, majorCount: 0, majorMaxMs: 0, totalMs: 0 },
  };

  it('splits CPU per delta into user and system, and what ran off the main thread', () => {
    expect(splitPerDelta({ ...stats, mainThreadS: 9 }, 100_000)).toEqual({
      userUs: 80,
      systemUs: 20,
      offMainUs: 10,
    });
  });

  it('says nothing of threads where the main thread could not be read', () => {
    expect(splitPerDelta(stats, 100_000)).toEqual({ userUs: 80, systemUs: 20 });
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
