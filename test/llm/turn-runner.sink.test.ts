/**
 * Text deltas the turn hands to `onTextDelta` are taken where the HTTP
 * transport reads each chunk (its sink), with no yield between: the turn's
 * events must come in the same order, with the same content, as when every
 * chunk passes through the event stream. Chunks here are written by hand so
 * that one chunk carries text and a tool call, or reasoning and text.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LlmStreamError } from '../../src/errors.js';
import type { ChunkLike } from '../../src/llm/chunk.js';
import type { TurnEvent } from '../../src/llm/turn-runner.js';
import { createToolset } from '../../src/tools/index.js';
import { TRANSPORTS, collectTurn, conversation, simClient } from '../helpers/turn.js';

const call = (extra: object) => ({ index: 0, ...extra });
/** The first request's chunks: a text run, a chunk with text and a call, the call's arguments. */
const FIRST: ChunkLike[] = [
  { choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] },
  { choices: [{ index: 0, delta: { reasoning_content: 'They want Paris.', content: 'Let me ' } }] },
  {
    choices: [
      {
        index: 0,
        delta: {
          content: 'check.',
          tool_calls: [
            call({ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '' } }),
          ],
        },
      },
    ],
  },
  {
    choices: [{ index: 0, delta: { tool_calls: [call({ function: { arguments: '{"city":' } })] } }],
  },
  {
    choices: [{ index: 0, delta: { tool_calls: [call({ function: { arguments: '"Paris"}' } })] } }],
  },
  { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
];
/** The second request's: the answer, and usage in a chunk of its own. */
const SECOND: ChunkLike[] = [
  { choices: [{ index: 0, delta: { content: 'It is ' } }] },
  { choices: [{ index: 0, delta: { content: '22 degrees.' } }] },
  { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
  { choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } },
];

const weather = createToolset(
  [
    {
      type: 'function',
      function: {
        name: 'weather',
        description: 'The weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } } },
      },
    },
  ],
  { handleToolCall: () => ({ celsius: 22 }) },
);

let server: Server;
let url: string;
/** Whether the server writes an answer's chunks in one piece. */
let together = false;
beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const chunks = body.includes('"role":"tool"') ? SECOND : FIRST;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (together) {
        // The whole answer in one piece: the chunks after one the sink declines wait for the reader.
        res.end(`${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`);
        return;
      }
      // One write a chunk, each its own piece of the body (as a model streams).
      let i = 0;
      const next = (): void => {
        if (i === chunks.length) {
          res.end('data: [DONE]\n\n');
          return;
        }
        res.write(`data: ${JSON.stringify(chunks[i++])}\n\n`, () => setImmediate(next));
      };
      next();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** The turn's events, apart from timings, in the order a reader would see them. */
function shape(events: TurnEvent[]): unknown[] {
  return events.map((e) => {
    if (e.type === 'finish')
      return { type: e.type, text: e.summary.text, status: e.summary.status };
    if (e.type === 'tool.result') return { type: e.type, output: e.result.output };
    return e;
  });
}

describe.each(
  TRANSPORTS.flatMap((transport) => [
    { transport, together: false, how: 'a chunk a write' },
    { transport, together: true, how: 'all in one write' },
  ]),
)('over the $transport transport, $how', ({ transport, together: inOne }) => {
  beforeEach(() => {
    together = inOne;
  });

  it('gives the same events in the same order whether text deltas are taken as read or yielded', async () => {
    const llm = await simClient(url, { transport });
    const messages = conversation('Weather in Paris?');
    const yielded = await collectTurn({ llm, messages, toolset: weather });
    const seen: TurnEvent[] = [];
    const taken = await collectTurn({
      llm,
      messages,
      toolset: weather,
      onTextDelta: (e) => seen.push(e),
      onEvent: (e) => seen.push(e),
    });
    expect(taken.events.some((e) => e.type === 'text.delta')).toBe(false);
    expect(shape(seen)).toEqual(shape(yielded.events));
    // The chunk with text and a call: its text comes before the call starts.
    const kinds = seen.map((e) => e.type);
    expect(kinds.slice(0, 6)).toEqual([
      'round.start',
      'reasoning.delta',
      'text.delta',
      'text.delta',
      'tool_call.start',
      'tool_call.arguments.delta',
    ]);
    expect(taken.summary).toMatchObject({
      status: 'completed',
      text: 'Let me check.It is 22 degrees.',
      usage: { total_tokens: 15 },
    });
    expect(taken.summary.rounds[0]!.firstTokenAt).not.toBeNull();
  });

  it('ends the turn as failed, with the error, when onTextDelta throws', async () => {
    const llm = await simClient(url, { transport });
    const failure = new Error('the writer broke');
    const { events, summary } = await collectTurn({
      llm,
      messages: conversation('Weather in Paris?'),
      toolset: weather,
      onTextDelta: () => {
        throw failure;
      },
    });
    const errors = events.flatMap((e) => (e.type === 'error' ? [e.error] : []));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(LlmStreamError);
    expect(errors[0]).toMatchObject({ cause: failure, detail: 'the writer broke' });
    expect(summary).toMatchObject({ status: 'failed', reason: 'llm_error', text: 'Let me ' });
  });
});
