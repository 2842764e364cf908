/**
 * How full this process's memory is. Sessions may each hold a conversation
 * of up to 32 MiB: near V8's heap limit a process that takes more dies out
 * of memory, with every session on it, and in a container the kernel kills
 * it at the container's limit, which V8 does not know. The overload guard
 * refuses new sessions first (`OVERLOAD_HEAP`, `OVERLOAD_MEMORY`); past
 * {@link ITEM_HEAP_SHARE} open sessions take no more client items either.
 */
import { getHeapStatistics } from 'node:v8';
import { findMemoryGroup, memoryUse, type CgroupDir } from '../config/cgroup.js';

/**
 * The heap's (or the container's) share of its limit past which
 * `conversation.item.create` is refused: above the guard's default for new
 * sessions (0.85), so a busy but healthy server never gets here, and short
 * of the limit, so refusing is still possible.
 */
export const ITEM_HEAP_SHARE = 0.9;

/** The container's share is read from files at most this often. */
const CONTAINER_READ_MS = 100;

/** The share (0–1) of V8's heap limit in use now, garbage not yet collected included. */
export function heapShare(): number {
  const h = getHeapStatistics();
  return h.used_heap_size / h.heap_size_limit;
}

/**
 * A reader of the container's memory: the share (0–1) of its limit in use,
 * as the kernel counts it for every process in the container (a cluster's
 * workers and primary together), or 0 when there is no limit. The group is
 * found once; its files are read at most every 100 ms.
 *
 * @param root where `/proc` and `/sys` are (tests); `/` by default.
 */
export function containerMemory(root = '/'): () => number {
  let group: CgroupDir | null | undefined;
  let readAt = -Infinity;
  let share = 0;
  return () => {
    // Looked up once: null (no limit) is an answer, not a reason to look again.
    if (group === undefined) group = findMemoryGroup(root) ?? null;
    if (group === null) return 0;
    const now = performance.now();
    if (now - readAt >= CONTAINER_READ_MS) {
      const use = memoryUse(group);
      share = use ? use.used / use.limit : 0;
      readAt = now;
    }
    return share;
  };
}

/** This process's container: the share of its memory limit in use (0 without one). */
export const containerShare = containerMemory();

/** The larger of the heap's and the container's shares: what refuses a client's items. */
export function memoryShare(): number {
  return Math.max(heapShare(), containerShare());
}
