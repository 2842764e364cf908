/**
 * Running the server as a process: settings from the environment and flags,
 * a guard that keeps one bad handler from ending every session, and a
 * graceful stop on SIGTERM/SIGINT/SIGHUP.
 */
import type { Logger } from 'pino';
import { loadConfig, type Config } from '../config/index.js';
import { TroupeError } from '../errors.js';
import { createMetrics } from '../metrics/index.js';
import { isWorker, linkWorker, resolveWorkers, runPrimary } from '../server/cluster.js';
import { createLogger, startServer, type TroupeServer } from '../server/index.js';
import { logsWritten } from '../server/logger.js';
import { onStopSignals, signalRepeats } from '../server/signals.js';

/** Options of {@link serve}. */
export interface ServeOptions {
  env?: Record<string, string | undefined>;
  argv?: readonly string[];
  /** Human log lines (a terminal) instead of JSON. @defaultValue false */
  prettyLogs?: boolean;
}

/**
 * `npm start`: with `WORKERS` above 1 (the default `auto` on a multi-core
 * machine) this process becomes the primary of that many workers, each of
 * which runs {@link serve}; otherwise it is the server itself.
 *
 * @example
 * await start({ env: process.env, argv: process.argv.slice(2) });
 */
export async function start(options: ServeOptions = {}): Promise<TroupeServer | undefined> {
  if (isWorker) {
    await serve(options);
    return undefined;
  }
  let config: Config;
  try {
    config = loadConfig(options.env ?? process.env, options.argv ?? []);
  } catch (err) {
    return exitWith(err);
  }
  const workers = resolveWorkers(config.scale.workers);
  if (workers <= 1) return serve(options);
  const log = createLogger(config.log).child({ part: 'primary' });
  guardProcess(log);
  try {
    await runPrimary({
      workers,
      host: config.server.host,
      port: config.server.port,
      redis: config.scale.redisUrl !== undefined,
      resumeMemoryMb: config.scale.resumeMemoryMb,
      graceMs: config.server.shutdownGraceMs,
      log,
    });
  } catch (err) {
    return exitWith(err);
  }
  return undefined;
}

/**
 * Starts the server for a process and wires signals. Exits 1 with one clear
 * message on bad settings.
 *
 * @example
 * await serve({ env: process.env, argv: process.argv.slice(2) });
 */
export async function serve(options: ServeOptions = {}): Promise<TroupeServer> {
  let config: Config;
  try {
    config = loadConfig(options.env ?? process.env, options.argv ?? []);
  } catch (err) {
    return exitWith(err);
  }
  const root = createLogger(config.log, undefined, {
    pretty: options.prettyLogs ? { color: process.stdout.isTTY === true } : false,
  });
  const log = isWorker ? root.child({ worker: process.pid }) : root;
  guardProcess(log);
  const metrics = createMetrics();
  const link = isWorker ? linkWorker(metrics.registry, metrics.scale) : undefined;
  // Signals (and the primary's shutdown request) are heard before the server
  // listens: one that arrives while it starts stops it as soon as it is up.
  let server: TroupeServer | undefined;
  let stopping = false;
  /** What asked this process to stop so far: its own signal, its primary. */
  const askedBy = new Set<'signal' | 'primary'>();
  const fresh = signalRepeats();
  const stop = (signal: string) => {
    // npm passes on the signal its process group already got: one request.
    if (!fresh(signal)) return;
    if (signal === 'primary gone') {
      // Nobody hands this worker connections any more: its clients finish
      // their replies and resume elsewhere (a drain under way goes on).
      if (stopping) return;
      log.warn({}, 'primary gone: draining');
    }
    const by = signal.startsWith('primary') ? 'primary' : 'signal';
    // A worker's own signal and its primary's request are one stop, in
    // either order: Ctrl+C reaches the whole process group, and systemd
    // (KillMode=control-group) signals every process of the service at once.
    if (stopping && !askedBy.has(by)) {
      askedBy.add(by);
      return;
    }
    askedBy.add(by);
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    if (signal !== 'primary gone') log.info({ signal }, 'signal received');
    if (server) void server.shutdown().then(exitWhenLogged);
  };
  onStopSignals(stop, log);
  link?.serve(
    () => ({
      sessions: server?.sessions ?? 0,
      refusing: stopping ? 'shutting_down' : server?.refusing,
    }),
    (by) => stop(by),
  );
  try {
    server = await startServer({
      config,
      logger: log,
      metrics,
      ...(link
        ? {
            cluster: link.view,
            ...(config.scale.redisUrl === undefined ? { resumeStore: link.store } : {}),
          }
        : {}),
    });
  } catch (err) {
    return exitWith(err);
  }
  link?.ready(server.url);
  if (stopping) void server.shutdown().then(exitWhenLogged);
  logLlmHealth(server, log);
  return server;
}

/** Says at start whether the LLM answers, so an unreachable one is seen before the first turn. */
function logLlmHealth(server: TroupeServer, log: Logger): void {
  void server.llm.health().then((h) => {
    if (h.ok) log.info({ llm: h.base_url, model: h.model, latencyMs: h.latency_ms }, 'llm answers');
    else log.warn({ llm: h.base_url, error: h.error }, 'llm does not answer');
  });
}

/**
 * Keeps the process alive when a tool handler throws outside its own promise
 * (a callback in a timer, an unawaited promise): the executor cannot catch
 * those, and one character's bug must not end every session on the server.
 */
export function guardProcess(log: Logger): void {
  process.on('uncaughtException', (err) => {
    log.error({ err }, 'uncaught exception (server kept running)');
  });
  process.on('unhandledRejection', (reason) => {
    log.error({ err: reason }, 'unhandled rejection (server kept running)');
  });
}

function exitWith(err: unknown): never {
  const message =
    err instanceof TroupeError
      ? err.message
      : `could not start: ${(err as Error).stack ?? String(err)}`;
  process.stderr.write(`troupe: ${message}\n`);
  process.exit(1);
}

/** Exits 0 once the last log lines (`server stopped`) are out. */
function exitWhenLogged(): void {
  void logsWritten().then(() => process.exit(0));
}
