import { defineConfig } from 'vitest/config';
import { TEST_TIMEOUT_MS } from './test/helpers/wait.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Browser suites run on their own: npm run test:browser.
    exclude: ['test/**/*.browser.test.ts', '**/node_modules/**'],
    // Two cores: keep the worker count small so socket tests are not starved.
    // Debian's flite and pocketsphinx, for the suites that speak and listen.
    globalSetup: ['test/setup/speech-packages.ts'],
    // Cached history JSON (the resume store's parts) is checked against a fresh copy.
    setupFiles: ['test/setup/verify-history-json.ts'],
    maxWorkers: 2,
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
