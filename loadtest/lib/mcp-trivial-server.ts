/**
 * The MCP server of the engine bench's MCP section: one trivial tool
 * (`ping` → `pong`), built with the official SDK, served over stdio.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const server = new McpServer({ name: 'troupe-bench', version: '1.0.0' });
server.registerTool('ping', { description: 'Answers pong.' }, () => ({
  content: [{ type: 'text', text: 'pong' }],
}));
await server.connect(new StdioServerTransport());
