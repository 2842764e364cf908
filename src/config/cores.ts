/**
 * How many cores this process may use: the machine's (as Node sees them,
 * CPU affinity included), capped by the container's CPU limit. Node's
 * `os.availableParallelism()` does not read the limit: a container limited
 * to 2 CPUs on a 64-core host would otherwise start 64 workers, each with a
 * thread pool, and spend its quota switching between them.
 */
import { availableParallelism } from 'node:os';
import { cgroupCpuLimit } from './cgroup.js';

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
 * Set in each worker of an instance started with `WORKERS` > 1: how many
 * workers share the instance's cores.
 */
export const WORKER_COUNT_VARIABLE = 'TROUPE_WORKER_COUNT';

/**
 * This process's share of the cores, to size its speech engines' thread
 * pools by: the usable cores over the instance's workers, rounded up, at
 * least 1. One process gets every core; with `WORKERS=4` on 8 cores each
 * worker gets 2, so the machine runs 8 synthesis threads, not 32.
 *
 * @example const threads = coreShare(); // 1 in each of 2 workers on 2 cores
 */
export function coreShare(root = '/', machine = availableParallelism(), env = process.env): number {
  const workers = Number(env[WORKER_COUNT_VARIABLE]);
  const share = Number.isInteger(workers) && workers > 1 ? workers : 1;
  return Math.max(1, Math.ceil(usableCores(root, machine) / share));
}
