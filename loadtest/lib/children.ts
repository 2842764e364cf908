/**
 * The processes a load test or bench starts: the LLM simulator and the
 * Troupe server, each in its own node process (so each gets a core of its
 * own on a 2-core machine), talking to the parent over IPC.
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SimulatorOptions } from '../../src/testing/simulator/index.js';
import type { ChildStats, FromChild, ToChild } from './child-ipc.js';
import { npmStartFlags } from './engines.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** How long a child may take to say it is ready. */
const READY_TIMEOUT_MS = 30_000;
/** How long a child may take to exit after being asked to stop. */
const STOP_TIMEOUT_MS = 15_000;

/** A started child process. */
export interface Child {
  /** The URL the child serves: the simulator's `…/v1`, the server's `ws://…/v1/realtime`. */
  url: string;
  /** The child's process id. */
  pid: number;
  /** CPU use and event-loop delay since the last call (or since start). */
  stats(): Promise<ChildStats>;
  /** Asks the child to stop and waits for it to exit (then kills it). */
  close(): Promise<void>;
}

/** Options of {@link startServerChild}. */
export interface ServerChildOptions {
  /** Environment of the server: the same variables as `npm start` reads. */
  env: Record<string, string>;
  /** Write a V8 CPU profile (`node --cpu-prof`) into this directory on exit. */
  cpuProfDir?: string;
}

/**
 * Starts the simulator in its own process.
 *
 * @example const sim = await startSimChild({ latency: { ttftMs: 200 }, stamp: true });
 */
export function startSimChild(options: SimulatorOptions): Promise<Child> {
  return startChild('sim-child.ts', { options });
}

/**
 * Starts a Troupe server in its own process.
 *
 * @example const server = await startServerChild({ env: { LLM_BASE_URL: sim.url } });
 */
export function startServerChild(options: ServerChildOptions): Promise<Child> {
  // The heap `npm start` gives the server (fewer collections per delta).
  const execArgv = npmStartFlags();
  if (options.cpuProfDir !== undefined) {
    execArgv.push('--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`);
  }
  return startChild('server-child.ts', { env: options.env }, execArgv);
}

/**
 * Starts the floor forwarder (floor-child.ts) in its own process: node:http
 * in, `ws` out, nothing else.
 *
 * @example const floor = await startFloorChild(sim.url);
 */
export function startFloorChild(llmUrl: string, cpuProfDir?: string): Promise<Child> {
  // The same heap as Troupe's server: the two differ in their code alone.
  const execArgv = npmStartFlags();
  if (cpuProfDir !== undefined) execArgv.push('--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`);
  return startChild('floor-child.ts', { llmUrl }, execArgv);
}

async function startChild(file: string, init: unknown, execArgv: string[] = []): Promise<Child> {
  const child: ChildProcess = fork(path.join(HERE, file), [JSON.stringify(init)], {
    execArgv: ['--import', 'tsx', ...execArgv],
    // Its log lines are read (as a log collector would) and dropped.
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  const keep = (d: string): void => {
    // Keep the tail only: enough to explain a failure.
    output = (output + d).slice(-4000);
  };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const waiting = new Map<string, (message: FromChild) => void>();
  child.on('message', (message: FromChild) => {
    const wake = waiting.get(message.type);
    waiting.delete(message.type);
    wake?.(message);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));

  function request(message: ToChild, answer: FromChild['type'], ms: number): Promise<FromChild> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(answer);
        reject(new Error(`${file} sent no ${answer} within ${ms} ms; its output: ${output}`));
      }, ms);
      waiting.set(answer, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      if (message.type !== 'init') child.send(message);
    });
  }

  const ready = await Promise.race([
    request({ type: 'init' }, 'ready', READY_TIMEOUT_MS),
    exited.then((code) => {
      throw new Error(`${file} exited (code ${code}) before it was ready; its output: ${output}`);
    }),
  ]);
  if (ready.type !== 'ready') throw new Error(`${file} answered ${ready.type} instead of ready`);
  return {
    url: ready.url,
    pid: child.pid!,
    async stats() {
      const m = await request({ type: 'stats' }, 'stats', 10_000);
      if (m.type !== 'stats') throw new Error(`${file} answered ${m.type} instead of stats`);
      return m.stats;
    },
    async close() {
      process.off('exit', killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.send({ type: 'stop' } satisfies ToChild);
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}
