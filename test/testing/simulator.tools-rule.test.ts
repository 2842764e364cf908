/**
 * The `tools` condition of script rules: a rule can answer only requests
 * that offer tools (or only those that offer none), so one user line can get
 * a tool call from a tool-using client and plain text from another.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import {
  TOOLS_DISABLED_TEXT,
  conversationFacts,
  parseSimScript,
  ruleMatches,
  selectReply,
  startSimulator,
} from '../../src/testing/simulator/index.js';
import type { SimReply, SimScript, Simulator } from '../../src/testing/simulator/index.js';
import {
  WEATHER_TOOL,
  assembleCalls,
  ask,
  finishReasons,
  postChat,
  streamChat,
  textOf,
} from './sim-helpers.js';

const TOOL_CALL: SimReply = {
  parts: [{ toolCall: { name: 'get_current_weather', arguments: { location: 'Paris' } } }],
};
const PARIS_TEXT = 'Paris is lovely in spring.';
const NO_TOOLS_TEXT = 'You gave me no tools.';

const SCRIPT: SimScript = {
  rules: [
    { when: { user: 'paris', tools: true }, reply: TOOL_CALL },
    { when: { user: 'paris' }, reply: { parts: [{ text: PARIS_TEXT }] } },
    { when: { user: 'toolbox', tools: false }, reply: { parts: [{ text: NO_TOOLS_TEXT }] } },
  ],
  fallback: { parts: [{ text: 'fallback' }] },
};

/** The legacy `functions` form of the weather tool. */
const WEATHER_FUNCTION = WEATHER_TOOL.function;

let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ script: SCRIPT });
});

afterAll(() => sim.close());

describe('a rule with tools: true, through the simulator', () => {
  it('answers a request that offers tools', async () => {
    const { chunks } = await streamChat(sim, {
      messages: ask('Weather in Paris?'),
      tools: [WEATHER_TOOL],
    });
    expect(assembleCalls(chunks)).toEqual([
      {
        id: expect.stringMatching(/^call_/),
        name: 'get_current_weather',
        arguments: '{"location":"Paris"}',
      },
    ]);
    expect(textOf(chunks)).toBe('');
    expect(finishReasons(chunks)).toEqual(['tool_calls']);
  });

  it('answers a request whose tool_choice is auto or required', async () => {
    for (const toolChoice of ['auto', 'required']) {
      const { chunks } = await streamChat(sim, {
        messages: ask('Paris, please'),
        tools: [WEATHER_TOOL],
        tool_choice: toolChoice,
      });
      expect(assembleCalls(chunks).map((c) => c.name)).toEqual(['get_current_weather']);
    }
  });

  it('answers a legacy request that offers functions', async () => {
    const { chunks } = await streamChat(sim, {
      messages: ask('Paris?'),
      functions: [WEATHER_FUNCTION],
    });
    const call = chunks.flatMap((c) => {
      const fc = (c.choices?.[0]?.delta as { function_call?: { name?: string } } | undefined)
        ?.function_call;
      return fc?.name === undefined ? [] : [fc.name];
    });
    expect(call).toEqual(['get_current_weather']);
  });

  it('leaves a request without tools to the next rule', async () => {
    const { chunks } = await streamChat(sim, { messages: ask('Weather in Paris?') });
    expect(textOf(chunks)).toBe(PARIS_TEXT);
    expect(assembleCalls(chunks)).toEqual([]);
    expect(finishReasons(chunks)).toEqual(['stop']);
  });

  it('leaves a request with an empty tools list to the next rule', async () => {
    const { chunks } = await streamChat(sim, { messages: ask('Weather in Paris?'), tools: [] });
    expect(textOf(chunks)).toBe(PARIS_TEXT);
  });

  it("leaves a request with tool_choice 'none' to the next rule, not to the tools-disabled text", async () => {
    const { chunks } = await streamChat(sim, {
      messages: ask('Weather in Paris?'),
      tools: [WEATHER_TOOL],
      tool_choice: 'none',
    });
    expect(textOf(chunks)).toBe(PARIS_TEXT);
    expect(textOf(chunks)).not.toBe(TOOLS_DISABLED_TEXT);
    expect(assembleCalls(chunks)).toEqual([]);
  });

  it("leaves a legacy request with function_call 'none' to the next rule", async () => {
    const { chunks } = await streamChat(sim, {
      messages: ask('Paris?'),
      functions: [WEATHER_FUNCTION],
      function_call: 'none',
    });
    expect(textOf(chunks)).toBe(PARIS_TEXT);
  });

  it('chooses the same way for a reply that is not streamed', async () => {
    const answer = async (body: Record<string, unknown>) => {
      const res = await postChat(sim, { model: 'sim-model', messages: ask('Paris?'), ...body });
      expect(res.status).toBe(200);
      const json = (await res.json()) as {
        choices: Array<{ message: { content: string | null; tool_calls?: unknown[] } }>;
      };
      return json.choices[0]!.message;
    };
    const withTools = await answer({ tools: [WEATHER_TOOL] });
    expect(withTools.tool_calls).toHaveLength(1);
    const without = await answer({});
    expect(without.content).toBe(PARIS_TEXT);
    expect(without.tool_calls).toBeUndefined();
  });
});

