/**
 * What each part of a load test's machine used: the CPU time of the server
 * (its workers too), the simulator, nginx, Redis and the load test itself
 * over a phase, read from Linux's `/proc`. On a machine the parts share,
 * the server's capacity is what the others leave it: this says how much
 * that was.
 */
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import type { CpuBudget } from '../report/model.js';

/** `/proc` counts CPU time in these (USER_HZ, 100 on every Linux). */
const TICKS_PER_S = 100;

/** A part of the machine: a process, with or without the processes it started. */
export interface CpuPart {
  name: string;
  pid: number;
  /** Count the processes it started too (a server's workers). */
  tree: boolean;
  /** A Troupe server: counted in the servers' CPU per delta. */
  server?: boolean;
}

/** Reads what the parts used; `take()` gives the use since the last call and restarts. */
export interface CpuWatch {
  take(): CpuBudget | undefined;
}

interface ProcStat {
  ppid: number;
  ticks: number;
}

/** Every process's parent and CPU ticks (user + system), or undefined off Linux. */
function readProcs(): Map<number, ProcStat> | undefined {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const procs = new Map<number, ProcStat>();
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = parseStat(name);
    if (stat) procs.set(Number(name), stat);
  }
  return procs;
}

/**
 * CPU seconds (user + system) the main thread of process `pid` has used, or
 * undefined off Linux: the rest of the process's time is V8's helper threads
 * (concurrent marking, parallel scavenges) and libuv's pool.
 *
 * @example const before = mainThreadCpuS(process.pid);
 */
export function mainThreadCpuS(pid: number): number | undefined {
  const stat = parseStat(`${pid}/task/${pid}`);
  return stat === undefined ? undefined : stat.ticks / TICKS_PER_S;
}

/** `/proc/PID/stat` (or a thread's, `PID/task/TID`): the command name may hold spaces and parentheses, so fields count from its last `)`. */
function parseStat(pid: string): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // gone since the listing
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // After the name: state, ppid, …; utime and stime are the 12th and 13th.
  const ppid = Number(fields[1]);
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ppid) && Number.isFinite(ticks) ? { ppid, ticks } : undefined;
}

/** The pids of a part: the process, and with `tree` every descendant alive now. */
function pidsOf(part: CpuPart, procs: Map<number, ProcStat>): number[] {
  const out = [part.pid];
  if (!part.tree) return out;
  const children = new Map<number, number[]>();
  for (const [pid, { ppid }] of procs) {
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]!) ?? []));
  return out;
}

/**
 * Watches the parts' CPU from now on. A process that starts between two
 * readings counts from zero; one that exits loses what it used since the
 * last reading (a worker replaced mid-phase).
 *
 * @example const watch = watchCpu([{ name: 'server', pid: server.pid, tree: true }]);
 * // … the phase …
 * console.log(watch.take());
 */
export function watchCpu(parts: readonly CpuPart[]): CpuWatch {
  let last = readTicks(parts);
  let at = performance.now();
  return {
    take() {
      const now = readTicks(parts);
      const end = performance.now();
      const before = last;
      const seconds = (end - at) / 1000;
      last = now;
      at = end;
      if (now === undefined || before === undefined || seconds <= 0) return undefined;
      const shares = parts.map((part, i) => {
        let ticks = 0;
        for (const [pid, t] of now[i]!) ticks += t - (before[i]!.get(pid) ?? 0);
        const cpuS = ticks / TICKS_PER_S;
        const percent = Math.round((cpuS / seconds) * 100);
        return { name: part.name, percent, cpuS, ...(part.server ? { server: true } : {}) };
      });
      return {
        cores: os.availableParallelism(),
        parts: shares,
        totalPercent: shares.reduce((sum, s) => sum + s.percent, 0),
      };
    },
  };
}

/** Each part's ticks by pid, now. */
function readTicks(parts: readonly CpuPart[]): Array<Map<number, number>> | undefined {
  const procs = readProcs();
  if (procs === undefined) return undefined;
  return parts.map((part) => {
    const ticks = new Map<number, number>();
    for (const pid of pidsOf(part, procs)) {
      const stat = procs.get(pid);
      if (stat) ticks.set(pid, stat.ticks);
    }
    return ticks;
  });
}
