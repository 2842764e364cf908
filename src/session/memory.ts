/**
 * How full this process's JavaScript heap is. Sessions may each hold a
 * conversation of up to 32 MiB: near V8's heap limit a process that takes
 * more dies out of memory, with every session on it. The overload guard
 * refuses new sessions first (`OVERLOAD_HEAP`); past {@link ITEM_HEAP_SHARE}
 * open sessions take no more client items either.
 */
import { getHeapStatistics } from 'node:v8';

/**
 * The heap's share of its limit past which `conversation.item.create` is
 * refused: above the guard's default for new sessions (0.85), so a busy but
 * healthy server never gets here, and short of the limit, so refusing is
 * still possible.
 */
export const ITEM_HEAP_SHARE = 0.9;

/** The share (0–1) of V8's heap limit in use now, garbage not yet collected included. */
export function heapShare(): number {
  const h = getHeapStatistics();
  return h.used_heap_size / h.heap_size_limit;
}
