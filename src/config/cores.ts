/**
 * How many cores this process may use: the machine's (as Node sees them,
 * CPU affinity included), capped by the container's CPU limit. Node's
 * `os.availableParallelism()` does not read the limit: a container limited
 * to 2 CPUs on a 64-core host would otherwise start 64 workers, each with a
 * thread pool, and spend its quota switching between them.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';

/**
 * The cores to size pools and workers by: at least 1, at most the machine's,
 * and no more than the CPU limit (cgroup v2 `cpu.max`, or v1
 * `cpu.cfs_quota_us` / `cpu.cfs_period_us`) rounded up.
 *
 * @param root where `/proc` and `/sys` are (tests); `/` by default.
 * @example const workers = usableCores(); // 2 in a pod with `limits.cpu: 2`
 */
export function usableCores(root = '/', machine = availableParallelism()): number {
  const limit = cgroupCpuLimit(root);
  return Math.max(1, limit === undefined ? machine : Math.min(machine, Math.ceil(limit)));
}

/**
 * The CPU limit of this process's control group and the groups above it,
 * in CPUs (1.5 = one and a half), or undefined when there is none or it
 * cannot be read (not Linux, no cgroup file system).
 */
export function cgroupCpuLimit(root = '/'): number | undefined {
  const own = read(path.join(root, 'proc/self/cgroup'));
  if (own === undefined) return undefined;
  let lowest: number | undefined;
  const take = (cpus: number | undefined): void => {
    if (cpus !== undefined && cpus > 0 && (lowest === undefined || cpus < lowest)) lowest = cpus;
  };
  for (const line of own.split('\n')) {
    // `0::/path` (v2), `4:cpu,cpuacct:/path` (v1).
    const [, controllers, group] = /^\d+:([^:]*):(.*)$/.exec(line.trim()) ?? [];
    if (group === undefined) continue;
    if (controllers === '') {
      for (const dir of upward(path.join(root, 'sys/fs/cgroup'), group)) {
        take(v2Limit(read(path.join(dir, 'cpu.max'))));
      }
    } else if (controllers?.split(',').includes('cpu')) {
      for (const mount of ['cpu', 'cpu,cpuacct', 'cpuacct,cpu']) {
        for (const dir of upward(path.join(root, 'sys/fs/cgroup', mount), group)) {
          take(
            v1Limit(
              read(path.join(dir, 'cpu.cfs_quota_us')),
              read(path.join(dir, 'cpu.cfs_period_us')),
            ),
          );
        }
      }
    }
  }
  return lowest;
}

/** `max 100000` (none) or `200000 100000` (2 CPUs). */
function v2Limit(text: string | undefined): number | undefined {
  const [quota, period] = (text ?? '').trim().split(/\s+/);
  if (quota === undefined || quota === 'max' || period === undefined) return undefined;
  return Number(quota) / Number(period);
}

/** `-1` (none) or a quota over a period, both in µs. */
function v1Limit(quota: string | undefined, period: string | undefined): number | undefined {
  const q = Number(quota?.trim());
  const p = Number(period?.trim());
  return Number.isFinite(q) && q > 0 && Number.isFinite(p) && p > 0 ? q / p : undefined;
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

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
