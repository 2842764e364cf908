/** Troupe's public API: what character authors and embedders import. */
export * from './errors.js';
export * from './characters/index.js';
export * from './llm/index.js';
export * from './tools/index.js';
export type { McpServerConfig, McpServerStatus } from './mcp/types.js';
export { DEFAULT_MCP_TOOL_TIMEOUT_MS } from './mcp/constants.js';
