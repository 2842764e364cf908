import { describe, expect, it } from 'vitest';
import { LlmStreamError } from '../../src/errors.js';
import { readSseChunks } from '../../src/llm/sse.js';

async function* pieces(...parts: Array<string | Uint8Array>) {
  for (const p of parts) yield typeof p === 'string' ? Buffer.from(p) : p;
}

async function read(...parts: Array<string | Uint8Array>) {
  const out = [];
  for await (const c of readSseChunks(pieces(...parts))) out.push(c);
  return out;
}

describe('SSE reader', () => {
  it('yields each data payload as JSON and stops at [DONE]', async () => {
    const out = await read(
      'data: {"a":1}\n\ndata: {"a":2}\n\n',
      'data: [DONE]\n\ndata: {"a":3}\n\n',
    );
    expect(out).toEqual([{ a: 1 }, { a: 2 }]);
  });

  it('joins events split anywhere across reads, also mid-line and mid-prefix', async () => {
    const text =
      'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n';
    for (let cut = 1; cut < text.length; cut++) {
      expect(await read(text.slice(0, cut), text.slice(cut))).toEqual([
        { choices: [{ delta: { content: 'hi' } }] },
        { b: 2 },
      ]);
    }
  });

  it('keeps a multi-byte character whole when its bytes arrive in two reads', async () => {
    const bytes = Buffer.from('data: {"t":"café 🍵"}\n\n');
    const at = bytes.indexOf(0xf0) + 2; // inside the emoji
    expect(await read(bytes.subarray(0, at), bytes.subarray(at))).toEqual([{ t: 'café 🍵' }]);
  });

  it('accepts CRLF line ends, data without a space, comments and other fields', async () => {
    const out = await read(': keep-alive\r\nevent: message\r\nid: 7\r\ndata:{"a":1}\r\n\r\n');
    expect(out).toEqual([{ a: 1 }]);
  });

  it('joins multi-line data with newlines', async () => {
    expect(await read('data: {"a":\ndata: 1}\n\n')).toEqual([{ a: 1 }]);
  });

  it('reads a last event that has no blank line after it', async () => {
    expect(await read('data: {"a":1}\n\ndata: {"a":2}')).toEqual([{ a: 1 }, { a: 2 }]);
  });

  it('ends quietly when the body ends without [DONE]', async () => {
    expect(await read('data: {"a":1}\n\n')).toEqual([{ a: 1 }]);
  });

  it('throws an LlmStreamError for an error event mid-stream, with its message and code', async () => {
    const run = read(
      'data: {"a":1}\n\n',
      'data: {"error":{"message":"model overloaded","code":503}}\n\n',
    );
    await expect(run).rejects.toThrow(LlmStreamError);
    await expect(
      read('data: {"error":{"message":"model overloaded","code":503}}\n\n'),
    ).rejects.toMatchObject({ detail: expect.stringContaining('model overloaded'), status: 503 });
  });

  it('throws an LlmStreamError for a payload that is not JSON', async () => {
    await expect(read('data: {"a":\n\n')).rejects.toThrow(/not JSON/);
    await expect(read('data: 42\n\n')).rejects.toThrow(/not a JSON object/);
  });
});
