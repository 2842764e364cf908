import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ChatMessage } from '../../src/llm/chunk.js';
import { TOOL_RESULT_MARKER } from '../../src/llm/prompt-tools.js';
import { toolResultMessages, type TurnEvent } from '../../src/llm/turn-runner.js';
import {
  createToolset,
  defineTool,
  defineToolLibrary,
  type OpenAiToolJson,
} from '../../src/tools/index.js';
import { NO_TOOLS } from '../../src/tools/library.js';
import {
  PROFILE_NAMES,
  startSimulator,
  type Simulator,
} from '../../src/testing/simulator/index.js';
import { toolThatWaits } from '../helpers/tools.js';
import { TRANSPORTS, collectTurn, conversation, simClient, types } from '../helpers/turn.js';

const weatherTool: OpenAiToolJson = {
  type: 'function',
  function: {
    name: 'get_current_weather',
    description: 'Get the current weather',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string' },
        format: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['location', 'format'],
    },
  },
};
const weatherTools = createToolset([weatherTool], {
  handleToolCall: (_name, args) => ({
    location: args.location,
    temperature: 22,
    unit: args.format,
  }),
});

const weatherCall = {
  name: 'get_current_weather',
  arguments: { location: 'Paris', format: 'celsius' },
};

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

describe.each(TRANSPORTS)('over the %s transport', (transport) => {
  describe('turn runner', () => {
    it('streams a plain reply as text deltas and adds one assistant message', async () => {
      sim.setScript({
        rules: [{ reply: { parts: [{ text: 'Once upon a time, there was a fox.' }] } }],
      });
      const { events, summary, text } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('Tell me a story'),
      });
      expect(text).toBe('Once upon a time, there was a fox.');
      expect(events.filter((e) => e.type === 'text.delta').length).toBeGreaterThan(3);
      expect(summary).toMatchObject({ status: 'completed', requests: 1, toolRounds: 0 });
      expect(summary.messages).toEqual([
        { role: 'assistant', content: 'Once upon a time, there was a fox.' },
      ]);
      expect(summary.ttftMs).not.toBeNull();
    });

    it('hands text deltas to onTextDelta in the place the event stream would have had them', async () => {
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: { parts: [{ text: 'Let me check. ' }, { toolCall: weatherCall }] },
          },
          {
            when: { toolResult: '22' },
            reply: { parts: [{ text: 'It is 22 degrees in Paris.' }] },
          },
        ],
      });
      const llm = await simClient(sim.url, { transport });
      const streamed = await collectTurn({
        llm,
        messages: conversation('Weather in Paris in celsius?'),
        toolset: weatherTools,
      });
      // With the sink, the reader's list and the sink's share one timeline.
      const seen: TurnEvent[] = [];
      const sunk = await collectTurn({
        llm,
        messages: conversation('Weather in Paris in celsius?'),
        toolset: weatherTools,
        onTextDelta: (e) => seen.push(e),
        onEvent: (e) => seen.push(e),
      });
      expect(sunk.events.some((e) => e.type === 'text.delta')).toBe(false);
      // Runs of one delta type folded: the simulator splits arguments differently each time.
      const folded = (events: TurnEvent[]) =>
        types(events).filter((t, i, all) => !t.endsWith('.delta') || all[i - 1] !== t);
      expect(folded(seen)).toEqual(folded(streamed.events));
      expect(folded(seen)).toContain('text.delta');
      expect(seen.flatMap((e) => (e.type === 'text.delta' ? [e.delta] : [])).join('')).toBe(
        'Let me check. It is 22 degrees in Paris.',
      );
      expect(sunk.summary.text).toBe(streamed.summary.text);
    });

    it('runs a tool round and resumes with the assistant tool_calls and one tool message per call', async () => {
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: { parts: [{ text: 'Let me check. ' }, { toolCall: weatherCall }] },
          },
          {
            when: { toolResult: '22' },
            reply: { parts: [{ text: 'It is 22 degrees in Paris.' }] },
          },
        ],
      });
      const { events, summary, text } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('Weather in Paris in celsius?'),
        toolset: weatherTools,
      });
      expect(text).toBe('Let me check. It is 22 degrees in Paris.');
      expect(
        types(events).filter((t) => t !== 'text.delta' && t !== 'tool_call.arguments.delta'),
      ).toEqual([
        'round.start',
        'tool_call.start',
        'usage',
        'tool_call.done',
        'tool.result',
        'round.end',
        'round.start',
        'usage',
        'round.end',
        'finish',
      ]);
      const callId = summary.toolCalls[0]!.callId;
      expect(summary.toolCalls[0]).toMatchObject({
        name: 'get_current_weather',
        outcome: 'ok',
        variant: 'default',
      });
      expect(summary.messages).toEqual([
        {
          role: 'assistant',
          content: 'Let me check. ',
          tool_calls: [
            {
              id: callId,
              type: 'function',
              function: {
                name: 'get_current_weather',
                arguments: '{"location":"Paris","format":"celsius"}',
              },
            },
          ],
        },
        {
          role: 'tool',
          tool_call_id: callId,
          content: '{"location":"Paris","temperature":22,"unit":"celsius"}',
        },
        { role: 'assistant', content: 'It is 22 degrees in Paris.' },
      ]);
      // The resume carried exactly that history, with the tools still offered.
      const resume = chatRequests()[1]!.body as { messages: ChatMessage[]; tools: unknown[] };
      expect(resume.messages.slice(2)).toEqual(summary.messages.slice(0, 2));
      expect(resume.tools).toHaveLength(1);
      expect(chatRequests().every((r) => r.status === 200)).toBe(true);
    });

    it('streams text before, between and after parallel tool calls, in order', async () => {
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: {
              parts: [
                { text: 'First Paris. ' },
                { toolCall: weatherCall },
                { text: 'Then Rome. ' },
                {
                  toolCall: {
                    name: 'get_current_weather',
                    arguments: { location: 'Rome', format: 'celsius' },
                  },
                },
                { text: 'Checking both.' },
              ],
            },
          },
          { reply: { parts: [{ text: ' Both are 22.' }] } },
        ],
      });
      const { summary, text, events } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('Paris and Rome?'),
        toolset: weatherTools,
      });
      expect(text).toBe('First Paris. Then Rome. Checking both. Both are 22.');
      const assistant = summary.messages[0] as Extract<ChatMessage, { role: 'assistant' }>;
      expect(assistant.content).toBe('First Paris. Then Rome. Checking both.');
      expect(assistant.tool_calls!.map((c) => JSON.parse(c.function.arguments).location)).toEqual([
        'Paris',
        'Rome',
      ]);
      // Results are recorded in call order, one tool message per id.
      expect(
        summary.messages.slice(1, 3).map((m) => (m as { tool_call_id: string }).tool_call_id),
      ).toEqual(assistant.tool_calls!.map((c) => c.id));
      const results = events.flatMap((e) => (e.type === 'tool.result' ? [e.result.callId] : []));
      expect(results).toEqual(assistant.tool_calls!.map((c) => c.id));
    });

    it('runs several tool rounds in one turn until the model answers', async () => {
      const count = defineTool({
        name: 'count',
        description: 'count',
        parameters: z.object({ n: z.number() }),
        handler: ({ n }) => `counted ${n}`,
      });
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: { parts: [{ toolCall: { name: 'count', arguments: { n: 1 } } }] },
          },
          {
            when: { round: 1 },
            reply: { parts: [{ toolCall: { name: 'count', arguments: { n: 2 } } }] },
          },
          {
            when: { round: 2 },
            reply: { parts: [{ toolCall: { name: 'count', arguments: { n: 3 } } }] },
          },
          { reply: { parts: [{ text: 'Counted to three.' }] } },
        ],
      });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('count'),
        toolset: createToolset([count]),
      });
      expect(summary).toMatchObject({
        status: 'completed',
        toolRounds: 3,
        requests: 4,
        text: 'Counted to three.',
      });
      expect(summary.toolCalls.map((r) => r.output)).toEqual([
        'counted 1',
        'counted 2',
        'counted 3',
      ]);
    });

    it('ends gracefully at the round limit with a last request that offers no tool choice', async () => {
      const loop = defineTool({
        name: 'loop',
        description: 'l',
        parameters: z.object({}),
        handler: () => 'again',
      });
      sim.setScript({
        rules: [
          {
            reply: {
              parts: [{ text: 'Done looping.' }, { toolCall: { name: 'loop', arguments: {} } }],
            },
          },
        ],
      });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('loop forever'),
        toolset: createToolset([loop]),
        maxToolRounds: 2,
      });
      expect(summary).toMatchObject({ status: 'completed', toolRounds: 2, requests: 3 });
      const last = chatRequests()[2]!.body as { tool_choice: string; tools: unknown[] };
      expect(last.tool_choice).toBe('none');
      expect(last.tools).toHaveLength(1);
      expect(summary.messages.at(-1)).toEqual({ role: 'assistant', content: 'Done looping.' });
    });

    it('turns arguments that are not JSON into invalid_args and replays valid JSON', async () => {
      sim.setScript({
        rules: [
          { when: { round: 0 }, reply: { parts: [{ toolCall: weatherCall }] } },
          { reply: { parts: [{ text: 'Sorry, let me retry.' }] } },
        ],
      });
      sim.injectFault({ type: 'invalid-args' });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('weather'),
        toolset: weatherTools,
      });
      expect(summary.toolCalls[0]!.outcome).toBe('invalid_args');
      expect(summary.toolCalls[0]!.output).toMatch(/not valid JSON/);
      const assistant = summary.messages[0] as Extract<ChatMessage, { role: 'assistant' }>;
      expect(assistant.tool_calls![0]!.function.arguments).toBe('{}');
      // The simulator rejects invalid replayed JSON with 400, as vLLM does; it accepted this.
      expect(chatRequests()[1]!.status).toBe(200);
      expect(summary.status).toBe('completed');
    });

    it('answers an unknown tool with the tools that exist and resumes', async () => {
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: { parts: [{ toolCall: { name: 'launch_rocket', arguments: {} } }] },
          },
          { reply: { parts: [{ text: 'I cannot launch rockets.' }] } },
        ],
      });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('launch'),
        toolset: weatherTools,
      });
      expect(summary.toolCalls[0]).toMatchObject({
        outcome: 'unknown_tool',
        name: 'launch_rocket',
      });
      expect(summary.toolCalls[0]!.output).toContain('Available tools: get_current_weather');
      expect(summary.text).toBe('I cannot launch rockets.');
    });

    it('keeps reasoning apart from the reply text and out of history', async () => {
      sim.setProfile('vllm-hermes');
      sim.setScript({
        rules: [
          { reply: { parts: [{ reasoning: 'The user wants a greeting.' }, { text: 'Hello!' }] } },
        ],
      });
      const { events, summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('hi'),
      });
      const reasoning = events
        .flatMap((e) => (e.type === 'reasoning.delta' ? [e.delta] : []))
        .join('');
      expect(reasoning).toBe('The user wants a greeting.');
      expect(summary.text).toBe('Hello!');
      expect(summary.messages).toEqual([{ role: 'assistant', content: 'Hello!' }]);
    });

    it('sums usage over the rounds of a turn', async () => {
      sim.setScript({
        rules: [
          { when: { round: 0 }, reply: { parts: [{ toolCall: weatherCall }] } },
          { reply: { parts: [{ text: 'Sunny.' }] } },
        ],
      });
      const { summary, events } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('weather'),
        toolset: weatherTools,
      });
      const perRound = events.flatMap((e) =>
        e.type === 'usage' ? [e.usage.completion_tokens ?? 0] : [],
      );
      expect(perRound).toHaveLength(2);
      expect(summary.usage.completion_tokens).toBe(perRound[0]! + perRound[1]!);
      expect(summary.usage.prompt_tokens).toBeGreaterThan(0);
    });

    it('does not run a tool call cut off by finish_reason "length"', async () => {
      sim.setScript({
        rules: [
          {
            reply: {
              parts: [{ text: 'Checking' }, { toolCall: weatherCall }],
              finishReason: 'length',
            },
          },
        ],
      });
      const { summary, events } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('weather'),
        toolset: weatherTools,
      });
      expect(summary).toMatchObject({ status: 'incomplete', reason: 'length', toolRounds: 0 });
      expect(events.find((e) => e.type === 'tool_calls.discarded')).toMatchObject({
        reason: 'length',
      });
      expect(summary.messages).toEqual([{ role: 'assistant', content: 'Checking' }]);
      expect(chatRequests()).toHaveLength(1);
    });

    it('runs tool calls from a stream with no finish_reason at all', async () => {
      sim.setScript({
        rules: [
          { when: { round: 0 }, reply: { parts: [{ toolCall: weatherCall }] } },
          { reply: { parts: [{ text: 'Done.' }] } },
        ],
      });
      sim.injectFault({ type: 'no-finish' });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('weather'),
        toolset: weatherTools,
      });
      expect(summary.toolCalls[0]!.outcome).toBe('ok');
      expect(summary.text).toBe('Done.');
    });

    it('reports an HTTP error as an error event and a failed turn', async () => {
      sim.injectFault({ type: 'http', status: 500 });
      const { events, summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('hi'),
      });
      const error = events.find((e) => e.type === 'error');
      expect(error).toMatchObject({
        error: { code: 'E_LLM_STREAM', status: 500, retryable: true },
      });
      expect(summary).toMatchObject({ status: 'failed', reason: 'llm_error', messages: [] });
    });

    it('retries a 429 before streaming when retries are allowed', async () => {
      sim.setScript({ rules: [{ reply: { parts: [{ text: 'After the retry.' }] } }] });
      sim.injectFault({ type: 'http', status: 429 });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { maxRetries: 1, transport }),
        messages: conversation('hi'),
      });
      expect(summary).toMatchObject({ status: 'completed', text: 'After the retry.' });
      expect(chatRequests().map((r) => r.status)).toEqual([429, 200]);
    });

    it('keeps the text already streamed when an error event arrives mid-stream', async () => {
      sim.setScript({
        rules: [{ reply: { parts: [{ text: 'One two three four five six seven eight.' }] } }],
      });
      sim.injectFault({ type: 'error-event', afterChunks: 3 });
      const { summary, text } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('count'),
      });
      expect(summary.status).toBe('failed');
      expect(text.length).toBeGreaterThan(0);
      expect(summary.messages).toEqual([{ role: 'assistant', content: text }]);
    });

    it('reports a chunk that is not valid JSON as a failed turn and keeps the text before it', async () => {
      sim.setScript({
        rules: [{ reply: { parts: [{ text: 'One two three four five six seven eight.' }] } }],
      });
      sim.injectFault({ type: 'malformed-chunk', afterChunks: 3 });
      const { summary, events, text } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('count'),
      });
      expect(summary).toMatchObject({ status: 'failed', reason: 'llm_error' });
      expect(events.find((e) => e.type === 'error')).toMatchObject({
        error: { code: 'E_LLM_STREAM' },
      });
      expect(summary.messages).toEqual(text ? [{ role: 'assistant', content: text }] : []);
    });

    it('keeps a multi-byte character whole when it is split across network reads', async () => {
      sim.setScript({
        rules: [{ reply: { parts: [{ text: 'Café au lait, s’il vous plaît 🍵.' }] } }],
      });
      sim.injectFault({ type: 'split-utf8' });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('coffee'),
      });
      expect(summary).toMatchObject({
        status: 'completed',
        text: 'Café au lait, s’il vous plaît 🍵.',
      });
      expect(chatRequests()[0]!.fault).toEqual({ type: 'split-utf8' });
    });

    it('reports a connection reset mid-stream as a failed turn', async () => {
      sim.setScript({
        rules: [{ reply: { parts: [{ text: 'One two three four five six seven eight.' }] } }],
      });
      sim.injectFault({ type: 'reset', afterChunks: 2 });
      const { summary, events } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('count'),
      });
      expect(summary.status).toBe('failed');
      expect(events.some((e) => e.type === 'error')).toBe(true);
    });

    it('stops the HTTP stream when the turn is cancelled mid-stream', async () => {
      sim.setScript({
        rules: [{ reply: { parts: [{ text: 'This reply will stall after a few words.' }] } }],
      });
      sim.injectFault({ type: 'stall', afterChunks: 3 });
      const turn = new AbortController();
      const llm = await simClient(sim.url, { transport });
      const { runTurn } = await import('../../src/llm/turn-runner.js');
      const { createMemoryLogger } = await import('../../src/testing/memory-logger.js');
      const gen = runTurn({
        llm,
        messages: conversation('stall'),
        toolset: weatherTools,
        signal: turn.signal,
        session: { id: 's', character: 'c', state: {} },
        log: createMemoryLogger(),
      });
      let text = '';
      let summary;
      for await (const e of gen) {
        if (e.type === 'text.delta') {
          text += e.delta;
          // Cancel once some text is out; the stream is stalled after that.
          if (!turn.signal.aborted) turn.abort();
        }
        if (e.type === 'finish') summary = e.summary;
      }
      expect(summary).toMatchObject({ status: 'cancelled', reason: 'cancelled' });
      expect(summary!.messages).toEqual([{ role: 'assistant', content: text }]);
      // A stalled stream ends only when the client hangs up: idle means it did.
      await sim.whenIdle();
      expect(chatRequests()[0]!.fault).toEqual({ type: 'stall', afterChunks: 3 });
    });

    it('cancels a running tool when the turn is cancelled and records a valid history', async () => {
      const { tool: wait, started: running } = toolThatWaits('wait_for_it');
      sim.setScript({
        rules: [{ reply: { parts: [{ toolCall: { name: 'wait_for_it', arguments: {} } }] } }],
      });
      const turn = new AbortController();
      void running.then(() => turn.abort());
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('wait'),
        toolset: createToolset([wait]),
        signal: turn.signal,
      });
      expect(summary.status).toBe('cancelled');
      expect(summary.toolCalls[0]!.outcome).toBe('cancelled');
      const [assistant, tool] = summary.messages as [
        Extract<ChatMessage, { role: 'assistant' }>,
        Extract<ChatMessage, { role: 'tool' }>,
      ];
      expect(tool.tool_call_id).toBe(assistant.tool_calls![0]!.id);
      expect(chatRequests()).toHaveLength(1);
    });

    it('tags every tool result with the variant of the library that served it', async () => {
      const sayHello = defineTool({
        name: 'sayHello',
        description: 'Greet',
        parameters: z.object({ personName: z.string().default('world') }),
      });
      const a = createToolset([sayHello], {
        library: defineToolLibrary('a', {
          sayHello: ({ personName }) => `Hello, ${String(personName)}!`,
        }),
      });
      const b = createToolset([sayHello], {
        library: defineToolLibrary('b', {
          sayHello: ({ personName }) => `Hi, ${String(personName)}!`,
        }),
      });
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: {
              parts: [{ toolCall: { name: 'sayHello', arguments: { personName: 'Ada' } } }],
            },
          },
          { reply: { parts: [{ text: 'Greeted.' }] } },
        ],
      });
      const llm = await simClient(sim.url, { transport });
      const [ra, rb] = await Promise.all([
        collectTurn({ llm, messages: conversation('greet Ada'), toolset: a }),
        collectTurn({ llm, messages: conversation('greet Ada'), toolset: b }),
      ]);
      expect(ra.summary.toolCalls[0]).toMatchObject({ variant: 'a', output: 'Hello, Ada!' });
      expect(rb.summary.toolCalls[0]).toMatchObject({ variant: 'b', output: 'Hi, Ada!' });
    });
  });

  describe('turn runner across vendor profiles', () => {
    // legacy-functions answers `tools` requests like openai; it has its own test below.
    const profiles = PROFILE_NAMES.filter((p) => p !== 'legacy-functions');
    for (const profile of profiles) {
      it(`runs parallel tool calls and resumes validly with the ${profile} profile`, async () => {
        sim.setProfile(profile);
        sim.setScript({
          rules: [
            {
              when: { round: 0 },
              reply: {
                parts: [
                  { text: 'Looking é up. ' },
                  { toolCall: weatherCall },
                  {
                    toolCall: {
                      name: 'get_current_weather',
                      arguments: { location: 'Zürich', format: 'celsius' },
                    },
                  },
                ],
              },
            },
            { reply: { parts: [{ text: 'Both are 22.' }] } },
          ],
        });
        const { summary } = await collectTurn({
          llm: await simClient(sim.url, { transport }),
          messages: conversation('Paris and Zürich'),
          toolset: weatherTools,
        });
        expect(summary.toolCalls.map((r) => [r.outcome, JSON.parse(r.output).location])).toEqual([
          ['ok', 'Paris'],
          ['ok', 'Zürich'],
        ]);
        expect(summary.text).toBe('Looking é up. Both are 22.');
        expect(chatRequests().map((r) => r.status)).toEqual([200, 200]);
        expect(summary.status).toBe('completed');
      });
    }

    it('speaks the legacy functions format end to end', async () => {
      sim.setProfile('legacy-functions');
      sim.setScript({
        rules: [
          { when: { round: 0 }, reply: { parts: [{ toolCall: weatherCall }] } },
          { reply: { parts: [{ text: 'It is 22.' }] } },
        ],
      });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('weather'),
        toolset: weatherTools,
        toolFormat: 'functions',
      });
      const first = chatRequests()[0]!.body as { functions: unknown[]; tools?: unknown };
      expect(first.functions).toHaveLength(1);
      expect(first.tools).toBeUndefined();
      expect(summary.messages.slice(0, 2)).toEqual([
        {
          role: 'assistant',
          content: null,
          function_call: {
            name: 'get_current_weather',
            arguments: '{"location":"Paris","format":"celsius"}',
          },
        },
        {
          role: 'function',
          name: 'get_current_weather',
          content: '{"location":"Paris","temperature":22,"unit":"celsius"}',
        },
      ]);
      expect(summary.text).toBe('It is 22.');
      expect(chatRequests().map((r) => r.status)).toEqual([200, 200]);
    });
  });

  describe('prompt-based tool mode', () => {
    it('is chosen per backend, and a character can still choose native', async () => {
      sim.setScript({ rules: [{ reply: { parts: [{ text: 'Hi.' }] } }] });
      const { createLlmClient } = await import('../../src/llm/client.js');
      const promptBackend = await createLlmClient({
        baseURL: sim.url,
        model: 'sim-model',
        transport,
        toolMode: 'prompt',
      });
      await collectTurn({
        llm: promptBackend,
        messages: conversation('hi'),
        toolset: weatherTools,
      });
      await collectTurn({
        llm: promptBackend,
        messages: conversation('hi'),
        toolset: weatherTools,
        toolMode: 'native',
      });
      const [byBackend, byCharacter] = chatRequests().map(
        (r) => r.body as { tools?: unknown; messages: ChatMessage[] },
      );
      expect(byBackend!.tools).toBeUndefined();
      expect(byBackend!.messages[0]!.content).toContain('TOOL_CALL:');
      expect(byCharacter!.tools).toHaveLength(1);
      expect(byCharacter!.messages[0]!.content).not.toContain('TOOL_CALL:');
    });

    it('withholds TOOL_CALL lines, runs the call and feeds the result back as a message', async () => {
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: {
              parts: [
                {
                  text: 'Let me look that up.\nTOOL_CALL: {"tool_name": "get_current_weather", "parameters": {"location": "Paris", "format": "celsius"}}\n',
                },
              ],
            },
          },
          { when: { toolResult: '22' }, reply: { parts: [{ text: 'It is 22 in Paris.' }] } },
        ],
      });
      const { summary, text } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('weather in Paris'),
        toolset: weatherTools,
        toolMode: 'prompt',
      });
      expect(text).toBe('Let me look that up.\nIt is 22 in Paris.');
      expect(summary.toolCalls[0]).toMatchObject({ name: 'get_current_weather', outcome: 'ok' });
      const first = chatRequests()[0]!.body as { messages: ChatMessage[]; tools?: unknown };
      expect(first.tools).toBeUndefined();
      expect(first.messages[0]!.content).toContain('TOOL_CALL: {"tool_name"');
      expect(first.messages[0]!.content).toContain('get_current_weather');
      const feedback = summary.messages[1] as { role: string; content: string };
      expect(feedback.role).toBe('user');
      expect(feedback.content.startsWith(TOOL_RESULT_MARKER)).toBe(true);
      expect(JSON.parse(feedback.content.slice(TOOL_RESULT_MARKER.length))).toMatchObject({
        tool_name: 'get_current_weather',
        outcome: 'ok',
      });
    });

    it('tells the model when a TOOL_CALL line cannot be read', async () => {
      sim.setScript({
        rules: [
          {
            when: { round: 0 },
            reply: {
              parts: [{ text: 'TOOL_CALL: {"tool_name": "get_current_weather", "parameters": {' }],
            },
          },
          { reply: { parts: [{ text: 'Sorry.' }] } },
        ],
      });
      const { summary } = await collectTurn({
        llm: await simClient(sim.url, { transport }),
        messages: conversation('weather'),
        toolset: weatherTools,
        toolMode: 'prompt',
      });
      expect(summary.toolCalls[0]).toMatchObject({ outcome: 'invalid_args' });
      expect(summary.toolCalls[0]!.output).toMatch(/could not read your TOOL_CALL line/);
      expect(summary.text).toBe('Sorry.');
    });
  });
});

