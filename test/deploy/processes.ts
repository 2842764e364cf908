/**
 * The scale-out tests' engines (see loadtest/lib/engines.ts), and whether a
 * suite that needs one runs here.
 */
import { hasProgram } from '../../loadtest/lib/engines.js';

export * from '../../loadtest/lib/engines.js';

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
