/**
 * The load test's scale-out target (`--instances`, `--workers`): N Troupe
 * servers as `npm start` processes on loopback, sharing a redis-server, with
 * nginx (the repo's deploy/nginx/troupe.conf) in front when there is more
 * than one; and `--kill-one`, which stops one of them with SIGTERM (a drain)
 * or SIGKILL (`--kill-signal KILL`: a crash).
 */
import {
  hasProgram,
  startInstance,
  startNginx,
  startRedis,
  type Instance,
  type NginxProc,
  type RedisProc,
} from './engines.js';
import type { KillSignal } from './options.js';
import type { CpuPart } from './process-cpu.js';
import type { ResumeLog } from './resume-log.js';
import { percentile } from './stats.js';

/** Servers behind one URL. */
export interface ScaleOutTarget {
  /** ws://… of nginx, or of the one server. */
  url: string;
  /** The processes: each server (its workers too), nginx and Redis. */
  cpuParts: CpuPart[];
  /** SIGTERM (or `signal`) to the first instance; resolves when it has exited. */
  killOne(signal?: KillSignal): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the servers (and Redis and nginx for more than one).
 *
 * @example const target = await startScaleOut({ instances: 2, workers: 1, env: { LLM_BASE_URL: sim.url } });
 */
export async function startScaleOut(options: {
  instances: number;
  workers: number;
  /** The servers' environment (LLM_BASE_URL, MAX_SESSIONS, …). */
  env: Record<string, string>;
}): Promise<ScaleOutTarget> {
  const many = options.instances > 1;
  for (const program of many ? ['redis-server', 'nginx'] : []) {
    if (!hasProgram(program)) {
      throw new Error(
        `--instances ${options.instances} needs ${program}: apt-get install ${program}`,
      );
    }
  }
  let redis: RedisProc | undefined;
  let nginx: NginxProc | undefined;
  const instances: Instance[] = [];
  const close = async (): Promise<void> => {
    await nginx?.close();
    await Promise.all(instances.map((i) => i.stop()));
    await redis?.close();
  };
  try {
    if (many) redis = await startRedis();
    const env = {
      ...options.env,
      // The port is read from the start-up line.
      LOG_LEVEL: 'info',
      WORKERS: String(options.workers),
      ...(redis ? { REDIS_URL: redis.url } : {}),
    };
    for (let i = 0; i < options.instances; i++) instances.push(await startInstance(env));
    if (many) nginx = await startNginx(instances.map((i) => `127.0.0.1:${i.port}`));
  } catch (err) {
    await close();
    throw err;
  }
  const part = (
    name: string,
    proc: { child: { pid?: number } } | undefined,
    server = false,
  ): CpuPart[] =>
    proc?.child.pid === undefined ? [] : [{ name, pid: proc.child.pid, tree: true, server }];
  return {
    url: nginx?.wsUrl ?? instances[0]!.wsUrl,
    cpuParts: [
      ...instances.flatMap((i, n) => part(many ? `server ${n + 1}` : 'server', i.proc, true)),
      ...part('nginx', nginx?.proc),
      ...part('redis-server', redis?.proc),
    ],
    async killOne(signal = 'SIGTERM') {
      const victim = instances[0]!;
      console.log(`\nkill-one: ${signal} to the instance on port ${victim.port}`);
      const { code } = await victim.stop(signal);
      console.log(
        signal === 'SIGTERM'
          ? `kill-one: it drained and exited (code ${code})`
          : `kill-one: it was killed (no drain, no last write)`,
      );
    },
    close,
  };
}

/** p50 / p95 / max of some times, ms. */
export interface TimeSummary {
  p50Ms: number | null;
  p95Ms: number | null;
  maxMs: number | null;
}

/** What the report says about resumes. */
export interface ResumeSummary extends TimeSummary {
  resumed: number;
  failed: number;
  /** Reconnections refused before their session opened, tried again. */
  retries: number;
  /** Connections lost while their reply streamed, and resumed conversations that kept it (cut). */
  cutMidReply: number;
  repliesKept: number;
  /** Connections lost past a round of the server's tools; conversations back ending with it. */
  toolsMidReply: number;
  toolRoundsKept: number;
  /** Where the time went (see {@link ResumeLog.splits}). */
  splits: Record<keyof ResumeLog['splits'], TimeSummary>;
}

function summarizeTimes(times: readonly number[]): TimeSummary {
  const sorted = [...times].sort((a, b) => a - b);
  const round = (v: number | null): number | null => (v === null ? null : Math.round(v));
  return {
    p50Ms: round(percentile(sorted, 0.5)),
    p95Ms: round(percentile(sorted, 0.95)),
    maxMs: round(sorted.at(-1) ?? null),
  };
}

/** Resume times as the report gives them. */
export function summarizeResumes(log: ResumeLog): ResumeSummary {
  const s = log.splits;
  return {
    resumed: log.times.length,
    failed: log.failed,
    retries: log.retries,
    cutMidReply: log.cutMidReply,
    repliesKept: log.repliesKept,
    toolsMidReply: log.toolsMidReply,
    toolRoundsKept: log.toolRoundsKept,
    ...summarizeTimes(log.times),
    splits: {
      connect: summarizeTimes(s.connect),
      restore: summarizeTimes(s.restore),
      ask: summarizeTimes(s.ask),
      reply: summarizeTimes(s.reply),
    },
  };
}

/** The report's resume lines: the total against the target, then where it went. */
export function formatResumes(r: ResumeSummary): string {
  const ms = (t: TimeSummary): string =>
    `p50 ${t.p50Ms ?? '–'} ms, p95 ${t.p95Ms ?? '–'} ms, max ${t.maxMs ?? '–'} ms`;
  const verdict =
    r.p95Ms !== null && r.p95Ms <= RESUME_P95_TARGET_MS && r.failed === 0 ? 'PASS' : 'FAIL';
  return [
    `resume: ${r.resumed} conversations resumed, ${r.failed} lost, ${r.retries} reconnections refused and retried`,
    `  ${verdict}  reconnect → first delta of the next reply: ${ms(r)} (target p95 ≤ ${RESUME_P95_TARGET_MS} ms, 0 lost)`,
    `        socket lost → new socket open (load balancer): ${ms(r.splits.connect)}`,
    `        open → session.created (store claim, restore):  ${ms(r.splits.restore)}`,
    `        session.created → next turn asked (client):     ${ms(r.splits.ask)}`,
    `        asked → first delta (the reply's TTFT):         ${ms(r.splits.reply)}`,
    `  replies under way at the loss: ${r.cutMidReply} with text, ${r.toolsMidReply} past a round of the server's tools`,
    `  conversations back with the reply cut where its last write left it: ${r.repliesKept}; back at a round of tools (its calls and results, no text after): ${r.toolRoundsKept}`,
  ].join('\n');
}

/** Issue 16's goal for a resume after an instance is killed. */
export const RESUME_P95_TARGET_MS = 1_000;
