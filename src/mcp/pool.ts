/**
 * The process's MCP connections: one per server (label and target), shared by
 * every character that lists it and every session of those characters. A
 * loaded character holds a lease on each of its servers; the connection
 * closes when the last lease is released (the character is reloaded without
 * it, removed, or the registry closes at shutdown).
 */
import { canonicalJson } from '../tools/library.js';
import type { ToolLogger } from '../tools/types.js';
import { McpConnection } from './connection.js';
import type { McpMetrics } from './metrics.js';
import type { McpServerConfig } from './types.js';

/** A hold on a shared connection; release it once. */
export interface McpLease {
  readonly connection: McpConnection;
  /** Idempotent; the last release closes the connection. */
  release(): Promise<void>;
}

/** Options of {@link McpPool.acquire}. */
export interface McpAcquireOptions {
  /** Working directory of an stdio server. */
  cwd: string;
  log?: ToolLogger;
  /** Start a new client even if one is open (a reload). @defaultValue false */
  fresh?: boolean;
  /** Time to connect. @defaultValue MCP_CONNECT_TIMEOUT_MS */
  connectTimeoutMs?: number;
  /** Where the connection's calls and state are recorded while the lease is held. */
  metrics?: McpMetrics;
}

/** Connections by server; see the module comment. */
export class McpPool {
  #entries = new Map<string, { connection: McpConnection; leases: number }>();

  /** Open connections (for tests and metrics). */
  get size(): number {
    return this.#entries.size;
  }

  acquire(config: McpServerConfig, options: McpAcquireOptions): McpLease {
    const key = canonicalJson({
      label: config.label,
      url: config.url,
      headers: config.headers,
      command: config.command,
      args: config.args,
      env: config.env,
      cwd: config.command === undefined ? undefined : options.cwd,
    });
    let entry = this.#entries.get(key);
    if (entry === undefined || entry.connection.closed) {
      entry = {
        connection: new McpConnection(config, {
          cwd: options.cwd,
          ...(options.log ? { log: options.log } : {}),
          ...(options.connectTimeoutMs ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
        }),
        leases: 0,
      };
      this.#entries.set(key, entry);
    } else if (options.fresh) entry.connection.restart();
    entry.leases++;
    const held = entry;
    const unobserve = options.metrics ? held.connection.observe(options.metrics) : undefined;
    let released = false;
    return {
      connection: held.connection,
      release: async () => {
        if (released) return;
        released = true;
        held.leases--;
        unobserve?.();
        if (held.leases > 0) return;
        if (this.#entries.get(key) === held) this.#entries.delete(key);
        await held.connection.close();
      },
    };
  }

  /** Closes every connection (process exit); leases still held become no-ops. */
  async closeAll(): Promise<void> {
    const all = [...this.#entries.values()];
    this.#entries.clear();
    await Promise.all(all.map((e) => e.connection.close()));
  }
}

/** The process's pool. */
export const mcpPool = new McpPool();
