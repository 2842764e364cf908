/**
 * Time an MCP tool call gets before it ends as `timeout`, when its server
 * entry sets no `timeoutMs`. Longer than a local tool's 100 ms: the call
 * crosses a process or the network.
 */
export const DEFAULT_MCP_TOOL_TIMEOUT_MS = 5_000;
/** Time to connect to an MCP server and list its tools, at load and on reconnect. */
export const MCP_CONNECT_TIMEOUT_MS = 30_000;
/** Most MCP servers one character may list. */
export const MAX_MCP_SERVERS = 16;
/** What an MCP server's `label` may be: it is `server_label` on `mcp_call` items and a log field. */
export const MCP_LABEL_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
/** Longest line of an stdio server's stderr that is logged; longer lines are cut. */
export const MCP_STDERR_LINE_MAX = 500;
/** Time an HTTP MCP server gets to answer the DELETE that ends its session, when a connection closes. */
export const MCP_TERMINATE_TIMEOUT_MS = 2_000;
