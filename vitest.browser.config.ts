import { defineConfig } from 'vitest/config';

/** Browser suites (headless Chromium): slower, so they run as `npm run test:browser`. */
export default defineConfig({
  test: {
    include: ['test/**/*.browser.test.ts'],
    // Debian's flite and pocketsphinx, for the suites that speak and listen.
    globalSetup: ['test/setup/speech-packages.ts'],
    maxWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    server: {
      deps: {
        // Characters are imported by Node itself, as in the server (see native-import.mjs).
        external: [/src\/characters\/native-import\.mjs$/],
      },
    },
  },
});
