/**
 * One connection to one MCP server, through the official SDK client
 * (`@modelcontextprotocol/sdk`): streamable HTTP for a `url`, stdio for a
 * `command`. It connects on first use, reconnects on the next call after the
 * server went away, and is shared by every session of the process (see
 * {@link McpPool}).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StdioClientTransport,
  getDefaultEnvironment,
} from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ErrorCode,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { TroupeError } from '../errors.js';
import { ToolTimeoutError } from '../tools/executor.js';
import type { ToolLogger } from '../tools/types.js';
import {
  MCP_CONNECT_TIMEOUT_MS,
  MCP_STDERR_LINE_MAX,
  MCP_TERMINATE_TIMEOUT_MS,
} from './constants.js';
import { MCP_CALL_OUTCOMES, type McpCallOutcome, type McpMetrics } from './metrics.js';
import type { McpServerConfig } from './types.js';

/** How Troupe introduces itself to MCP servers. */
const CLIENT_INFO = { name: 'troupe', version: '0.1.0' };

/** An MCP server could not be reached, or broke the protocol. */
export class McpConnectionError extends TroupeError {
  override name = 'McpConnectionError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('E_MCP_CONNECT', message, { ...options, retryable: true });
  }
}

/** Options of {@link McpConnection}. */
export interface McpConnectionOptions {
  /** Working directory of an stdio server (the character's folder). */
  cwd: string;
  log?: ToolLogger;
  /** Time to connect (the MCP handshake). @defaultValue 10000 */
  connectTimeoutMs?: number;
}

interface Live {
  client: Client;
  transport: Transport;
  /** The server went away: there is no session left to end. */
  lost: boolean;
  /** Calls running on this client; a retired client closes once they end. */
  running: number;
  retired: boolean;
}

/** One MCP server, one SDK client at a time. */
export class McpConnection {
  readonly label: string;
  readonly #config: McpServerConfig;
  readonly #options: McpConnectionOptions;
  #live: Promise<Live> | undefined;
  #closed = false;
  /** The last connection was lost (not closed by us): the next one is a reconnect. */
  #lost = false;
  #connected = false;
  /** Metrics of the servers (Prometheus registries) whose characters hold this connection. */
  readonly #sinks = new Map<McpMetrics, number>();

  constructor(config: McpServerConfig, options: McpConnectionOptions) {
    this.label = config.label;
    this.#config = config;
    this.#options = options;
  }

