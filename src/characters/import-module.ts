/**
 * Importing character modules: TypeScript through tsx's loader, a fresh copy
 * on every reload, and import failures turned into messages with file:line.
 */
import { readFile } from 'node:fs/promises';
import { findSourceMap, register } from 'node:module';
import { extname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { transform, type Message } from 'esbuild';
import { register as registerTsx } from 'tsx/esm/api';
import { nativeImport } from './native-import.mjs';
import { withTimeout } from '../timeouts.js';

/** Time a module gets to finish importing (top-level await included). */
export const IMPORT_TIMEOUT_MS = 10_000;

let hooksReady = false;

/** Installs tsx (unless the process already runs under it) and the fresh-import hook, once. */
function ensureHooks(): void {
  if (hooksReady) return;
  hooksReady = true;
  const underTsx = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) =>
    a.includes('tsx'),
  );
  if (!underTsx) {
    registerTsx();
    // As the tsx CLI does: stack traces of TypeScript characters point at their own lines.
    process.setSourceMapsEnabled(true);
  }
  register(new URL('./fresh-import-hooks.mjs', import.meta.url));
}

/**
 * Imports a module as it is on disk now. `generation` makes the URL new, so
 * Node's module cache is bypassed for the file and for the files it imports
 * from `root` (the characters directory).
 */
export async function importFresh(
  file: string,
  root: string,
  generation: number,
): Promise<Record<string, unknown>> {
  ensureHooks();
  const url = pathToFileURL(file);
  url.searchParams.set('troupe-fresh', String(generation));
  url.searchParams.set('troupe-root', pathToFileURL(root).href.replace(/\/?$/, '/'));
  return withTimeout(
    nativeImport(url.href),
    IMPORT_TIMEOUT_MS,
    () =>
      new Error(
        `did not finish importing within ${IMPORT_TIMEOUT_MS / 1000} s; is there a top-level await that never settles?`,
      ),
  );
}

/** Removes the reload query from URLs in messages and stacks. */
export function stripFreshQuery(text: string): string {
  return text.replace(/\?troupe-fresh=[^\s:)'"]*/g, '');
}

/**
 * Says why a module failed to import, with file:line where it can be found:
 * syntax errors (located with esbuild), module-not-found, errors thrown while
 * the module ran.
 */
export async function describeImportError(
  err: unknown,
  file: string,
  shown: string,
): Promise<string> {
  const e = err instanceof Error ? err : new Error(String(err));
  const message = stripFreshQuery(e.message);
  // tsx reports TypeScript syntax errors as esbuild's "Transform failed" with path:line:col.
  const transformed = /^(.+?):(\d+):(\d+): ERROR: (.+)$/m.exec(message);
  if (transformed) {
    const [, where, line, col, what] = transformed;
    const at = where === file ? shown : where;
    // esbuild counts columns from 0; editors (and the .js branch below) from 1.
    return `syntax error at ${at}:${line}:${Number(col) + 1}: ${what}`;
  }
  if (e.name === 'SyntaxError') {
    const located = await locateSyntaxError(file);
    if (located) {
      const { line, column, lineText } = located.location!;
      return `syntax error at ${shown}:${line}:${column + 1}: ${located.text}\n    ${lineText.trim()}`;
    }
    return `syntax error: ${message} (in ${shown} or a module it imports)`;
  }
  const code = (e as { code?: string }).code;
  if (code === 'ERR_MODULE_NOT_FOUND' || code === 'ERR_UNKNOWN_FILE_EXTENSION') {
    const hint = message.includes('Cannot find package')
      ? 'install the package (npm install …) or fix its name'
      : code === 'ERR_UNKNOWN_FILE_EXTENSION'
        ? 'TypeScript characters need an ES-module package: put {"type":"module"} in a package.json beside them'
        : 'check the import path (a .ts file is imported as ./helper.js)';
    return `cannot be imported: ${message}; ${hint}`;
  }
  if (code === 'ERR_REQUIRE_ESM' || /require\(\) of ES Module/.test(message)) {
    return `cannot be imported: ${message}; character files are ES modules (use import, not require)`;
  }
  const line = thrownAt(e, file);
  return `threw while importing${line ? ` (at ${shown}:${line})` : ''}: ${e.name}: ${message}`;
}

async function locateSyntaxError(file: string): Promise<Message | undefined> {
  try {
    const source = await readFile(file, 'utf8');
    const loader = extname(file) === '.ts' ? 'ts' : 'js';
    await transform(source, { loader, sourcefile: file, format: 'esm' });
    return undefined; // the error is in a module the file imports
  } catch (err) {
    return (err as { errors?: Message[] }).errors?.find((m) => m.location);
  }
}

/**
 * The line of `file` in the error's stack where it was thrown, if it is
 * there, mapped back through the module's source map (tsx compiles
 * TypeScript into fewer lines; test runners may format stacks themselves).
 */
function thrownAt(err: Error, file: string): number | undefined {
  const href = pathToFileURL(file).href;
  for (const frame of (err.stack ?? '').split('\n')) {
    const m = /((?:file:\/\/)?\/[^\s()]+):(\d+):(\d+)\)?\s*$/.exec(frame);
    if (!m) continue;
    const [, where, line, column] = m as unknown as [string, string, string, string];
    const bare = where.replace(/\?.*$/, '');
    if (bare !== href && bare !== file) continue;
    const entry = findSourceMap(where)?.findEntry(Number(line) - 1, Number(column) - 1);
    const original = entry && 'originalLine' in entry ? entry.originalLine : undefined;
    return original === undefined ? Number(line) : original + 1;
  }
  return undefined;
}
