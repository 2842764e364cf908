/**
 * The scale-out tests' engines (see loadtest/lib/engines.ts), and whether a
 * suite that needs one runs here.
 */
import {
  hasProgram,
  startInstance as startEngine,
  type Instance,
} from '../../loadtest/lib/engines.js';

export * from '../../loadtest/lib/engines.js';

/**
 * Starts an instance as `npm start` does, for a test: with the overload
 * guard off, as the in-process test server has it. It reads the event
 * loop's lag and busy share, which a busy machine (CI beside a load test)
 * drives past its limits: a fresh instance then refused the sessions a
 * test opened. Tests of the guard set their own limits.
 */
export function startInstance(env: Record<string, string>): Promise<Instance> {
  return startEngine({ OVERLOAD_LAG_MS: '0', OVERLOAD_BUSY: '0', ...env });
}

/**
 * Whether a suite needing `program` runs: yes when installed; in CI a
 * missing program is a failure (`.ci/run` installs it), elsewhere a skip.
 */
export function needs(program: string): boolean {
  if (hasProgram(program)) return true;
  if (process.env.CI || process.env.TROUPE_CI)
    throw new Error(`${program} is not installed; .ci/run installs it`);
  console.warn(`skipping: ${program} is not installed (apt-get install ${program})`);
  return false;
}
