// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'coverage/', 'loadtest/reports/', '.tmp/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    // Every test and hook takes the suite's bound (TEST_TIMEOUT_MS, sized for a
    // busy machine): a shorter one of its own fails where the machine is slow.
    files: ['test/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector:
            'CallExpression[callee.name=/^(it|test|beforeAll|afterAll|beforeEach|afterEach)$/][arguments.length>1] > Literal:last-child',
          message:
            "A test or hook takes the suite's bound (TEST_TIMEOUT_MS in vitest.config.ts); give a longer one as bound(ms) from test/helpers/wait.ts.",
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly', URL: 'readonly' } },
  },
  {
    // The web client runs in the browser.
    files: ['src/web/**/*.js'],
    languageOptions: {
      globals: {
        document: 'readonly',
        location: 'readonly',
        history: 'readonly',
        URLSearchParams: 'readonly',
        WebSocket: 'readonly',
        fetch: 'readonly',
        requestAnimationFrame: 'readonly',
      },
    },
  },
);
