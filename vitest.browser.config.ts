import { defineConfig } from 'vitest/config';
import { TEST_TIMEOUT_MS } from './test/helpers/wait.js';

/** Browser suites (headless Chromium): slower, so they run as `npm run test:browser`. */
export default defineConfig({
  test: {
    include: ['test/**/*.browser.test.ts'],
    // Debian's flite and pocketsphinx, for the suites that speak and listen.
    globalSetup: ['test/setup/speech-packages.ts'],
    maxWorkers: 1,
    // Bounds turn a hang into a failure, sized for a machine ten times slower than idle
    // (TEST_TIME_SCALE stretches them further): never something a passing test races.
    testTimeout: TEST_TIMEOUT_MS,
    hookTimeout: TEST_TIMEOUT_MS,
    server: {
      deps: {
        // Characters are imported by Node itself, as in the server (see native-import.mjs).
        external: [/src\/characters\/native-import\.mjs$/],
      },
    },
  },
});
