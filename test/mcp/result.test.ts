import { describe, expect, it } from 'vitest';
import { McpToolError, mcpOutput } from '../../src/mcp/result.js';

describe('what the model is told of an MCP result', () => {
  it('joins text blocks and notes what it cannot read', () => {
    expect(
      mcpOutput({
        content: [
          { type: 'text', text: 'one' },
          { type: 'audio', data: 'AAAA', mimeType: 'audio/wav' },
          { type: 'text', text: 'two' },
          { type: 'resource_link', uri: 'file:///a.txt', name: 'a.txt' },
          {
            type: 'resource',
            resource: {
              uri: 'file:///b.bin',
              mimeType: 'application/octet-stream',
              blob: 'AAAAAA==',
            },
          },
          { type: 'resource', resource: { uri: 'file:///c.txt', text: 'three' } },
        ],
      }),
    ).toBe(
      'one\ntwo\nthree\n[audio: audio/wav, 3 bytes]\n[resource: a.txt file:///a.txt]\n[resource: file:///b.bin (application/octet-stream), 4 bytes]',
    );
  });

  it('uses structured content when there is no text, and says when there is nothing', () => {
    expect(mcpOutput({ content: [], structuredContent: { sum: 5 } })).toBe('{"sum":5}');
    expect(
      mcpOutput({ content: [{ type: 'text', text: '5' }], structuredContent: { sum: 5 } }),
    ).toBe('5');
    expect(mcpOutput({ content: [] })).toBe('(no output)');
  });

  it('turns isError into an error with the text on one line', () => {
    const run = () =>
      mcpOutput({
        isError: true,
        content: [{ type: 'text', text: 'no such city\n  try another' }],
      });
    expect(run).toThrow(McpToolError);
    expect(run).toThrow('no such city try another');
    expect(() => mcpOutput({ isError: true, content: [] })).toThrow('the server reported an error');
  });
});
