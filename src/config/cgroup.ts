/**
 * What the process's control group (its container) allows it: CPUs and
 * memory. Node's `availableParallelism()` ignores the CPU limit (a container
 * limited to 2 CPUs on a 64-core host would start 64 workers), and V8's heap
 * limit is per process, while the kernel kills at the container's memory
 * limit, which every process in it shares. Both cgroup v2 and v1 are read; a
 * limit set on a group above the process's own (a pod above its container)
 * counts too.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** v1 writes "no limit" as a number near 2^63 rounded down to a page. */
const V1_NO_LIMIT = 2 ** 60;

/**
 * The CPU limit of this process's control group and the groups above it,
 * in CPUs (1.5 = one and a half), or undefined when there is none or it
 * cannot be read (not Linux, no cgroup file system).
 */
export function cgroupCpuLimit(root = '/'): number | undefined {
  let lowest: number | undefined;
  for (const { dir, v1 } of groupDirs(root, 'cpu')) {
    const cpus = v1
      ? v1CpuLimit(read(dir, 'cpu.cfs_quota_us'), read(dir, 'cpu.cfs_period_us'))
      : v2CpuLimit(read(dir, 'cpu.max'));
    if (cpus !== undefined && cpus > 0 && (lowest === undefined || cpus < lowest)) lowest = cpus;
  }
  return lowest;
}

/** A control group's directory, and whether it is under cgroup v1. */
export interface CgroupDir {
  dir: string;
  v1: boolean;
}

/**
 * The group (this process's or one above it) with the lowest memory limit,
 * or undefined when no group has one or there is no cgroup file system.
 */
export function findMemoryGroup(root = '/'): CgroupDir | undefined {
  let found: CgroupDir | undefined;
  let lowest = Infinity;
  for (const group of groupDirs(root, 'memory')) {
    const limit = memoryLimit(group);
    if (limit !== undefined && limit < lowest) {
      lowest = limit;
      found = group;
    }
  }
  return found;
}

/**
 * The group's memory in use as Kubernetes and the kernel's reclaim see it
 * (the working set: usage less inactive file cache, which can be dropped)
 * and its limit, in bytes; undefined when they cannot be read.
 */
export function memoryUse(group: CgroupDir): { used: number; limit: number } | undefined {
  const limit = memoryLimit(group);
  const usage = Number(
    read(group.dir, group.v1 ? 'memory.usage_in_bytes' : 'memory.current')?.trim(),
  );
  if (limit === undefined || !Number.isFinite(usage)) return undefined;
  const stat = read(group.dir, 'memory.stat') ?? '';
  const key = group.v1 ? 'total_inactive_file' : 'inactive_file';
  const inactive = Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(stat)?.[1] ?? 0);
  return { used: Math.max(0, usage - inactive), limit };
}

function memoryLimit(group: CgroupDir): number | undefined {
  const text = read(group.dir, group.v1 ? 'memory.limit_in_bytes' : 'memory.max')?.trim();
  if (text === undefined || text === 'max') return undefined;
  const bytes = Number(text);
  return Number.isFinite(bytes) && bytes > 0 && bytes < V1_NO_LIMIT ? bytes : undefined;
}

/** `max 100000` (none) or `200000 100000` (2 CPUs). */
function v2CpuLimit(text: string | undefined): number | undefined {
  const [quota, period] = (text ?? '').trim().split(/\s+/);
  if (quota === undefined || quota === 'max' || period === undefined) return undefined;
  return Number(quota) / Number(period);
}

/** `-1` (none) or a quota over a period, both in µs. */
function v1CpuLimit(quota: string | undefined, period: string | undefined): number | undefined {
  const q = Number(quota?.trim());
  const p = Number(period?.trim());
  return Number.isFinite(q) && q > 0 && Number.isFinite(p) && p > 0 ? q / p : undefined;
}

/**
 * The directories of this process's group for `controller` and of each
 * group above it: under the v2 unified tree, or under the v1 mount that
 * holds the controller (`cpu` is mounted as `cpu,cpuacct` on most hosts).
 */
function groupDirs(root: string, controller: 'cpu' | 'memory'): CgroupDir[] {
  const own = read(root, 'proc/self/cgroup');
  if (own === undefined) return [];
  const dirs: CgroupDir[] = [];
  for (const line of own.split('\n')) {
    // `0::/path` (v2), `4:cpu,cpuacct:/path` (v1).
    const [, controllers, group] = /^\d+:([^:]*):(.*)$/.exec(line.trim()) ?? [];
    if (group === undefined) continue;
    if (controllers === '') {
      for (const dir of upward(path.join(root, 'sys/fs/cgroup'), group))
        dirs.push({ dir, v1: false });
    } else if (controllers?.split(',').includes(controller)) {
      const mounts = controller === 'cpu' ? ['cpu', 'cpu,cpuacct', 'cpuacct,cpu'] : ['memory'];
      for (const mount of mounts) {
        for (const dir of upward(path.join(root, 'sys/fs/cgroup', mount), group)) {
          dirs.push({ dir, v1: true });
        }
      }
    }
  }
  return dirs;
}

/** The group's directory under `mount` and each one above it, up to the mount itself. */
function upward(mount: string, group: string): string[] {
  const dirs: string[] = [];
  let rel = path.posix.normalize(`/${group}`);
  for (;;) {
    dirs.push(path.join(mount, rel));
    if (rel === '/') return dirs;
    rel = path.posix.dirname(rel);
  }
}

function read(dir: string, file: string): string | undefined {
  try {
    return readFileSync(path.join(dir, file), 'utf8');
  } catch {
    return undefined;
  }
}
