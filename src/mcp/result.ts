/**
 * What the model is told of an MCP tool result. MCP results are content
 * arrays (text, images, audio, resources) with optional structured content
 * and an `isError` flag; a chat model's tool message is text. The rule:
 *
 * - text blocks are the output, joined by newlines;
 * - without text, `structuredContent` is the output, as JSON;
 * - images, audio and resources the model cannot read become a short note
 *   (`[image: image/png, 2048 bytes]`, `[resource: file:///a.txt]`), and an
 *   embedded text resource is its text;
 * - nothing at all is `(no output)`;
 * - `isError: true` makes the call's outcome `error`, the text its reason.
 *
 * The executor then caps the output like any tool's.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { TroupeError } from '../errors.js';

/** The MCP server answered the call with `isError: true`. */
export class McpToolError extends TroupeError {
  override name = 'McpToolError';
  constructor(message: string) {
    super('E_MCP_TOOL', message);
  }
}

type Block = CallToolResult['content'][number];

/** The output of a successful result; throws {@link McpToolError} for `isError`. */
export function mcpOutput(result: CallToolResult): string {
  const content: readonly Block[] = Array.isArray(result.content) ? result.content : [];
  const texts: string[] = [];
  const notes: string[] = [];
  for (const block of content) {
    const text = blockText(block);
    if (text.kind === 'text') texts.push(text.value);
    else notes.push(text.value);
  }
  let output = texts.join('\n');
  if (texts.length === 0 && result.structuredContent !== undefined) {
    output = JSON.stringify(result.structuredContent);
  }
  // A server on the 2024 protocol may answer `{ toolResult }` instead of content.
  if (output === '' && notes.length === 0 && 'toolResult' in result) {
    output = JSON.stringify(result.toolResult) ?? '';
  }
  const all = [output, ...notes].filter((s) => s !== '').join('\n');
  if (result.isError === true) {
    // One line: the executor shows the first line of an error's message.
    throw new McpToolError(all.replace(/\s*\n\s*/g, ' ').trim() || 'the server reported an error');
  }
  return all === '' ? '(no output)' : all;
}

function blockText(block: Block): { kind: 'text' | 'note'; value: string } {
  switch (block.type) {
    case 'text':
      return { kind: 'text', value: block.text };
    case 'image':
    case 'audio':
      return {
        kind: 'note',
        value: `[${block.type}: ${block.mimeType}, ${base64Bytes(block.data)} bytes]`,
      };
    case 'resource_link':
      return {
        kind: 'note',
        value: `[resource: ${block.name ? `${block.name} ` : ''}${block.uri}]`,
      };
    case 'resource': {
      const r = block.resource;
      if ('text' in r && typeof r.text === 'string') return { kind: 'text', value: r.text };
      const blob =
        'blob' in r && typeof r.blob === 'string' ? `, ${base64Bytes(r.blob)} bytes` : '';
      return {
        kind: 'note',
        value: `[resource: ${r.uri}${r.mimeType ? ` (${r.mimeType})` : ''}${blob}]`,
      };
    }
    default:
      return { kind: 'note', value: `[${String((block as { type?: unknown }).type)} content]` };
  }
}

function base64Bytes(data: string): number {
  const pad = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - pad);
}