describe('turn runner with a model that ignores tool_choice', () => {
  it('discards calls past the round limit and says the fallback line', async () => {
    // A fake client: every reply is a tool call, whatever tool_choice says.
    const requests: unknown[] = [];
    const llm = {
      model: 'stubborn',
      baseURL: 'fake://',
      async *stream(request: unknown) {
        requests.push(request);
        yield {
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  {
                    index: 0,
                    id: `call_${requests.length}`,
                    type: 'function',
                    function: { name: 'loop', arguments: '{}' },
                  },
                ],
              },
              finish_reason: 'tool_calls',
            },
          ],
        };
      },
    };
    const loop = defineTool({
      name: 'loop',
      description: 'l',
      parameters: z.object({}),
      handler: () => 'again',
    });
    const { summary, events } = await collectTurn({
      llm,
      messages: conversation('loop'),
      toolset: createToolset([loop]),
      maxToolRounds: 1,
      roundLimitFallback: 'I got stuck.',
    });
    expect(summary).toMatchObject({
      status: 'incomplete',
      reason: 'max_tool_rounds',
      toolRounds: 1,
      requests: 2,
      text: 'I got stuck.',
    });
    expect(events.find((e) => e.type === 'tool_calls.discarded')).toMatchObject({
      reason: 'max_tool_rounds',
    });
    expect(summary.messages.at(-1)).toEqual({ role: 'assistant', content: 'I got stuck.' });
    expect(requests).toHaveLength(2);
  });
});

