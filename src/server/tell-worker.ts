/**
 * A message from the primary to one of its workers that may have just died.
 */
import type { Worker } from 'node:cluster';

/**
 * Sends `message` to `worker`, and drops it if the worker's channel is gone
 * (a worker killed a moment ago, whose exit the primary has not seen yet).
 * Node's `send` without a callback raises that as an `error` event, an
 * uncaught exception in the primary; the worker's exit is handled where it
 * comes.
 *
 * @example tellWorker(worker, { troupe: 'shutdown' });
 */
export function tellWorker(worker: Worker | undefined, message: object): void {
  if (!worker?.isConnected()) return;
  worker.send(message, () => {});
}
