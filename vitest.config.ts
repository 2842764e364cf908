import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Browser suites run on their own: npm run test:browser.
    exclude: ['test/**/*.browser.test.ts', '**/node_modules/**'],
    // Two cores: keep the worker count small so socket tests are not starved.
    // Debian's flite and pocketsphinx, for the suites that speak and listen.
    globalSetup: ['test/setup/speech-packages.ts'],
    maxWorkers: 2,
    testTimeout: 15_000,
    hookTimeout: 15_000,
    server: {
      deps: {
        // Characters are imported by Node itself, as in the server (see native-import.mjs).
        external: [/src\/characters\/native-import\.mjs$/],
      },
    },
  },
});
