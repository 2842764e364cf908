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
