/**
 * Real engines for scale-out runs (the load test's --instances, the deploy
 * tests): Debian's redis-server and nginx, each started as this user's own
 * process with its own config in a temp folder, on loopback ports; and
 * Troupe instances as separate `npm start` processes. Every wait is for an
 * event (a log line, a port answering), never a sleep.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** How long an engine may take to start. */
const START_MS = 30_000;

/** Whether a program is on PATH (or at its Debian path). */
export function hasProgram(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/bin']) {
    const file = path.join(dir, name);
    if (spawnSync('test', ['-x', file]).status === 0) return file;
  }
  return undefined;
}

/** A free loopback port, chosen by the OS. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

/** A started process with its output so far. */
export interface Proc {
  child: ChildProcess;
  output(): string;
  /** Resolves when the output matches `pattern`; rejects on exit or after `ms`. */
  waitFor(pattern: RegExp, what: string, ms?: number): Promise<RegExpMatchArray>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL after `ms`; resolves on exit. */
  stop(ms?: number): Promise<void>;
}

/** Spawns a program and records its stdout and stderr. */
export function startProcess(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Proc {
  const child = spawn(command, args, {
    env: options.env ?? process.env,
    cwd: options.cwd ?? process.cwd(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (d: Buffer): void => {
    out += d.toString('utf8');
    for (const l of listeners) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
      for (const l of listeners) l();
    }),
  );
  const kill = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', kill);
  return {
    child,
    output: () => out,
    exited,
    waitFor(pattern, what, ms = START_MS) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const m = pattern.exec(out);
          if (m) {
            done();
            resolve(m);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            done();
            reject(
              new Error(`${what}: the process exited first; its output:\n${out.slice(-3000)}`),
            );
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${what}: not within ${ms} ms; output:\n${out.slice(-3000)}`));
        }, ms);
        const done = (): void => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    async stop(ms = 15_000) {
      process.off('exit', kill);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(kill, ms);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A redis-server of the test's own. */
export interface RedisProc {
  url: string;
  port: number;
  proc: Proc;
  close(): Promise<void>;
}

/**
 * Starts redis-server on a free loopback port, without persistence.
 *
 * @example const redis = await startRedis(); // redis.url = redis://127.0.0.1:PORT
 */
export async function startRedis(port?: number): Promise<RedisProc> {
  const dir = await mkdtemp(path.join(tmpdir(), 'troupe-redis-'));
  const chosen = port ?? (await freePort());
  const conf = path.join(dir, 'redis.conf');
  await writeFile(
    conf,
    [
      `port ${chosen}`,
      'bind 127.0.0.1',
      'protected-mode yes',
      `dir ${dir}`,
      'save ""',
      'appendonly no',
      'daemonize no',
      'logfile ""',
    ].join('\n'),
  );
  const proc = startProcess(hasProgram('redis-server') ?? 'redis-server', [conf]);
  await proc.waitFor(/Ready to accept connections/, 'redis-server ready');
  return {
    url: `redis://127.0.0.1:${chosen}`,
    port: chosen,
    proc,
    async close() {
      await proc.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** An nginx of the test's own, configured with the repo's deploy/nginx/troupe.conf. */
export interface NginxProc {
  /** http://127.0.0.1:PORT */
  url: string;
  wsUrl: string;
  proc: Proc;
  /** The file the shipped config's `access_log` writes to, moved into the nginx's own directory. */
  accessLog: string;
  close(): Promise<void>;
}

/**
 * Starts nginx in front of `upstreams` (host:port each), with the shipped
 * site config: its upstream servers, listen port and access log's path
 * replaced, nothing else.
 * `workerProcesses` is nginx's own (Debian's nginx.conf says `auto`: one
 * per core).
 */
export async function startNginx(upstreams: string[], workerProcesses = 1): Promise<NginxProc> {
  const dir = await mkdtemp(path.join(tmpdir(), 'troupe-nginx-'));
  const port = await freePort();
  const site = await readFile(path.join('deploy', 'nginx', 'troupe.conf'), 'utf8');
  // Each upstream's list of servers, with the parameters its first line gives (max_fails…).
  let lists = 0;
  const rendered = site
    .replace(
      /^[ \t]*server troupe-\d+:8080([^;\n]*);[^\n]*\n(?:[ \t]*server troupe-\d+:8080[^\n]*\n)*/gm,
      (_all, params: string) => {
        lists++;
        return upstreams.map((u) => `    server ${u}${params};\n`).join('');
      },
    )
    .replace(/listen 80( default_server)?;/, `listen 127.0.0.1:${port}$1;`)
    .replaceAll('/var/log/nginx/access.log', path.join(dir, 'access.log'));
  if (lists === 0) throw new Error('deploy/nginx/troupe.conf: no upstream servers');
  await writeFile(path.join(dir, 'troupe.conf'), rendered);
  const temp = (name: string): string => path.join(dir, name);
  await writeFile(
    path.join(dir, 'nginx.conf'),
    [
      'daemon off;',
      `worker_processes ${workerProcesses};`,
      `pid ${temp('nginx.pid')};`,
      'error_log stderr notice;',
      'events { worker_connections 1024; }',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${temp('body')};`,
      `  proxy_temp_path ${temp('proxy')};`,
      `  fastcgi_temp_path ${temp('fastcgi')};`,
      `  uwsgi_temp_path ${temp('uwsgi')};`,
      `  scgi_temp_path ${temp('scgi')};`,
      `  include ${temp('troupe.conf')};`,
      '}',
    ].join('\n'),
  );
  const proc = startProcess(hasProgram('nginx') ?? 'nginx', [
    '-p',
    dir,
    '-c',
    path.join(dir, 'nginx.conf'),
    '-e',
    'stderr',
  ]);
  const url = `http://127.0.0.1:${port}`;
  await proc.waitFor(/start worker process/, 'nginx started');
  await waitForHttp(`${url}/nginx-health`, 'nginx', proc);
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}/v1/realtime`,
    proc,
    accessLog: path.join(dir, 'access.log'),
    async close() {
      // SIGQUIT: nginx's graceful stop.
      if (proc.child.exitCode === null) proc.child.kill('SIGQUIT');
      await proc.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves when `url` answers 200; polls only while the process runs, each attempt awaited. */
export async function waitForHttp(
  url: string,
  what: string,
  proc?: Proc,
  ms = START_MS,
): Promise<void> {
  const deadline = Date.now() + ms;
  let last = '';
  while (Date.now() < deadline) {
    if (proc && proc.child.exitCode !== null) {
      throw new Error(`${what} exited; output:\n${proc.output().slice(-3000)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (res.status === 200) return;
      last = `status ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
      // Connection refused comes back at once: wait for the process to say something, or a tick.
      await Promise.race([
        new Promise((r) => proc?.child.stderr?.once('data', r) ?? setImmediate(r)),
        new Promise((r) => setTimeout(r, 50)),
      ]);
    }
  }
  throw new Error(`${what}: ${url} did not answer 200 within ${ms} ms (${last})`);
}

/** A Troupe instance: `npm start` in a process of its own. */
export interface Instance {
  /** http://127.0.0.1:PORT */
  url: string;
  wsUrl: string;
  port: number;
  proc: Proc;
  /** Log lines so far, parsed (non-JSON lines skipped). */
  logs(): Array<Record<string, unknown>>;
  /**
   * SIGTERM (a drain) or `signal`, then waits for the exit. SIGKILL goes to
   * its workers too, at once, as a crash of its machine or container would:
   * workers left behind when their primary dies drain their sessions.
   */
  stop(
    signal?: 'SIGTERM' | 'SIGKILL',
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** SIGKILL to every worker an instance's log says it started (those gone already are skipped). */
function killWorkers(output: string): void {
  for (const line of output.split('\n')) {
    if (!line.startsWith('{') || !line.includes('"worker ready"')) continue;
    const { pid } = JSON.parse(line) as { pid?: unknown };
    if (typeof pid !== 'number') continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already (replaced, or exited).
    }
  }
}

/**
 * Node's arguments in `npm start` (package.json's `start` script, e.g.
 * `--max-semi-space-size=64 --heap-growing-percent=100 --import tsx src/cli/start.ts`):
 * an instance runs as `npm start` does (from this directory, like the start
 * script), its heap settings included, without npm's own process in between.
 */
export function npmStartArgs(): string[] {
  const pkg = JSON.parse(readFileSync(path.join(process.cwd(), 'package.json'), 'utf8')) as {
    scripts?: { start?: string };
  };
  const words = (pkg.scripts?.start ?? '').trim().split(/\s+/);
  const node = words.indexOf('node');
  if (node === -1 || !words.at(-1)?.endsWith('start.ts')) {
    throw new Error(
      `package.json's start script does not run node on start.ts: ${pkg.scripts?.start}`,
    );
  }
  return words.slice(node + 1);
}

/**
 * Node's and V8's flags in `npm start` (those before `--import`), e.g.
 * `['--max-semi-space-size=64', '--heap-growing-percent=100']`: the load
 * test's own server process and `bench:floor`'s get the same heap.
 */
export function npmStartFlags(): string[] {
  const args = npmStartArgs();
  const end = args.indexOf('--import');
  return args.slice(0, end === -1 ? -1 : end);
}

/**
 * Starts `src/cli/start.ts` as `npm start` runs it, with these settings
 * (PORT=0 unless given: the port is read from its "server listening" /
 * "workers ready" line).
 */
export async function startInstance(env: Record<string, string>): Promise<Instance> {
  const proc = startProcess(process.execPath, npmStartArgs(), {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      CHARACTERS_DIR: 'characters',
      CHARACTERS_WATCH: 'false',
      STT_PROVIDER: 'none',
      TTS_PROVIDER: 'none',
      LOG_LEVEL: 'info',
      HOST: '127.0.0.1',
      PORT: '0',
      SHUTDOWN_GRACE_MS: '10000',
      ...env,
    },
  });
  const ready = env.WORKERS && env.WORKERS !== '1' ? 'workers ready' : 'server listening';
  const m = await proc.waitFor(
    new RegExp(
      `"msg":"${ready}".*?"url":"(http://127\\.0\\.0\\.1:(\\d+))"|"url":"(http://127\\.0\\.0\\.1:(\\d+))".*?"msg":"${ready}"`,
    ),
    `troupe ${ready}`,
  );
  const url = m[1] ?? m[3]!;
  const port = Number(m[2] ?? m[4]);
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}/v1/realtime`,
    port,
    proc,
    logs: () =>
      proc
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async stop(signal = 'SIGTERM') {
      if (proc.child.exitCode === null && proc.child.signalCode === null) {
        if (signal === 'SIGKILL') killWorkers(proc.output());
        proc.child.kill(signal);
      }
      return proc.exited;
    },
  };
}
