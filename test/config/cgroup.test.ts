import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fakeRoot } from '../helpers/files.js';
import { findMemoryGroup, memoryUse } from '../../src/config/cgroup.js';
import { containerMemory } from '../../src/session/memory.js';

const MiB = 1024 * 1024;

describe("the container's memory", () => {
  it('has no limit without one, or without a cgroup file system', async () => {
    const v2 = await fakeRoot({
      'proc/self/cgroup': '0::/\n',
      'sys/fs/cgroup/memory.max': 'max\n',
      'sys/fs/cgroup/memory.current': `${100 * MiB}\n`,
    });
    expect(findMemoryGroup(v2)).toBeUndefined();
    expect(containerMemory(v2)()).toBe(0);
    // cgroup v1 writes "no limit" as a number near 2^63.
    const v1 = await fakeRoot({
      'proc/self/cgroup': '4:memory:/x\n',
      'sys/fs/cgroup/memory/x/memory.limit_in_bytes': '9223372036854771712\n',
      'sys/fs/cgroup/memory/x/memory.usage_in_bytes': `${100 * MiB}\n`,
    });
    expect(findMemoryGroup(v1)).toBeUndefined();
    expect(containerMemory(await fakeRoot({}))()).toBe(0);
  });

  it('takes the lowest limit on the way up, less the inactive file cache (cgroup v2)', async () => {
    const pod = 'sys/fs/cgroup/kubepods/pod1';
    const root = await fakeRoot({
      'proc/self/cgroup': '0::/kubepods/pod1/c1\n',
      'sys/fs/cgroup/memory.max': 'max\n',
      [`${pod}/memory.max`]: `${1024 * MiB}\n`,
      [`${pod}/memory.current`]: `${900 * MiB}\n`,
      [`${pod}/memory.stat`]: `anon ${700 * MiB}\nfile ${200 * MiB}\ninactive_file ${100 * MiB}\nactive_file ${100 * MiB}\n`,
      [`${pod}/c1/memory.max`]: 'max\n',
      [`${pod}/c1/memory.current`]: `${850 * MiB}\n`,
    });
    expect(findMemoryGroup(root)).toEqual({ dir: path.join(root, pod), v1: false });
    expect(memoryUse(findMemoryGroup(root)!)).toEqual({ used: 800 * MiB, limit: 1024 * MiB });
    expect(containerMemory(root)()).toBeCloseTo(800 / 1024, 6);
  });

  it('reads a cgroup v1 limit (a container on an older host)', async () => {
    const dir = 'sys/fs/cgroup/memory/docker/abc';
    const root = await fakeRoot({
      'proc/self/cgroup': '9:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n',
      [`${dir}/memory.limit_in_bytes`]: `${2048 * MiB}\n`,
      [`${dir}/memory.usage_in_bytes`]: `${1900 * MiB}\n`,
      [`${dir}/memory.stat`]: `cache ${300 * MiB}\ninactive_file ${5 * MiB}\ntotal_inactive_file ${200 * MiB}\n`,
    });
    expect(memoryUse(findMemoryGroup(root)!)).toEqual({ used: 1700 * MiB, limit: 2048 * MiB });
  });

  it('is read again after its interval, not at every call', async () => {
    const file = 'sys/fs/cgroup/memory.current';
    const root = await fakeRoot({
      'proc/self/cgroup': '0::/\n',
      'sys/fs/cgroup/memory.max': `${100 * MiB}\n`,
      [file]: `${50 * MiB}\n`,
    });
    const share = containerMemory(root);
    expect(share()).toBe(0.5);
    await writeFile(path.join(root, file), `${95 * MiB}\n`);
    expect(share()).toBe(0.5);
    await expect.poll(share, { interval: 20, timeout: 5_000 }).toBe(0.95);
  });

  it('looks for the group once, limit or none', async () => {
    const root = await fakeRoot({
      'proc/self/cgroup': '0::/\n',
      'sys/fs/cgroup/memory.max': 'max\n',
    });
    const share = containerMemory(root);
    expect(share()).toBe(0);
    // Not looked for again at each call (it was, reading files at every item a
    // client added): a limit that appears later is not seen, one that changes is.
    await writeFile(path.join(root, 'sys/fs/cgroup/memory.max'), `${100 * MiB}\n`);
    await writeFile(path.join(root, 'sys/fs/cgroup/memory.current'), `${90 * MiB}\n`);
    expect(share()).toBe(0);
  });

  it("reads this machine's tree without failing", () => {
    const share = containerMemory()();
    expect(share).toBeGreaterThanOrEqual(0);
    expect(share).toBeLessThan(1);
  });
});
