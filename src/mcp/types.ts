/**
 * An MCP server a character takes tools from: a streamable-HTTP `url`, or a
 * `command` (with `args`) started as a child process speaking MCP over stdio.
 *
 * @example { label: 'files', command: 'node', args: ['mcp/files-server.mjs'], allowedTools: ['read_file'] }
 */
export interface McpServerConfig {
  /** Names the server: `server_label` of its `mcp_call` items, and in logs and errors. */
  label: string;
  /** A streamable-HTTP MCP endpoint such as `http://127.0.0.1:8931/mcp`. */
  url?: string;
  /** The program of an stdio server, started in the character's folder. */
  command?: string;
  /** Its arguments. */
  args?: readonly string[];
  /** Extra environment for an stdio server (it gets only PATH, HOME and the like otherwise). */
  env?: Readonly<Record<string, string>>;
  /** HTTP headers sent to a `url` server, e.g. `{ Authorization: `Bearer ${process.env.TOKEN}` }`. */
  headers?: Readonly<Record<string, string>>;
  /** The server's tools the model is offered. @defaultValue all of them */
  allowedTools?: readonly string[];
  /** Time each call of this server's tools gets. @defaultValue 5000 ({@link DEFAULT_MCP_TOOL_TIMEOUT_MS}) */
  timeoutMs?: number;
}

/** What loading found for one MCP server of a character. */
export interface McpServerStatus {
  label: string;
  /** The server's tools the character offers (after `allowedTools`). */
  tools: readonly string[];
  /** Why the server's tools are missing, when they are. */
  error?: string;
}
