/**
 * A character's MCP tools: connect to each of its servers, list their tools,
 * keep the allowed ones whose names and input schemas pass the same checks
 * as a character's own tools, and wrap each as a {@link RunnableTool} that
 * calls the server under the executor's rules (timeout, AbortSignal, one
 * outcome, output cap).
 */
import { dirname } from 'node:path';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { checkToolParameters, type FieldProblem } from '../characters/validate.js';
import { MAX_CHARACTER_TOOLS } from '../characters/constants.js';
import { TOOL_NAME_PATTERN } from '../tools/constants.js';
import { compileJsonSchema } from '../tools/define-tool.js';
import type { Toolset } from '../tools/library.js';
import type { RunnableTool, ToolLogger } from '../tools/types.js';
import { McpConnectionError, describe, type McpConnection } from './connection.js';
import { DEFAULT_MCP_TOOL_TIMEOUT_MS } from './constants.js';
import { mcpPool, type McpLease, type McpPool } from './pool.js';
import type { McpMetrics } from './metrics.js';
import { mcpOutput } from './result.js';
import type { McpServerConfig, McpServerStatus } from './types.js';

/** Options of {@link connectMcpServers}. */
export interface McpToolsOptions {
  /** The character's file: stdio servers start in its folder. */
  file: string;
  /** Names of the character's own tools (an MCP tool may not take one). */
  ownTools: readonly string[];
  /** Reconnect servers already open (a reload). @defaultValue false */
  fresh?: boolean;
  log?: ToolLogger;
  /** @defaultValue the process's pool */
  pool?: McpPool;
  /** Where the servers' calls, connections and tool counts are recorded. */
  metrics?: McpMetrics;
}

/** What connecting a character's MCP servers produced. */
export interface McpTools {
  tools: RunnableTool[];
  servers: McpServerStatus[];
  /** Problems to report (`troupe check` errors, warnings at start); the character loads without those tools. */
  problems: FieldProblem[];
  /** The connections the tools use; released when the character is replaced or removed. */
  leases: McpLease[];
}

/**
 * Connects a character's MCP servers (all at once) and lists their tools.
 * Never throws: an unreachable server is a problem and its tools are left out.
 */
export async function connectMcpServers(
  configs: readonly McpServerConfig[],
  options: McpToolsOptions,
): Promise<McpTools> {
  const pool = options.pool ?? mcpPool;
  const listed = await Promise.all(
    configs.map(async (config) => {
      const lease = pool.acquire(config, {
        cwd: dirname(options.file),
        ...(options.log ? { log: options.log } : {}),
        ...(options.fresh ? { fresh: true } : {}),
        ...(options.metrics ? { metrics: options.metrics } : {}),
      });
      try {
        return { config, lease, tools: await lease.connection.listTools() };
      } catch (err) {
        await lease.release();
        return { config, lease: undefined, tools: undefined, err };
      }
    }),
  );
  const out: McpTools = { tools: [], servers: [], problems: [], leases: [] };
  const taken = new Map<string, string>(options.ownTools.map((n) => [n, 'the character']));
  listed.forEach((entry, i) => {
    const { config } = entry;
    const at = ['mcp', i];
    if (entry.lease === undefined) {
      const error =
        entry.err instanceof McpConnectionError ? entry.err.message : describe(entry.err);
      out.servers.push({ label: config.label, tools: [], error });
      options.metrics?.tools.set({ server: config.label }, 0);
      out.problems.push({
        kind: 'mcp',
        path: at,
        detail: `${error}; the character loads without this server's tools. Start the server (or fix ${config.url !== undefined ? 'url' : 'command and args'}), then save the character to reload it`,
      });
      return;
    }
    out.leases.push(entry.lease);
    const names: string[] = [];
    for (const tool of pick(entry.tools, config, at, out.problems)) {
      const problem = toolProblem(tool, config.label, taken);
      if (problem !== undefined) {
        out.problems.push({ kind: 'mcp', path: at, detail: problem });
        continue;
      }
      if (options.ownTools.length + out.tools.length >= MAX_CHARACTER_TOOLS) {
        out.problems.push({
          kind: 'mcp',
          path: at,
          detail: `MCP server "${config.label}": tool "${tool.name}" is left out, the character already has ${MAX_CHARACTER_TOOLS} tools; list fewer in allowedTools`,
        });
        continue;
      }
      taken.set(tool.name, `MCP server "${config.label}"`);
      names.push(tool.name);
      out.tools.push(runnable(tool, config, entry.lease.connection));
    }
    out.servers.push({ label: config.label, tools: names });
    options.metrics?.tools.set({ server: config.label }, names.length);
  });
  return out;
}

