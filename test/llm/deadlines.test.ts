import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLlmClient } from '../../src/llm/client.js';
import { SseParser } from '../../src/llm/sse.js';
import { runTurn, type TurnEvent } from '../../src/llm/turn-runner.js';
import { NO_TOOLS } from '../../src/tools/library.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { TRANSPORTS, conversation } from '../helpers/turn.js';

let server: Server | undefined;
const timers: NodeJS.Timeout[] = [];
afterEach(async () => {
  for (const t of timers.splice(0)) clearInterval(t);
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

async function serve(handler: (res: ServerResponse) => void): Promise<string> {
  server = createServer((req, res) => {
    if (req.url?.endsWith('/models')) return void res.end('{"data":[{"id":"m"}]}');
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    handler(res);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

const chunk = (content: string) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

async function drain(stream: AsyncIterable<unknown>) {
  for await (const _ of stream) void _;
}

describe('event-stream lines', () => {
  it('fails a line longer than the cap instead of buffering it', () => {
    const parser = new SseParser({ maxLineBytes: 1024 });
    expect(parser.push('data: {"a":"' + 'x'.repeat(10_000))).toEqual([]);
    expect(parser.done).toBe(true);
    expect(() => parser.end()).toThrow(/longer than 1024 bytes/);
  });

  it('keeps the lines before it and takes lines up to the cap', () => {
    const parser = new SseParser({ maxLineBytes: 1024 });
    const out = parser.push(chunk('hi') + chunk('y'.repeat(900)));
    expect(out).toHaveLength(2);
  });
});

describe.each(TRANSPORTS)('LLM deadlines over the %s transport', (transport) => {
  const client = (url: string, extra: object) =>
    createLlmClient({ baseURL: url, model: 'm', maxRetries: 0, transport, ...extra });

  it('fails a stream that sends only comments as silent', async () => {
    const url = await serve((res) => {
      res.write(chunk('Hel'));
      timers.push(setInterval(() => res.write(': keep-alive\n\n'), 20));
    });
    const llm = await client(url, { timeoutMs: 300 });
    await expect(drain(llm.stream({ messages: [] }, new AbortController().signal))).rejects.toThrow(
      'The LLM was silent for 300 ms.',
    );
  });

  it('fails a stream that goes on past the total deadline', async () => {
    const url = await serve((res) => {
      timers.push(setInterval(() => res.write(chunk('la ')), 20));
    });
    const llm = await client(url, { timeoutMs: 10_000, totalTimeoutMs: 400 });
    await expect(drain(llm.stream({ messages: [] }, new AbortController().signal))).rejects.toThrow(
      'The LLM took longer than 400 ms in all.',
    );
  });
});

describe('telling the client the model is slow', () => {
  it('emits llm.slow while the LLM is silent, then the reply', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const url = await serve((res) => {
      void released.then(() => res.end(chunk('Here.') + 'data: [DONE]\n\n'));
    });
    const llm = await createLlmClient({ baseURL: url, model: 'm', slowNoticeMs: 50 });
    const events: TurnEvent[] = [];
    for await (const e of runTurn({
      llm,
      messages: conversation('hi'),
      toolset: NO_TOOLS,
      signal: new AbortController().signal,
      session: { id: 's', character: 'c', state: {} },
      log: createMemoryLogger(),
    })) {
      events.push(e);
      if (e.type === 'llm.slow') release();
    }
    const slow = events.find((e) => e.type === 'llm.slow');
    expect(slow).toMatchObject({ type: 'llm.slow', round: 0 });
    expect((slow as { silentMs: number }).silentMs).toBeGreaterThanOrEqual(40);
    const kinds = events.map((e) => e.type);
    expect(kinds.indexOf('llm.slow')).toBeLessThan(kinds.indexOf('text.delta'));
    expect(events.at(-1)).toMatchObject({ type: 'finish', summary: { status: 'completed' } });
  });

  it('says nothing when the setting is 0', async () => {
    const url = await serve((res) => {
      setTimeout(() => res.end(chunk('Here.') + 'data: [DONE]\n\n'), 100);
    });
    const llm = await createLlmClient({ baseURL: url, model: 'm', slowNoticeMs: 0 });
    const kinds: string[] = [];
    for await (const e of runTurn({
      llm,
      messages: conversation('hi'),
      toolset: NO_TOOLS,
      signal: new AbortController().signal,
      session: { id: 's', character: 'c', state: {} },
      log: createMemoryLogger(),
    })) {
      kinds.push(e.type);
    }
    expect(kinds).not.toContain('llm.slow');
  });
});
