import { describe, expect, it } from 'vitest';
import { fakeRoot } from '../helpers/files.js';
import { cgroupCpuLimit } from '../../src/config/cgroup.js';
import { coreShare, usableCores, WORKER_COUNT_VARIABLE } from '../../src/config/cores.js';

describe('usableCores', () => {
  it('is the machine’s cores without a CPU limit', async () => {
    const v2 = await fakeRoot({
      'proc/self/cgroup': '0::/\n',
      'sys/fs/cgroup/cpu.max': 'max 100000\n',
    });
    expect(cgroupCpuLimit(v2)).toBeUndefined();
    expect(usableCores(v2, 64)).toBe(64);
    const v1 = await fakeRoot({
      'proc/self/cgroup': '4:cpu,cpuacct:/\n2:memory:/x\n',
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '-1\n',
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n',
    });
    expect(usableCores(v1, 8)).toBe(8);
    // No cgroup file system at all (not Linux).
    expect(usableCores(await fakeRoot({}), 4)).toBe(4);
  });

  it('is capped by a cgroup v2 limit, rounded up, the lowest on the way up', async () => {
    const root = await fakeRoot({
      'proc/self/cgroup': '0::/kubepods/pod1/c1\n',
      'sys/fs/cgroup/cpu.max': 'max 100000\n',
      'sys/fs/cgroup/kubepods/pod1/cpu.max': '250000 100000\n',
      'sys/fs/cgroup/kubepods/pod1/c1/cpu.max': '150000 100000\n',
    });
    expect(cgroupCpuLimit(root)).toBe(1.5);
    expect(usableCores(root, 64)).toBe(2);
    // Never more than the machine has, never fewer than one.
    expect(usableCores(root, 1)).toBe(1);
    const tiny = await fakeRoot({
      'proc/self/cgroup': '0::/\n',
      'sys/fs/cgroup/cpu.max': '10000 100000\n',
    });
    expect(usableCores(tiny, 16)).toBe(1);
  });

  it('is capped by a cgroup v1 quota (a container on an older host)', async () => {
    const root = await fakeRoot({
      'proc/self/cgroup': '3:cpu,cpuacct:/docker/abc\n',
      'sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us': '200000\n',
      'sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us': '100000\n',
    });
    expect(usableCores(root, 32)).toBe(2);
  });
});

describe('coreShare', () => {
  it("is a process's share of the usable cores: all of them alone, cores ÷ workers rounded up with workers", async () => {
    const root = await fakeRoot({
      'proc/self/cgroup': '0::/\n',
      'sys/fs/cgroup/cpu.max': '400000 100000\n',
    });
    const workers = (n: string) => ({ [WORKER_COUNT_VARIABLE]: n });
    expect(coreShare(root, 8, {})).toBe(4);
    expect(coreShare(root, 8, workers('2'))).toBe(2);
    expect(coreShare(root, 8, workers('3'))).toBe(2);
    // Never less than one thread, whatever the count.
    expect(coreShare(root, 8, workers('16'))).toBe(1);
    expect(coreShare(root, 8, workers('nonsense'))).toBe(4);
  });
});