  /** Where the server is, for messages: its URL or its command line. */
  get target(): string {
    const c = this.#config;
    return c.url ?? [c.command, ...(c.args ?? [])].join(' ');
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Records this connection's events in `metrics` until the returned function is called. */
  observe(metrics: McpMetrics): () => void {
    this.#sinks.set(metrics, (this.#sinks.get(metrics) ?? 0) + 1);
    metrics.connected.set({ server: this.label }, this.#connected ? 1 : 0);
    // Every outcome from zero, so rates and alerts work before the first failure.
    for (const outcome of MCP_CALL_OUTCOMES) metrics.calls.inc({ server: this.label, outcome }, 0);
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      const n = (this.#sinks.get(metrics) ?? 1) - 1;
      if (n > 0) return void this.#sinks.set(metrics, n);
      // That server's characters no longer use this MCP server.
      this.#sinks.delete(metrics);
      metrics.connected.set({ server: this.label }, 0);
      metrics.tools.set({ server: this.label }, 0);
    };
  }

  #record(each: (m: McpMetrics, labels: { server: string }) => void): void {
    for (const m of this.#sinks.keys()) each(m, { server: this.label });
  }

  #setConnected(connected: boolean): void {
    this.#connected = connected;
    this.#record((m, l) => m.connected.set(l, connected ? 1 : 0));
  }

  /** Every tool the server lists (all pages). */
  async listTools(signal?: AbortSignal): Promise<Tool[]> {
    const live = await this.#connect(signal);
    const tools: Tool[] = [];
    let cursor: string | undefined;
    try {
      do {
        const page = await live.client.listTools(cursor === undefined ? {} : { cursor }, {
          signal,
          timeout: this.#options.connectTimeoutMs ?? MCP_CONNECT_TIMEOUT_MS,
        });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
    } catch (err) {
      this.#failed(live, err);
      throw err;
    }
    return tools;
  }

  /**
   * Calls a tool. `signal` ends the request (the SDK tells the server it was
   * cancelled); `timeoutMs` is a backstop for callers without one.
   */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    options: { signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<CallToolResult> {
    const started = performance.now();
    let outcome: McpCallOutcome = 'failed';
    let live: Live | undefined;
    try {
      live = await this.#connect(options.signal);
      live.running++;
      const result = (await live.client.callTool({ name, arguments: args }, undefined, {
        signal: options.signal,
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      })) as CallToolResult;
      outcome = result.isError ? 'error' : 'ok';
      return result;
    } catch (err) {
      outcome = callOutcome(err, options.signal);
      if (live) this.#failed(live, err);
      throw err;
    } finally {
      const seconds = (performance.now() - started) / 1000;
      this.#record((m, l) => {
        m.calls.inc({ ...l, outcome });
        m.callSeconds.observe(l, seconds);
      });
      if (live) {
        live.running--;
        if (live.retired && live.running === 0) void endQuietly(live);
      }
    }
  }

  /**
   * Starts over with a new client (a reloaded character picks up a changed
   * server). Calls running on the old client finish on it; it closes after them.
   */
  restart(): void {
    const old = this.#live;
    this.#live = undefined;
    if (old)
      void old.then(
        (live) => this.#retire(live),
        () => undefined,
      );
  }

  /** Closes the client (ends an stdio server's process); later calls fail. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#setConnected(false);
    const live = this.#live;
    this.#live = undefined;
    if (live)
      await live.then(
        (l) => endQuietly(l),
        () => undefined,
      );
  }

  #connect(signal?: AbortSignal): Promise<Live> {
    if (this.#closed) {
      return Promise.reject(
        new McpConnectionError(
          `MCP server "${this.label}" is closed (the server is shutting down or the character was reloaded without it)`,
        ),
      );
    }
    if (this.#live === undefined) {
      // Not the caller's signal: the connection is shared, one caller giving up must not end it.
      const opening = this.#open();
      this.#live = opening;
      opening.catch(() => {
        if (this.#live === opening) this.#live = undefined;
      });
    }
    return untilAborted(this.#live, signal);
  }

  async #open(): Promise<Live> {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    const transport = this.#transport();
    const live: Live = { client, transport, lost: false, running: 0, retired: false };
    // The server went away (an stdio process exited, the HTTP session ended): the next call reconnects.
    client.onclose = () => this.#drop(live);
    client.onerror = (err) =>
      this.#options.log?.debug({ mcp: this.label, err }, 'mcp transport error');
    try {
      await client.connect(transport, {
        timeout: this.#options.connectTimeoutMs ?? MCP_CONNECT_TIMEOUT_MS,
      });
    } catch (err) {
      this.#record((m, l) => m.connects.inc({ ...l, outcome: 'failed' }));
      await closeQuietly(client);
      throw new McpConnectionError(
        `cannot connect to MCP server "${this.label}" (${this.target}): ${describe(err)}`,
        { cause: err },
      );
    }
    if (this.#closed) {
      await endQuietly(live);
      throw new McpConnectionError(`MCP server "${this.label}" is closed`);
    }
    this.#record((m, l) => m.connects.inc({ ...l, outcome: 'ok' }));
    if (this.#lost) this.#record((m, l) => m.reconnects.inc(l));
    this.#lost = false;
    this.#setConnected(true);
    this.#options.log?.info({ mcp: this.label, target: this.target }, 'mcp server connected');
    return live;
  }

  #transport(): Transport {
    const c = this.#config;
    if (c.url !== undefined) {
      return new StreamableHTTPClientTransport(new URL(c.url), {
        requestInit: { headers: { ...c.headers } },
      });
    }
    const transport = new StdioClientTransport({
      command: c.command!,
      args: [...(c.args ?? [])],
      env: { ...getDefaultEnvironment(), ...c.env },
      cwd: this.#options.cwd,
      stderr: 'pipe',
    });
    // What the server prints on stderr goes to the log, a line at a time.
    let partial = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim() === '') continue;
        this.#options.log?.info(
          { mcp: this.label, line: line.slice(0, MCP_STDERR_LINE_MAX) },
          'mcp server stderr',
        );
      }
    });
    return transport;
  }

  /** After a failed request: a broken connection is dropped so the next call reconnects. */
  #failed(live: Live, err: unknown): void {
    if (err instanceof McpError && err.code !== ErrorCode.ConnectionClosed) return; // the server answered
    if (isAbort(err)) return; // our own timeout or cancel; the connection is fine
    this.#drop(live);
  }

  #drop(live: Live): void {
    void this.#live?.then(
      (current) => {
        if (current === live) {
          this.#live = undefined;
          this.#lost = true;
          live.lost = true;
          this.#setConnected(false);
          this.#record((m, l) => m.disconnects.inc(l));
          this.#options.log?.warn(
            { mcp: this.label, target: this.target },
            'mcp server connection lost',
          );
          this.#retire(live);
        }
      },
      () => undefined,
    );
  }

  #retire(live: Live): void {
    if (live.retired) return;
    live.retired = true;
    if (live.running === 0) void endQuietly(live);
  }
}

/** `promise`, or a rejection with the signal's reason when it aborts first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err as Error);
      },
    );
  });
}

/** How a call that threw ended. */
function callOutcome(err: unknown, signal: AbortSignal | undefined): McpCallOutcome {
  if (signal?.aborted) return signal.reason instanceof ToolTimeoutError ? 'timeout' : 'cancelled';
  if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) return 'timeout';
  return 'failed';
}

function isAbort(err: unknown): boolean {
  return (
    err instanceof Error &&
    (err.name === 'AbortError' ||
      (err instanceof McpError && err.code === ErrorCode.RequestTimeout))
  );
}

/** The reason a connection failed, in one line. */
export function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause =
    err.cause instanceof Error && !err.message.includes(err.cause.message)
      ? `: ${err.cause.message}`
      : '';
  const code = (err as { code?: unknown }).code;
  const text = `${err.message}${cause}`.split('\n', 1)[0]!;
  return typeof code === 'string' && !text.includes(code) ? `${code} ${text}` : text;
}

/**
 * Ends a client: a streamable-HTTP session is ended first with the DELETE the
 * spec asks for (so the server frees it at once), unless the server went
 * away; then the transport closes (an stdio server's process ends).
 */
async function endQuietly(live: Live): Promise<void> {
  const { transport } = live;
  if (!live.lost && transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      // A server without session termination answers 405, which the SDK accepts.
      transport.terminateSession().catch(() => undefined),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, MCP_TERMINATE_TIMEOUT_MS);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }
  await closeQuietly(live.client);
}

async function closeQuietly(client: Client): Promise<void> {
  try {
    await client.close();
  } catch {
    // Closing a broken connection may throw; it is gone either way.
  }
}
