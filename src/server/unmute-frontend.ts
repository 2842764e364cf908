/**
 * Kyutai Unmute's frontend served by Troupe itself: its production build
 * (`next build` with `NEXT_PUBLIC_IN_DOCKER=true`) calls its backend under
 * `/api/` on the page's own origin, so a page Troupe serves talks to Troupe
 * with no proxy. The page is at `/unmute`, its assets where the build puts
 * them (`/_next/static/…` and its `public/` files at the root).
 */
import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';

/** Where the Unmute page is served. */
export const UNMUTE_PAGE_PATH = '/unmute';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
};

/** One path segment: no dot files, no `..`, nothing but these characters. */
const SEGMENT = /^[a-zA-Z0-9_~-][a-zA-Z0-9_.~-]*$/;

/** The file of the build a path names, or undefined when it names none. */
export function unmuteFrontendFile(dir: string, path: string): string | undefined {
  if (path === UNMUTE_PAGE_PATH || path === `${UNMUTE_PAGE_PATH}/`) {
    return join(dir, '.next', 'server', 'app', 'index.html');
  }
  // Next serves the app's favicon from its build output.
  if (path === '/favicon.ico') return join(dir, '.next', 'server', 'app', 'favicon.ico.body');
  const assets = '/_next/static/';
  const rest = path.startsWith(assets) ? path.slice(assets.length) : undefined;
  const segments = (rest ?? path.slice(1)).split('/');
  if (!segments.every((s) => SEGMENT.test(s))) return undefined;
  if (rest !== undefined) return join(dir, '.next', 'static', ...segments);
  // The build's public/ files (its audio worklet, Opus workers) sit at the root.
  return segments.length === 1 ? join(dir, 'public', segments[0]!) : undefined;
}

/**
 * Serves `path` from the Unmute frontend build in `dir`; false when the
 * build has no such file (the caller answers 404).
 *
 * @example
 * if (await serveUnmuteFrontend(res, '/srv/unmute/frontend', '/unmute', false, {})) return;
 */
export async function serveUnmuteFrontend(
  res: ServerResponse,
  dir: string,
  path: string,
  head: boolean,
  headers: Record<string, string>,
): Promise<boolean> {
  const file = unmuteFrontendFile(dir, path);
  if (file === undefined) return false;
  const name = file.endsWith('.ico.body') ? file.slice(0, -'.body'.length) : file;
  const dot = name.lastIndexOf('.');
  const type = TYPES[dot === -1 ? '' : name.slice(dot)];
  if (type === undefined) return false;
  let body: Buffer;
  try {
    body = await readFile(file);
  } catch {
    return false;
  }
  res.writeHead(200, {
    ...headers,
    'content-type': type,
    'content-length': body.length,
    // Build assets carry a content hash in their names: they never change.
    'cache-control': path.startsWith('/_next/static/')
      ? 'public, max-age=31536000, immutable'
      : 'no-cache',
    'x-content-type-options': 'nosniff',
  });
  res.end(head ? undefined : body);
  return true;
}