describe('a rule with tools: false, through the simulator', () => {
  it('answers only requests that offer no tools', async () => {
    const bare = await streamChat(sim, { messages: ask('What is in the toolbox?') });
    expect(textOf(bare.chunks)).toBe(NO_TOOLS_TEXT);

    const none = await streamChat(sim, {
      messages: ask('What is in the toolbox?'),
      tools: [WEATHER_TOOL],
      tool_choice: 'none',
    });
    expect(textOf(none.chunks)).toBe(NO_TOOLS_TEXT);

    const offered = await streamChat(sim, {
      messages: ask('What is in the toolbox?'),
      tools: [WEATHER_TOOL],
    });
    expect(textOf(offered.chunks)).toBe('fallback');
  });
});

describe('selectReply with the tools condition', () => {
  const messages = ask('Paris?');

  it('picks the tools rule only when tools are offered', () => {
    expect(selectReply(SCRIPT, messages, true)).toEqual({ reply: TOOL_CALL, ruleIndex: 0 });
    expect(selectReply(SCRIPT, messages, false).ruleIndex).toBe(1);
  });

  it('matches no tools rule, either way, when the caller does not say', () => {
    expect(selectReply(SCRIPT, messages).ruleIndex).toBe(1);
    expect(selectReply(SCRIPT, ask('toolbox')).ruleIndex).toBeNull();
  });

  it('leaves the facts without tools when only messages are known', () => {
    const facts = conversationFacts(messages);
    expect(facts.tools).toBeUndefined();
    expect(ruleMatches({ tools: true }, facts)).toBe(false);
    expect(ruleMatches({ tools: false }, facts)).toBe(false);
    expect(ruleMatches({ tools: true }, { ...facts, tools: true })).toBe(true);
    expect(ruleMatches({ tools: false }, { ...facts, tools: false })).toBe(true);
    expect(ruleMatches({ user: 'paris' }, { ...facts, tools: true })).toBe(true);
  });
});

describe('parseSimScript with the tools condition', () => {
  it('accepts true and false', () => {
    expect(parseSimScript(SCRIPT)).toEqual(SCRIPT);
  });

  it("rejects tools: 'yes', naming the field", () => {
    const bad = { rules: [{ when: { user: 'paris', tools: 'yes' }, reply: TOOL_CALL }] };
    expect(() => parseSimScript(bad, 'tools.json')).toThrow(ConfigError);
    expect(() => parseSimScript(bad, 'tools.json')).toThrow(/tools\.json.*rules\[0\]\.when\.tools/);
  });

  it('rejects a misspelt tools condition', () => {
    const bad = { rules: [{ when: { tool: true }, reply: TOOL_CALL }] };
    expect(() => parseSimScript(bad)).toThrow(/rules\[0\]\.when.*"tool"/);
  });
});
