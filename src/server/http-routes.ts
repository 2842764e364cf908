/**
 * The HTTP side: `/health`, `/metrics`, `/v1/characters` and the web client's
 * static files. Everything else is a JSON 404 (or 405 for other methods).
 */
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { CharacterRegistry } from '../characters/registry.js';
import type { Metrics } from '../metrics/index.js';
import type { ServerLlm } from './llm.js';

/** The web client's folder (served at `/`). */
export const WEB_DIR = fileURLToPath(new URL('../web/', import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
};

/** A file name of the web folder: no slashes, no dot files. */
const STATIC_NAME = /^[a-zA-Z0-9_-][a-zA-Z0-9_.-]*$/;

/** What the routes need from the server. */
export interface RouteContext {
  registry: CharacterRegistry;
  metrics: Metrics;
  llm: ServerLlm;
  sessions: () => { active: number; max: number };
  startedAt: number;
  shuttingDown: () => boolean;
}

/**
 * The URL of a request target, or undefined when it is not one: Node's
 * parser lets absolute-form targets such as `http://[` through, and URL()
 * throws on them (in a handler, an uncaught throw stops the process).
 */
export function requestUrl(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? '/', 'http://localhost');
  } catch {
    return undefined;
  }
}

/**
 * Creates the request handler.
 *
 * @example
 * http.createServer(createHttpHandler(ctx));
 */
export function createHttpHandler(ctx: RouteContext) {
  return async function handleHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const head = req.method === 'HEAD';
    const url = requestUrl(req.url);
    if (url === undefined) {
      return json(res, 400, { error: { message: 'The request target is not a valid URL.' } }, head);
    }
    const path = url.pathname;
    if (req.method !== 'GET' && !head) {
      return json(
        res,
        405,
        { error: { message: `${req.method} is not allowed; use GET.` } },
        head,
        {
          allow: 'GET, HEAD',
        },
      );
    }
    try {
      switch (path) {
        case '/health':
          return json(res, 200, await health(ctx), head);
        case '/metrics': {
          const body = await ctx.metrics.registry.metrics();
          res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType });
          return void res.end(head ? undefined : body);
        }
        case '/v1/characters':
          return json(res, 200, characters(ctx.registry), head);
        case '/':
          return await serveStatic(res, 'index.html', head);
        default: {
          const name = path.slice(1);
          if (STATIC_NAME.test(name) && extension(name) in CONTENT_TYPES) {
            return await serveStatic(res, name, head);
          }
          return notFound(res, path, head);
        }
      }
    } catch (err) {
      if (!res.headersSent) {
        json(
          res,
          500,
          { error: { message: `GET ${path} failed: ${(err as Error).message}` } },
          head,
        );
      } else res.destroy();
    }
  };
}

async function health(ctx: RouteContext): Promise<object> {
  const llm = await ctx.llm.health();
  const errors = ctx.registry.errors().length;
  return {
    status: ctx.shuttingDown() ? 'shutting_down' : llm.ok ? 'ok' : 'degraded',
    uptime_s: Math.round((performance.now() - ctx.startedAt) / 1000),
    sessions: ctx.sessions(),
    characters: { loaded: ctx.registry.list().length, errors },
    llm,
    // Voice comes later: no speech providers are configured in this build.
    stt: null,
    tts: null,
  };
}

function characters(registry: CharacterRegistry): object {
  return {
    characters: registry.list().map((c) => ({
      id: c.id,
      name: c.name,
      description: c.description ?? '',
      voice: c.voice,
      tools: c.tools,
      variants: c.variants,
      greeting: c.greeting ?? null,
      version: c.version,
    })),
    errors: registry.errors().length,
  };
}

async function serveStatic(res: ServerResponse, name: string, head: boolean): Promise<void> {
  let body: Buffer;
  try {
    body = await readFile(`${WEB_DIR}${name}`);
  } catch {
    return notFound(res, `/${name}`, head);
  }
  res.writeHead(200, {
    'content-type': CONTENT_TYPES[extension(name)]!,
    'content-length': body.length,
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
  });
  res.end(head ? undefined : body);
}

function extension(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot === -1 ? '' : name.slice(dot);
}

function notFound(res: ServerResponse, path: string, head: boolean): void {
  json(
    res,
    404,
    {
      error: {
        message: `No route ${path}. Routes: GET /, /health, /metrics, /v1/characters; WebSocket /v1/realtime.`,
      },
    },
    head,
  );
}

function json(
  res: ServerResponse,
  status: number,
  body: object,
  head: boolean,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(head ? undefined : text);
}