/** The listed tools `allowedTools` lets through; an allowed name the server lacks is a problem. */
function pick(
  tools: readonly Tool[],
  config: McpServerConfig,
  at: PropertyKey[],
  problems: FieldProblem[],
): Tool[] {
  if (config.allowedTools === undefined) return [...tools];
  const listed = new Set(tools.map((t) => t.name));
  config.allowedTools.forEach((name, j) => {
    if (!listed.has(name)) {
      problems.push({
        kind: 'mcp',
        path: [...at, 'allowedTools', j],
        detail: `MCP server "${config.label}" has no tool "${name}"; it lists ${[...listed].map((n) => `"${n}"`).join(', ') || 'no tools'}`,
      });
    }
  });
  const allowed = new Set(config.allowedTools);
  return tools.filter((t) => allowed.has(t.name));
}

function toolProblem(
  tool: Tool,
  label: string,
  taken: ReadonlyMap<string, string>,
): string | undefined {
  const name = tool.name;
  if (!TOOL_NAME_PATTERN.test(name)) {
    return `MCP server "${label}": tool ${JSON.stringify(name)} is left out, its name is not one models accept (1-64 letters, digits, "_" or "-")`;
  }
  const owner = taken.get(name);
  if (owner !== undefined) {
    return `MCP server "${label}": tool "${name}" clashes with a tool of the same name from ${owner}, so it is left out; rename the character's tool, or leave it out with allowedTools`;
  }
  const bad = checkToolParameters(name, tool.inputSchema);
  if (bad !== undefined) {
    return `MCP server "${label}": tool "${name}" is left out, its inputSchema is not usable as tool parameters (${bad})`;
  }
  return undefined;
}

function runnable(tool: Tool, config: McpServerConfig, connection: McpConnection): RunnableTool {
  const timeoutMs = config.timeoutMs ?? DEFAULT_MCP_TOOL_TIMEOUT_MS;
  const parameters = tool.inputSchema as Record<string, unknown>;
  return {
    description: {
      name: tool.name,
      description: tool.description ?? tool.title ?? '',
      parameters,
    },
    schema: compileJsonSchema(tool.name, parameters),
    timeoutMs,
    serverLabel: config.label,
    handler: async (args, ctx) =>
      // The executor's timer aborts ctx.signal; the SDK's own timeout is only a backstop.
      mcpOutput(
        await connection.callTool(tool.name, args, {
          signal: ctx.signal,
          timeoutMs: timeoutMs + 1_000,
        }),
      ),
  };
}

/** Each variant's toolset with the MCP tools after the character's own. */
export function withMcpTools(
  toolsets: ReadonlyMap<string, Toolset>,
  tools: readonly RunnableTool[],
): Map<string, Toolset> {
  const out = new Map<string, Toolset>();
  for (const [variant, set] of toolsets) {
    if (tools.length === 0) {
      out.set(variant, set);
      continue;
    }
    out.set(variant, {
      variant: set.variant,
      tools: new Map([...set.tools, ...tools.map((t) => [t.description.name, t] as const)]),
      descriptions: [...set.descriptions, ...tools.map((t) => t.description)],
    });
  }
  return out;
}
