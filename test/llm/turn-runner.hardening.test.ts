import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/llm/chunk.js';
import { runTurn, type TurnEvent } from '../../src/llm/turn-runner.js';
import { createToolset, type OpenAiToolJson } from '../../src/tools/index.js';
import { NO_TOOLS } from '../../src/tools/library.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { startSimulator, type Simulator } from '../../src/testing/simulator/index.js';
import { TRANSPORTS, collectTurn, conversation, simClient } from '../helpers/turn.js';

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(() => sim.close());
beforeEach(() => {
  sim.setProfile('openai');
  sim.setScript({ rules: [] });
  sim.clearRequests();
});

function chatRequests() {
  return sim.requests.filter((r) => r.path.endsWith('/chat/completions'));
}

const sayTool = (name: string): OpenAiToolJson => ({
  type: 'function',
  function: { name, parameters: { type: 'object', properties: {} } },
});

describe('turn runner round limit', () => {
  it('ends a turn at the round limit even when the character offers no tools', async () => {
    sim.setScript({
      rules: [
        {
          reply: {
            parts: [{ toolCall: { name: 'made_up', arguments: {} } }],
            ignoreToolChoice: true,
          },
        },
      ],
    });
    const { summary } = await collectTurn({
      llm: await simClient(sim.url),
      messages: conversation('loop'),
      toolset: NO_TOOLS,
      maxToolRounds: 2,
    });
    expect(summary).toMatchObject({ status: 'incomplete', reason: 'max_tool_rounds' });
    expect(chatRequests()).toHaveLength(3);
  });
});

describe('turn runner call ids', () => {
  it('gives a fresh id to a call whose id an earlier turn of the history used', async () => {
    const history: ChatMessage[] = [
      { role: 'system', content: 'You are a test character.' },
      { role: 'user', content: 'first' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_0', type: 'function', function: { name: 'ping', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_0', content: '"pong"' },
      { role: 'assistant', content: 'Pong.' },
      { role: 'user', content: 'again' },
    ];
    sim.setScript({
      rules: [
        {
          when: { round: 0 },
          reply: { parts: [{ toolCall: { name: 'ping', arguments: {}, id: 'call_0' } }] },
        },
        { reply: { parts: [{ text: 'Pong again.' }] } },
      ],
    });
    const { summary, events } = await collectTurn({
      llm: await simClient(sim.url),
      messages: history,
      toolset: createToolset([sayTool('ping')], { handleToolCall: () => 'pong' }),
    });
    const call = events.find((e) => e.type === 'tool_call.done');
    expect(call?.type === 'tool_call.done' && call.call.id).not.toBe('call_0');
    const ids = summary.messages.flatMap((m) =>
      m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : [],
    );
    expect(ids).toHaveLength(1);
    expect(ids[0]).not.toBe('call_0');
    expect(summary.messages[1]).toMatchObject({ role: 'tool', tool_call_id: ids[0] });
  });

  it('avoids ids the caller says are taken (a client call still waiting)', async () => {
    sim.setScript({
      rules: [{ reply: { parts: [{ toolCall: { name: 'get_time', arguments: {}, id: 'x:0' } }] } }],
    });
    const { summary } = await collectTurn({
      llm: await simClient(sim.url),
      messages: conversation('time?'),
      clientTools: [
        {
          name: 'get_time',
          description: 'The time',
          parameters: { type: 'object', properties: {} },
        },
      ],
      callIdTaken: (id) => id === 'x:0',
    });
    expect(summary.clientCalls).toHaveLength(1);
    expect(summary.clientCalls[0]!.id).not.toBe('x:0');
  });
});

describe.each(TRANSPORTS)('over the %s transport, a stream cut short', (transport) => {
  it('is incomplete, not completed, when it ends without [DONE] or a finish_reason', async () => {
    sim.setScript({ rules: [{ reply: { parts: [{ text: 'Once upon a time, a fox ran.' }] } }] });
    sim.injectFault({ type: 'end-without-done', afterChunks: 3 });
    const { summary, text } = await collectTurn({
      llm: await simClient(sim.url, { transport }),
      messages: conversation('story'),
    });
    expect(summary).toMatchObject({ status: 'incomplete', reason: 'stream_truncated' });
    expect(text.length).toBeGreaterThan(0);
    expect(summary.messages).toEqual([{ role: 'assistant', content: text }]);
  });

  it('is completed when it carries a finish_reason but no [DONE]', async () => {
    sim.setScript({ rules: [{ reply: { parts: [{ text: 'Short.' }] } }] });
    sim.injectFault({ type: 'end-without-done' });
    const { summary } = await collectTurn({
      llm: await simClient(sim.url, { transport }),
      messages: conversation('hi'),
    });
    expect(summary.status).toBe('completed');
  });
});

describe('turn runner tool results', () => {
  it('sends each result as its call ends and keeps call order in history', async () => {
    let releaseSlow!: () => void;
    const slowGate = new Promise<void>((r) => (releaseSlow = r));
    const toolset = createToolset([sayTool('slow'), sayTool('fast')], {
      handleToolCall: async (name) => {
        if (name === 'slow') await slowGate;
        return name;
      },
    });
    sim.setScript({
      rules: [
        {
          when: { round: 0 },
          reply: {
            parts: [
              { toolCall: { name: 'slow', arguments: {} } },
              { toolCall: { name: 'fast', arguments: {} } },
            ],
          },
        },
        { reply: { parts: [{ text: 'Both done.' }] } },
      ],
    });
    const order: string[] = [];
    const gen = runTurn({
      llm: await simClient(sim.url),
      messages: conversation('go'),
      toolset,
      toolTimeoutMs: 30_000,
      signal: new AbortController().signal,
      session: { id: 's', character: 'c', state: {} },
      log: createMemoryLogger(),
    });
    let step = await gen.next();
    while (!step.done) {
      const e: TurnEvent = step.value;
      if (e.type === 'tool.result') {
        order.push(e.result.name);
        if (e.result.name === 'fast') releaseSlow();
      }
      step = await gen.next();
    }
    expect(order).toEqual(['fast', 'slow']);
    const tools = step.value.messages.filter((m) => m.role === 'tool');
    expect(tools.map((m) => m.content)).toEqual(['slow', 'fast']);
    expect(step.value.toolCalls.map((t) => t.name)).toEqual(['slow', 'fast']);
  });
});
