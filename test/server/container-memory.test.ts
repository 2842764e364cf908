/**
 * The container's memory guard against the kernel's own accounting: the
 * server runs in a control group of its own with a real memory limit, and
 * the limit is moved under and over what the server uses. Needs a writable
 * cgroup v1 memory hierarchy (root on most Linux hosts); skipped otherwise,
 * saying why.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryUse } from '../../src/config/cgroup.js';
import { STANDALONE_ENV } from '../helpers/files.js';
import { connect } from '../helpers/realtime-client.js';
import { TEST_TIMEOUT_MS, within } from '../helpers/wait.js';

/** A new memory group under this process's own (v1), or why there can be none. */
function makeGroup(): string | { why: string } {
  const line = /^\d+:memory:(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'));
  if (!line) return { why: 'no cgroup v1 memory controller' };
  const dir = path.join('/sys/fs/cgroup/memory', line[1]!, `troupe-test-${process.pid}`);
  try {
    mkdirSync(dir);
  } catch (e) {
    return { why: `cannot make a memory group: ${(e as Error).message}` };
  }
  // A group may be made where processes cannot join it, or its limit cannot be set.
  const join = spawnSync('/bin/sh', ['-c', `echo $$ > ${dir}/cgroup.procs`]);
  try {
    writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(4 * 1024 ** 3));
  } catch (e) {
    rmdirSync(dir);
    return { why: `cannot set a memory limit: ${(e as Error).message}` };
  }
  if (join.status !== 0) {
    rmdirSync(dir);
    return { why: `cannot join a memory group: ${join.stderr.toString().trim()}` };
  }
  return dir;
}

const group = process.platform === 'linux' ? makeGroup() : { why: 'not Linux' };
const dir = typeof group === 'string' ? group : '';
if (typeof group !== 'string') console.warn(`container memory test skipped: ${group.why}`);

/** Sets the group's limit to what it uses now over `share`. */
function limitAt(share: number): void {
  const use = memoryUse({ dir, v1: true });
  if (!use) throw new Error(`cannot read ${dir}`);
  writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(Math.ceil(use.used / share)));
}

let server: ChildProcess | undefined;
let url = '';
beforeAll(async () => {
  if (!dir) return;
  // The shell joins the group, then becomes the server: every page it touches is counted.
  server = spawn(
    '/bin/sh',
    [
      '-c',
      `echo $$ > ${dir}/cgroup.procs && exec "${process.execPath}" --import tsx src/cli/start.ts`,
    ],
    {
      env: { ...process.env, ...STANDALONE_ENV, WORKERS: '1', OVERLOAD_MEMORY: '0.5' },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  const port = await within(
    new Promise<string>((resolve, reject) => {
      server!.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /"url":"http:\/\/127\.0\.0\.1:(\d+)".*"msg":"server listening"/.exec(out);
        if (m) resolve(m[1]!);
      });
      server!.once('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
    }),
    'the server listening in its memory group',
  );
  url = `ws://127.0.0.1:${port}/v1/realtime?character=plain`;
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server!.once('exit', r));
    server.kill('SIGKILL');
    await exited;
  }
  if (!dir) return;
  // What the server started (its MCP servers) is in the group too: it goes, then the group.
  for (;;) {
    const pids = readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  rmdirSync(dir);
});

/** Connects until the first event is (or is not) the overload refusal. */
async function firstEvent(refused: boolean): Promise<{ type: string; error?: unknown }> {
  for (;;) {
    const c = await connect(url);
    while (c.events.length === 0) await new Promise((r) => setTimeout(r, 10));
    const first = c.events[0]!;
    void c.close();
    const isRefusal = first.type === 'error';
    if (isRefusal === refused) return first;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!dir)("the container's memory limit", () => {
  it('refuses new sessions while the group uses more than OVERLOAD_MEMORY of it, and takes them again below', async () => {
    // 70% of the limit in use, past the 50% set: refused, the kernel far from killing.
    limitAt(0.7);
    const refusal = await within(firstEvent(true), 'a refusal for the container’s memory');
    expect(refusal).toMatchObject({
      type: 'error',
      error: {
        code: 'server_overloaded',
        message: expect.stringMatching(
          /^The server is overloaded \(container memory at \d+% of its limit\); retry in 2 s/,
        ),
      },
    });
    // 25% in use: a session again.
    limitAt(0.25);
    const created = await within(firstEvent(false), 'a session once there is room');
    expect(created.type).toBe('session.created');
  });
});
