import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LlmStreamError, LlmTruncatedError, TurnAbortedError } from '../../src/errors.js';
import type { ChunkLike } from '../../src/llm/chunk.js';
import { completionToChunk, createHttpTransport } from '../../src/llm/http-transport.js';
import { startSimulator, type Simulator } from '../../src/testing/simulator/index.js';

let sim: Simulator | undefined;
let server: Server | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

/** A bare HTTP server answering every request with `handler`. */
async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

async function drain(stream: AsyncIterable<unknown>) {
  const out = [];
  for await (const c of stream) out.push(c);
  return out;
}

const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true };

describe('http transport', () => {
  it('streams chunks from the simulator and sends the key and JSON body', async () => {
    sim = await startSimulator({
      script: { rules: [{ reply: { parts: [{ text: 'hello there' }] } }] },
    });
    const stream = createHttpTransport({ baseURL: sim.url, apiKey: 'sk-test' });
    const chunks = await drain(stream(body, new AbortController().signal));
    expect(chunks.length).toBeGreaterThan(1);
    expect(sim.requests[0]!.headers.authorization).toBe('Bearer sk-test');
    expect(sim.requests[0]!.body).toMatchObject(body);
  });

  it('reuses one kept-alive connection for consecutive requests', async () => {
    const ports = new Set<number>();
    const url = await serve((req, res) => {
      ports.add(req.socket.remotePort!);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"choices":[]}\n\ndata: [DONE]\n\n');
    });
    const stream = createHttpTransport({ baseURL: url });
    for (let i = 0; i < 3; i++) await drain(stream(body, new AbortController().signal));
    expect(ports.size).toBe(1);
  });

  it('hands each chunk to the sink as it is read and yields only those it declines', async () => {
    const ports = new Set<number>();
    const url = await serve((req, res) => {
      ports.add(req.socket.remotePort!);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const text of ['a', 'b', 'c']) {
        res.write(`data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`);
      }
      res.end('data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n');
    });
    const stream = createHttpTransport({ baseURL: url });
    const content = (c: ChunkLike) =>
      c.choices?.[0]?.delta?.content ?? c.choices?.[0]?.finish_reason;
    const sunk: unknown[] = [];
    const yielded = await drain(
      stream(body, new AbortController().signal, 0, (chunk) => {
        sunk.push(content(chunk));
        return content(chunk) !== 'b';
      }),
    );
    expect(sunk).toEqual(['a', 'b', 'c', 'stop']);
    expect(yielded.map((c) => content(c as ChunkLike))).toEqual(['b']);
    // A stream the sink took whole, its finish included, still ends complete
    // and gives its connection back.
    await expect(drain(stream(body, new AbortController().signal, 0, () => true))).resolves.toEqual(
      [],
    );
    expect(ports.size).toBe(1);
  });

  it('tells a stream cut short from one the sink took whole', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
    });
    const stream = createHttpTransport({ baseURL: url });
    await expect(
      drain(stream(body, new AbortController().signal, 0, () => true)),
    ).rejects.toBeInstanceOf(LlmTruncatedError);
  });

  it('stops cleanly when the sink aborts the request while it is being read', async () => {
    const ports: number[] = [];
    const url = await serve((req, res) => {
      ports.push(req.socket.remotePort!);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
      // Two chunks in one piece, then more that must not be read.
      setImmediate(() => {
        res.write(
          'data: {"choices":[{"delta":{"content":"b"}}]}\n\ndata: {"choices":[{"delta":{"content":"c"}}]}\n\n',
        );
        setImmediate(() =>
          res.end('data: {"choices":[{"delta":{"content":"d"}}]}\n\ndata: [DONE]\n\n'),
        );
      });
    });
    const stream = createHttpTransport({ baseURL: url });
    const turn = new AbortController();
    const sunk: unknown[] = [];
    const failure = drain(
      stream(body, turn.signal, 0, (chunk) => {
        // As the turn's sink does: a stopped turn takes nothing more.
        if (turn.signal.aborted) return false;
        const text = chunk.choices?.[0]?.delta?.content;
        sunk.push(text);
        // As a session closed by its client's slow reading would, from inside the read.
        if (text === 'b') turn.abort(new Error('closed'));
        return !turn.signal.aborted;
      }),
    );
    await expect(failure).rejects.toBeInstanceOf(TurnAbortedError);
    expect(sunk).toEqual(['a', 'b']);
    // The stopped answer's connection is not reused; the next request gets a new one.
    await expect(drain(stream(body, new AbortController().signal))).resolves.toHaveLength(4);
    expect(new Set(ports).size).toBe(2);
  });

  it('does not wait on a server that holds the stream open after [DONE], and does not reuse that connection', async () => {
    const ports: number[] = [];
    const url = await serve((req, res) => {
      ports.push(req.socket.remotePort!);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // [DONE], then the answer never ends.
      res.write('data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n');
    });
    const stream = createHttpTransport({ baseURL: url });
    expect(await drain(stream(body, new AbortController().signal))).toHaveLength(1);
    expect(await drain(stream(body, new AbortController().signal))).toHaveLength(1);
    expect(new Set(ports).size).toBe(2);
  });

  it('closes the connection of a stream its reader leaves early', async () => {
    let closed!: Promise<void>;
    const url = await serve((req, res) => {
      closed = new Promise((resolve) => req.socket.once('close', () => resolve()));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // A reply that goes on and on.
      const tick = setInterval(
        () => res.write('data: {"choices":[{"delta":{"content":"a"}}]}\n\n'),
        5,
      );
      res.once('close', () => clearInterval(tick));
    });
    const stream = createHttpTransport({ baseURL: url });
    for await (const chunk of stream(body, new AbortController().signal)) {
      expect(chunk).toMatchObject({ choices: [{ delta: { content: 'a' } }] });
      break;
    }
    await closed;
  });

  it('turns an abort mid-stream into TurnAbortedError and closes the connection', async () => {
    let closed!: Promise<void>;
    const url = await serve((req, res) => {
      closed = new Promise((resolve) => req.socket.once('close', () => resolve()));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
    });
    const turn = new AbortController();
    const stream = createHttpTransport({ baseURL: url });
    const reading = (async () => {
      for await (const _chunk of stream(body, turn.signal)) turn.abort();
    })();
    await expect(reading).rejects.toThrow(TurnAbortedError);
    await closed;
  });

  it('tells the client the server’s own message for a 400, and does not retry it', async () => {
    let calls = 0;
    const url = await serve((_req, res) => {
      calls++;
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        '{"object":"error","message":"messages[2]: tool_call_id not found","type":"BadRequestError","code":400}',
      );
    });
    const stream = createHttpTransport({ baseURL: url, maxRetries: 3 });
    const failure = drain(stream(body, new AbortController().signal));
    await expect(failure).rejects.toMatchObject({
      code: 'E_LLM_STREAM',
      status: 400,
      retryable: false,
      // About the request: the client may mend what it sent (a tool's schema, an image).
      message: 'The LLM answered HTTP 400: messages[2]: tool_call_id not found.',
      detail: expect.stringContaining('HTTP 400: messages[2]: tool_call_id not found'),
    });
    expect(calls).toBe(1);
  });

  it('tells a 400 without credentials, addresses or file paths', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        '{"error":{"message":"bad tools (key sk-live-0123456789abc) at http://10.0.0.5:8000/v1 in /srv/models/cfg.json"}}',
      );
    });
    const stream = createHttpTransport({ baseURL: url, maxRetries: 0 });
    const failure = drain(stream(body, new AbortController().signal));
    await expect(failure).rejects.toMatchObject({
      message: 'The LLM answered HTTP 400: bad tools (key [redacted]) at [address] in …/cfg.json.',
    });
  });

  it('keeps the server’s own message of a 401 for the log', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"Incorrect API key provided: sk-abc***xyz"}}');
    });
    const stream = createHttpTransport({ baseURL: url, maxRetries: 0 });
    const failure = drain(stream(body, new AbortController().signal));
    // The operator's credentials are not the client's business.
    await expect(failure).rejects.toMatchObject({
      status: 401,
      message: 'The LLM answered HTTP 401.',
      detail: expect.stringContaining('Incorrect API key provided'),
    });
  });

  it('retries a 503 as retry-after-ms says, then streams', async () => {
    let calls = 0;
    const url = await serve((_req, res) => {
      calls++;
      if (calls === 1) {
        res.writeHead(503, { 'retry-after-ms': '5' });
        res.end('busy');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n');
    });
    const stream = createHttpTransport({ baseURL: url, maxRetries: 1 });
    const chunks = await drain(stream(body, new AbortController().signal));
    expect(calls).toBe(2);
    expect(chunks).toHaveLength(1);
  });

  it('retries a refused connection and then reports it', async () => {
    const url = await serve(() => {});
    server!.close();
    await new Promise((r) => server!.once('close', r));
    server = undefined;
    const stream = createHttpTransport({ baseURL: url, maxRetries: 0 });
    await expect(drain(stream(body, new AbortController().signal))).rejects.toMatchObject({
      message: 'The LLM could not be reached.',
      detail: expect.stringContaining('ECONNREFUSED'),
    });
  });

  it('ends a stream that goes silent longer than the timeout', async () => {
    sim = await startSimulator({
      script: { rules: [{ reply: { parts: [{ text: 'a b c d e f' }] } }] },
    });
    sim.injectFault({ type: 'stall', afterChunks: 2 });
    const stream = createHttpTransport({ baseURL: sim.url, timeoutMs: 50 });
    await expect(drain(stream(body, new AbortController().signal))).rejects.toThrow(
      /silent for 50 ms/,
    );
  });

  it('does not send the request again to an LLM that took it and stayed silent', async () => {
    let requests = 0;
    const url = await serve(() => {
      requests++; // Never answers.
    });
    const stream = createHttpTransport({ baseURL: url, timeoutMs: 100, maxRetries: 1 });
    await expect(drain(stream(body, new AbortController().signal))).rejects.toThrow(
      /silent for 100 ms/,
    );
    expect(requests).toBe(1);
  });

  it('turns an abort before the answer into TurnAbortedError', async () => {
    const url = await serve(() => {
      // Never answers.
    });
    const turn = new AbortController();
    const stream = createHttpTransport({ baseURL: url });
    const pending = drain(stream(body, turn.signal));
    turn.abort();
    await expect(pending).rejects.toThrow(TurnAbortedError);
  });

  it('reads a plain JSON completion as one chunk when the server ignores stream:true', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          choices: [
            {
              message: {
                content: null,
                tool_calls: [
                  { id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } },
                ],
              },
              finish_reason: 'tool_calls',
            },
          ],
          usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
        }),
      );
    });
    const stream = createHttpTransport({ baseURL: url });
    const chunks = await drain(stream(body, new AbortController().signal));
    expect(chunks).toEqual([
      {
        choices: [
          {
            index: 0,
            delta: {
              role: 'assistant',
              content: null,
              tool_calls: [
                {
                  index: 0,
                  id: 'call_1',
                  type: 'function',
                  function: { name: 'f', arguments: '{}' },
                },
              ],
            },
            finish_reason: 'tool_calls',
          },
        ],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
      },
    ]);
  });

  it('turns a completion without choices into an empty chunk, not a crash', () => {
    expect(completionToChunk({})).toMatchObject({
      choices: [{ delta: { content: null }, finish_reason: null }],
    });
  });

  it('reports a broken stream as a retryable LlmStreamError', async () => {
    sim = await startSimulator({
      script: { rules: [{ reply: { parts: [{ text: 'a b c d e f' }] } }] },
    });
    sim.injectFault({ type: 'reset', afterChunks: 2 });
    const stream = createHttpTransport({ baseURL: sim.url });
    const failure = drain(stream(body, new AbortController().signal));
    await expect(failure).rejects.toBeInstanceOf(LlmStreamError);
    await expect(drain(stream(body, new AbortController().signal))).resolves.toBeDefined();
  });
});
