/**
 * The load test's and the deploy tests' servers run as `npm start` does
 * (loadtest/lib/engines.ts `npmStartArgs`), and so does the Dockerfile.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { npmStartArgs, npmStartFlags } from '../../loadtest/lib/engines.js';

describe('npmStartArgs', () => {
  it("is node's part of package.json's start script", () => {
    const args = npmStartArgs();
    expect(args.at(-1)).toBe('src/cli/start.ts');
    expect(args).toContain('--max-semi-space-size=64');
    expect(args).toContain('--heap-growing-percent=100');
    expect(args.join(' ')).toContain('--import tsx');
  });

  it("gives its flags, the heap the load test's own server gets", () => {
    expect(npmStartFlags()).toEqual(['--max-semi-space-size=64', '--heap-growing-percent=100']);
  });

  it("is what the Dockerfile's CMD runs", () => {
    const dockerfile = readFileSync('deploy/Dockerfile', 'utf8');
    const cmd = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1];
    expect(cmd).toBeDefined();
    expect(JSON.parse(cmd!)).toEqual(['node', ...npmStartArgs()]);
  });
});