describe('turn runner with client-side tools', () => {
  const getTime = {
    name: 'get_time',
    description: 'The time where the user is',
    parameters: { type: 'object', properties: {} },
  };
  const timeCall = { name: 'get_time', arguments: {} };

  it('offers client tools beside the toolset and ends the turn with their calls, unrun', async () => {
    sim.setScript({
      rules: [
        {
          when: { round: 0 },
          reply: { parts: [{ text: 'Let me look. ' }, { toolCall: timeCall }] },
        },
      ],
    });
    const { events, summary } = await collectTurn({
      llm: await simClient(sim.url),
      messages: conversation('What time is it?'),
      toolset: weatherTools,
      clientTools: [getTime],
    });
    const request = chatRequests()[0]!.body as { tools: OpenAiToolJson[] };
    expect(request.tools.map((t) => t.function.name)).toEqual(['get_current_weather', 'get_time']);
    expect(request.tools[1]).toEqual({ type: 'function', function: getTime });

    expect(summary).toMatchObject({
      status: 'completed',
      requests: 1,
      toolRounds: 1,
      toolCalls: [],
    });
    expect(summary.clientCalls).toEqual([
      { id: expect.any(String), name: 'get_time', arguments: '{}' },
    ]);
    const callId = summary.clientCalls[0]!.id;
    // The history ends with the call: the caller adds the client's output before resuming.
    expect(summary.messages).toEqual([
      {
        role: 'assistant',
        content: 'Let me look. ',
        tool_calls: [
          { id: callId, type: 'function', function: { name: 'get_time', arguments: '{}' } },
        ],
      },
    ]);
    expect(types(events)).not.toContain('tool.result');
    expect(events.find((e) => e.type === 'tool_call.done')).toMatchObject({
      call: { id: callId, name: 'get_time' },
    });
    expect(types(events).slice(-2)).toEqual(['round.end', 'finish']);
  });

  it('runs the server-side calls of a mixed round and hands the client-side ones back', async () => {
    sim.setScript({
      rules: [
        {
          when: { round: 0 },
          reply: { parts: [{ toolCall: weatherCall }, { toolCall: timeCall }] },
        },
      ],
    });
    const { events, summary } = await collectTurn({
      llm: await simClient(sim.url),
      messages: conversation('Weather in Paris, and the time?'),
      toolset: weatherTools,
      clientTools: [getTime],
    });
    expect(summary.toolCalls).toEqual([
      expect.objectContaining({ name: 'get_current_weather', outcome: 'ok' }),
    ]);
    expect(summary.clientCalls.map((c) => c.name)).toEqual(['get_time']);
    const [weatherId, timeId] = (
      summary.messages[0] as { tool_calls: Array<{ id: string }> }
    ).tool_calls.map((c) => c.id);
    expect(timeId).toBe(summary.clientCalls[0]!.id);
    expect(summary.messages.slice(1)).toEqual([
      {
        role: 'tool',
        tool_call_id: weatherId,
        content: '{"location":"Paris","temperature":22,"unit":"celsius"}',
      },
    ]);
    expect(events.filter((e) => e.type === 'tool.result')).toHaveLength(1);
    expect(summary).toMatchObject({ requests: 1, toolRounds: 1 });
  });

  it('resumes validly once the caller has added the client output as a tool message', async () => {
    sim.setScript({
      rules: [
        { when: { round: 0 }, reply: { parts: [{ toolCall: timeCall }] } },
        { when: { toolResult: '12:34' }, reply: { parts: [{ text: 'It is 12:34.' }] } },
      ],
    });
    const llm = await simClient(sim.url);
    const messages = conversation('What time is it?');
    const first = await collectTurn({ llm, messages, toolset: NO_TOOLS, clientTools: [getTime] });
    const call = first.summary.clientCalls[0]!;
    const output = toolResultMessages(
      [{ callId: call.id, name: call.name, outcome: 'ok', output: '{"time":"12:34"}' }],
      'native',
      false,
    );
    const second = await collectTurn({
      llm,
      messages: [...messages, ...first.summary.messages, ...output],
      toolset: NO_TOOLS,
      clientTools: [getTime],
    });
    expect(second.text).toBe('It is 12:34.');
    expect(second.summary).toMatchObject({ status: 'completed', clientCalls: [] });
    expect(chatRequests().map((r) => r.status)).toEqual([200, 200]);
    expect((chatRequests()[1]!.body as { messages: ChatMessage[] }).messages.slice(-2)).toEqual([
      first.summary.messages[0],
      { role: 'tool', tool_call_id: call.id, content: '{"time":"12:34"}' },
    ]);
  });

  it('hands back a client call in the legacy functions format', async () => {
    sim.setProfile('legacy-functions');
    sim.setScript({ rules: [{ when: { round: 0 }, reply: { parts: [{ toolCall: timeCall }] } }] });
    const { summary } = await collectTurn({
      llm: await simClient(sim.url),
      messages: conversation('What time is it?'),
      toolset: weatherTools,
      toolFormat: 'functions',
      clientTools: [getTime],
    });
    const request = chatRequests()[0]!.body as { functions: Array<{ name: string }> };
    expect(request.functions.map((f) => f.name)).toEqual(['get_current_weather', 'get_time']);
    expect(summary.clientCalls).toMatchObject([{ name: 'get_time' }]);
    expect(summary.messages).toEqual([
      { role: 'assistant', content: null, function_call: { name: 'get_time', arguments: '{}' } },
    ]);
  });

  it('lists client tools in the prompt and hands back their TOOL_CALL lines in prompt mode', async () => {
    sim.setScript({
      rules: [
        {
          when: { round: 0 },
          reply: {
            parts: [
              { text: 'One moment.\nTOOL_CALL: {"tool_name": "get_time", "parameters": {}}\n' },
            ],
          },
        },
      ],
    });
    const { summary, text } = await collectTurn({
      llm: await simClient(sim.url),
      messages: conversation('What time is it?'),
      toolset: weatherTools,
      toolMode: 'prompt',
      clientTools: [getTime],
    });
    const request = chatRequests()[0]!.body as { messages: ChatMessage[]; tools?: unknown };
    expect(request.tools).toBeUndefined();
    expect(request.messages[0]!.content).toContain('get_time');
    expect(text).toBe('One moment.\n');
    expect(summary.clientCalls).toMatchObject([{ name: 'get_time', arguments: '{}' }]);
    expect(summary.toolCalls).toEqual([]);
  });

  it('discards a client call made past the round limit like any other', async () => {
    sim.setScript({ rules: [{ reply: { parts: [{ toolCall: timeCall }] } }] });
    const { summary, events } = await collectTurn({
      llm: await simClient(sim.url),
      messages: conversation('What time is it?'),
      toolset: weatherTools,
      clientTools: [getTime],
      maxToolRounds: 0,
    });
    // tool_choice "none" makes the simulator answer without the call.
    expect((chatRequests()[0]!.body as { tool_choice?: string }).tool_choice).toBe('none');
    expect(summary.clientCalls).toEqual([]);
    expect(types(events)).not.toContain('tool_call.done');
  });
});

