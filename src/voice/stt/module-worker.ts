/**
 * Starting a worker thread whose entry is a TypeScript module. Troupe runs
 * from source through tsx (`npm start`) and under vitest; neither makes a
 * worker's `.ts` entry loadable by itself: on Node 20 a worker does not get
 * the parent's loader hooks for its entry, even with `--import tsx` in its
 * `execArgv` (measured: "Unknown file extension .ts"). So the worker starts
 * from a two-line bootstrap that registers tsx in the worker, then imports
 * the entry. Compiled `.js` entries start directly.
 */
import { Worker } from 'node:worker_threads';
import type { WorkerOptions } from 'node:worker_threads';

/**
 * Starts `entry` (a `.ts` or `.js` module URL) in a worker thread.
 *
 * @example
 * const worker = startModuleWorker(new URL('./pocketsphinx-worker.ts', import.meta.url), {
 *   workerData: { libraryPath },
 * });
 */
export function startModuleWorker(entry: URL, options: WorkerOptions = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  const tsxApi = import.meta.resolve('tsx/esm/api');
  // An eval worker runs as a CommonJS script, where dynamic import() is allowed.
  const bootstrap =
    `import(${JSON.stringify(tsxApi)})` +
    `.then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(bootstrap, { ...options, eval: true });
}
