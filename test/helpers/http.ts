/**
 * HTTP helpers for server tests: plain requests (with a CA for https) and
 * reading values out of a Prometheus exposition.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Socket } from 'node:net';
import { bound } from './wait.js';

/** An HTTP answer, body as text. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The body parsed as JSON (throws when it is not JSON). */
  json<T = Record<string, unknown>>(): T;
}

/** Options of {@link request}. */
export interface RequestOptions {
  /** @defaultValue GET */
  method?: string;
  /** Trusted CA (PEM) for https URLs. */
  ca?: string;
  headers?: Record<string, string>;
  /** How long the socket may stay silent; never shorter than `DEFAULT_WAIT_MS`. */
  timeoutMs?: number;
  /**
   * Gives the request up after this long, answered or not: for a request
   * that may rightly go unanswered, which the caller asks again.
   */
  giveUpMs?: number;
}

/**
 * Sends one request on a fresh connection (no keep-alive, so no socket
 * outlives the test) and reads the whole answer. The path is sent as given,
 * not normalised the way `fetch` would (`/../x` stays `/../x`).
 *
 * @example
 * const health = (await request(`${t.url}/health`)).json();
 */
export function request(url: string, options: RequestOptions = {}): Promise<HttpAnswer> {
  const target = new URL(url);
  // URL() would fold `/../x` into `/x`: take the path from the string itself.
  const slash = url.indexOf('/', target.protocol.length + 2);
  const path = slash === -1 ? '/' : url.slice(slash);
  const make = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = make(
      {
        host: target.hostname,
        port: target.port,
        path,
        method: options.method ?? 'GET',
        headers: options.headers ?? {},
        agent: false,
        ...(options.ca ? { ca: options.ca } : {}),
        timeout: bound(options.timeoutMs),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            json: <T>() => JSON.parse(body) as T,
          });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${options.method ?? 'GET'} ${url}: no answer`)));
    if (options.giveUpMs !== undefined) {
      const timer = setTimeout(() => req.destroy(new Error(`${url}: given up`)), options.giveUpMs);
      req.on('close', () => clearTimeout(timer));
    }
    req.on('error', reject);
    req.end();
  });
}

/** One series of a Prometheus exposition. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text format (comments skipped). */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!;
    }
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/**
 * The samples of counters and histograms (buckets, sums, counts), which
 * must never fall while the instance runs, by name and labels.
 *
 * @example expect(growingSamples(after).get(key)).toBeGreaterThanOrEqual(growingSamples(before).get(key)!)
 */
export function growingSamples(text: string): Map<string, number> {
  const kinds = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) kinds.set(m[1]!, m[2]!);
  const family = (name: string): string | undefined =>
    [name, name.replace(/_(bucket|sum|count)$/, '')].find((n) => kinds.has(n));
  const samples = new Map<string, number>();
  for (const s of parseMetrics(text)) {
    const kind = kinds.get(family(s.name) ?? '');
    if (kind !== 'counter' && kind !== 'histogram') continue;
    const labels = Object.entries(s.labels).sort(([a], [b]) => (a < b ? -1 : 1));
    samples.set(`${s.name}${JSON.stringify(labels)}`, s.value);
  }
  return samples;
}

/**
 * The value of the series `name` whose labels include `labels` (summed when
 * several do); undefined when none does.
 *
 * @example
 * metricValue(text, 'troupe_connections_rejected_total', { reason: 'auth' })
 */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const matching = parseMetrics(text).filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (matching.length === 0) return undefined;
  return matching.reduce((sum, s) => sum + s.value, 0);
}

/** GET /metrics of a server, as text. */
export async function scrape(baseUrl: string, ca?: string): Promise<string> {
  const res = await request(`${baseUrl}/metrics`, ca ? { ca } : {});
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}: ${res.body}`);
  return res.body;
}

/**
 * A bare TCP socket that has sent `text` as is: for requests a client
 * library would not send. Our end stays open (allowHalfOpen) until the test
 * ends or destroys it; socket errors are ignored.
 *
 * @example
 * const socket = await rawRequest(port, 'GET /a b HTTP/1.1\r\nHost: x\r\n\r\n');
 * expect(await statusLine(socket)).toBe('HTTP/1.1 400 Bad Request');
 */
export async function rawRequest(port: number, text: string): Promise<Socket> {
  const socket = new Socket({ allowHalfOpen: true });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.connect(port, '127.0.0.1', resolve));
  socket.write(text);
  return socket;
}

/**
 * A bare TCP socket that has sent a WebSocket upgrade request for `target`,
 * with `headers` besides (`{ 'X-Forwarded-For': '10.0.0.7' }`: as through a
 * load balancer).
 */
export function rawUpgrade(
  port: number,
  target: string,
  headers: Record<string, string> = {},
): Promise<Socket> {
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return rawRequest(
    port,
    `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
  );
}

/**
 * The whole answer on a raw socket, head and body: up to its
 * Content-Length, or else until the other end closes (unbounded: wrap it in
 * `within`).
 */
export function httpAnswer(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('end', () => resolve(text));
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, head))?.[1];
      if (head !== -1 && length !== undefined && text.length >= head + 4 + Number(length)) {
        resolve(text);
      }
    });
  });
}

/** The status line of the answer on a raw socket (unbounded: wrap it in `within`). */
export function statusLine(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString('latin1');
      const end = text.indexOf('\r\n');
      if (end === -1) return;
      socket.off('data', onData);
      resolve(text.slice(0, end));
    };
    socket.on('data', onData);
  });
}

/**
 * How many connections the kernel keeps waiting on the listening socket of
 * `port` on 127.0.0.1 (`ss`'s Send-Q for a socket in LISTEN), and the most
 * it allows (`net.core.somaxconn`).
 */
export function listenQueue(port: number): { backlog: number; cap: number } {
  const line = execFileSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' }).trim();
  const fields = line.split(/\s+/);
  if (fields[0] !== 'LISTEN') throw new Error(`ss: no listening socket on port ${port}: ${line}`);
  const cap = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
  return { backlog: Number(fields[2]), cap };
}