describe('turn runner call ids in prompt mode', () => {
  it('gives every TOOL_CALL line its own id across rounds and turns', async () => {
    const line = (name: string, args: object) =>
      `TOOL_CALL: ${JSON.stringify({ tool_name: name, parameters: args })}\n`;
    sim.setScript({
      rules: [
        {
          when: { round: 0 },
          reply: {
            parts: [
              { text: line('get_current_weather', { location: 'Paris', format: 'celsius' }) },
            ],
          },
        },
        { when: { round: 1 }, reply: { parts: [{ text: line('get_time', {}) }] } },
      ],
    });
    const options = {
      messages: conversation('Weather, then the time?'),
      toolset: weatherTools,
      toolMode: 'prompt' as const,
      clientTools: [{ name: 'get_time', description: 'Now', parameters: {} }],
    };
    const first = await collectTurn({ llm: await simClient(sim.url), ...options });
    const second = await collectTurn({ llm: await simClient(sim.url), ...options });
    const ids = [first, second].flatMap(({ events }) =>
      events.flatMap((e) => (e.type === 'tool_call.done' ? [e.call.id] : [])),
    );
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
    expect(first.summary.toolCalls[0]!.callId).toBe(ids[0]);
    expect(first.summary.clientCalls[0]!.id).toBe(ids[1]);
  });
});
