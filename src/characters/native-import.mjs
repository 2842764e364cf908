/**
 * `import()` that always goes to Node's own loader. Test runners that
 * transform source (vitest) rewrite `import()` in the files they transform;
 * this file is left untransformed (see vitest.config.ts), so characters are
 * loaded the same way in tests as in the server.
 *
 * @param {string} url
 * @returns {Promise<Record<string, unknown>>}
 */
export function nativeImport(url) {
  return import(url);
}
