import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChunkLike } from '../../src/llm/chunk.js';
import {
  DEFAULT_FALLBACK_TEXT,
  PROFILE_NAMES,
  TOOLS_DISABLED_TEXT,
  startSimulator,
} from '../../src/testing/simulator/index.js';
import type { SimScript, Simulator } from '../../src/testing/simulator/index.js';
import {
  TIME_TOOL,
  WEATHER_TOOL,
  ask,
  assembleCalls,
  finishReasons,
  parseSse,
  postChat,
  streamChat,
  textOf,
  toolChunks,
  toolEntries,
} from './sim-helpers.js';

const LONG_TEXT = Array.from({ length: 300 }, (_, i) => `word${i}`).join(' ');

const SCRIPT: SimScript = {
  rules: [
    {
      when: { user: 'parallel' },
      reply: {
        parts: [
          { text: 'Checking. ' },
          { toolCall: { name: 'get_current_weather', arguments: { location: 'Paris é' } } },
          { toolCall: { name: 'get_time', arguments: '' } },
        ],
      },
    },
    {
      when: { user: 'single' },
      reply: {
        parts: [
          { text: 'One moment. ' },
          { toolCall: { name: 'get_current_weather', arguments: { location: 'Oslo' } } },
        ],
      },
    },
    {
      when: { user: 'call first' },
      reply: { parts: [{ toolCall: { name: 'get_time', arguments: {} } }] },
    },
    {
      when: { user: 'interleave' },
      reply: {
        parts: [
          { text: 'Before. ' },
          { toolCall: { name: 'get_current_weather', arguments: { location: 'Rome' } } },
          { text: 'Between. ' },
          { toolCall: { name: 'get_time', arguments: '{"tz": "UTC"}' } },
          { text: 'After.' },
        ],
      },
    },
    {
      when: { user: 'think' },
      reply: { parts: [{ reasoning: 'The user wants a number.' }, { text: 'Seven.' }] },
    },
    {
      when: { user: 'weather', round: 0 },
      reply: {
        parts: [{ toolCall: { name: 'get_current_weather', arguments: { location: 'Paris' } } }],
      },
    },
    {
      when: { user: 'weather', toolResult: 'sunny' },
      reply: { parts: [{ text: 'It is sunny.' }] },
    },
    { when: { user: 'weather', round: 1 }, reply: { parts: [{ text: 'No idea.' }] } },
    { when: { system: 'Pirate' }, reply: { parts: [{ text: 'Arr.' }] } },
    { when: { user: 'hello' }, reply: { parts: [{ text: 'Hi there.' }] } },
    { when: { user: 'hello' }, reply: { parts: [{ text: 'Never sent.' }] } },
    { when: { user: 'café' }, reply: { parts: [{ text: 'Un café, très bien ☕ 😀.' }] } },
    { when: { user: 'long' }, reply: { parts: [{ text: LONG_TEXT }] } },
  ],
};

const TOOLS = [WEATHER_TOOL, TIME_TOOL];

let sim: Simulator;
let client: OpenAI;

beforeAll(async () => {
  sim = await startSimulator({ script: SCRIPT });
  client = new OpenAI({ baseURL: sim.url, apiKey: 'x', maxRetries: 0 });
});

afterAll(async () => {
  await sim.close();
});

function delta(chunk: ChunkLike | undefined): Record<string, unknown> {
  return (chunk?.choices?.[0]?.delta ?? {}) as Record<string, unknown>;
}

/** Chunks that carry a choice (the usage chunk has none). */
function choiceChunks(chunks: ChunkLike[]): ChunkLike[] {
  return chunks.filter((c) => (c.choices ?? []).length > 0);
}

async function complete(body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await postChat(sim, { model: 'sim-model', ...body });
  expect(res.status).toBe(200);
  const json = (await res.json()) as { choices: Array<{ message: Record<string, unknown> }> };
  return json.choices[0]?.message ?? {};
}

/** Reads a streamed response until it ends or fails; returns what arrived. */
async function readUntilEnd(res: Response): Promise<{ text: string; failed: boolean }> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text, failed: false };
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    return { text, failed: true };
  }
}

/** Reads until `count` chunks have arrived; leaves the stream open. */
async function readChunks(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  count: number,
): Promise<ChunkLike[]> {
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const complete = text.slice(0, text.lastIndexOf('\n\n') + 2);
    const parsed = parseSse(complete);
    if (parsed.chunks.length >= count) return parsed.chunks;
    const { done, value } = await reader.read();
    if (done) throw new Error(`stream ended after ${parsed.chunks.length} chunks`);
    text += decoder.decode(value, { stream: true });
  }
}

describe('the openai profile', () => {
  it('streams the reference format: role chunk, then id/type/name, then index-and-arguments fragments', async () => {
    sim.setProfile('openai');
    const { chunks, done } = await streamChat(sim, {
      messages: ask('parallel please'),
      tools: TOOLS,
    });
    expect(done).toBe(true);
    expect(delta(chunks[0])).toEqual({ role: 'assistant', content: '' });
    const entries = toolEntries(chunks);
    expect(entries[0]).toEqual({
      index: 0,
      id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/),
      type: 'function',
      function: { name: 'get_current_weather', arguments: '' },
    });
    const continuations = entries.filter((e) => e.index === 0).slice(1);
    // 24 characters of JSON in fragments of at most 8: splits fall mid-key.
    expect(continuations.length).toBeGreaterThanOrEqual(3);
    for (const e of continuations) {
      expect(Object.keys(e).sort()).toEqual(['function', 'index']);
      expect(Object.keys(e.function ?? {})).toEqual(['arguments']);
    }
    const second = entries.find((e) => e.index === 1);
    expect(second?.id).toMatch(/^call_/);
    expect(second?.id).not.toBe(entries[0]?.id);
    const calls = assembleCalls(chunks);
    expect(JSON.parse(calls[0]?.arguments ?? '')).toEqual({ location: 'Paris é' });
    expect(calls[1]?.arguments).toBe('{}');
    expect(finishReasons(chunks)).toEqual(['tool_calls']);
    expect(delta(chunks[chunks.length - 1])).toEqual({});
  });

  it('wraps every chunk in the same envelope with the requested model and a send stamp', async () => {
    sim.setProfile('openai');
    const { chunks } = await streamChat(sim, { model: 'my-model', messages: ask('hello') });
    const id = chunks[0]?.id;
    expect(id).toMatch(/^chatcmpl-/);
    for (const c of chunks) {
      expect(c).toMatchObject({ id, object: 'chat.completion.chunk', model: 'my-model' });
      expect(typeof c.created).toBe('number');
      expect(c.x_sim_sent_at).toBeGreaterThan(1e12);
    }
  });

  it('sends content null beside the first tool call when the reply opens with a call', async () => {
    sim.setProfile('openai');
    const { chunks } = await streamChat(sim, { messages: ask('call first'), tools: TOOLS });
    expect(delta(chunks[0])).toMatchObject({ role: 'assistant', content: null });
    expect(toolEntries([chunks[0] as ChunkLike])[0]?.function?.name).toBe('get_time');
  });

  it('can be driven by the openai package, which reassembles text and calls', async () => {
    sim.setProfile('openai');
    const stream = await client.chat.completions.create({
      model: 'sim-model',
      messages: [{ role: 'user', content: 'single call please' }],
      tools: [...TOOLS] as OpenAI.Chat.ChatCompletionTool[],
      stream: true,
    });
    let text = '';
    let args = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      text += choice?.delta.content ?? '';
      args += choice?.delta.tool_calls?.[0]?.function?.arguments ?? '';
      finish = choice?.finish_reason ?? finish;
    }
    expect(text).toBe('One moment. ');
    expect(JSON.parse(args)).toEqual({ location: 'Oslo' });
    expect(finish).toBe('tool_calls');
  });
});

describe('the vllm-hermes profile', () => {
  it('repeats the name on continuations, nulls or omits the id there, and leaves out type', async () => {
    sim.setProfile('vllm-hermes');
    const { chunks } = await streamChat(sim, { messages: ask('parallel please'), tools: TOOLS });
    const entries = toolEntries(chunks);
    expect(entries[0]).toEqual({
      index: 0,
      id: expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/),
      type: 'function',
      function: { name: 'get_current_weather' },
    });
    const continuations = entries.filter((e) => e.index === 0).slice(1);
    expect(continuations.length).toBeGreaterThanOrEqual(2);
    for (const e of continuations) {
      expect(e.function?.name).toBe('get_current_weather');
      expect('type' in e).toBe(false);
    }
    expect(continuations.some((e) => 'id' in e && e.id === null)).toBe(true);
    expect(continuations.some((e) => !('id' in e))).toBe(true);
  });

  it('escapes non-ASCII in arguments and sends "" for a no-parameter call', async () => {
    sim.setProfile('vllm-hermes');
    const { chunks } = await streamChat(sim, { messages: ask('parallel please'), tools: TOOLS });
    const [weather, time] = assembleCalls(chunks);
    expect(weather?.arguments).toContain('\\u00e9');
    expect(JSON.parse(weather?.arguments ?? '')).toEqual({ location: 'Paris é' });
    expect(time?.arguments).toBe('');
  });

  it('puts the last arguments fragment and the finish reason in the same chunk', async () => {
    sim.setProfile('vllm-hermes');
    const { chunks } = await streamChat(sim, { messages: ask('single call'), tools: TOOLS });
    const last = choiceChunks(chunks).at(-1);
    expect(last?.choices?.[0]?.finish_reason).toBe('tool_calls');
    expect(last?.choices?.[0]?.delta?.tool_calls?.[0]?.function?.arguments).toMatch(/.+/);
  });

  it('sends cumulative usage on every chunk and reasoning in reasoning_content', async () => {
    sim.setProfile('vllm-hermes');
    const { chunks } = await streamChat(sim, {
      messages: ask('think about it'),
      stream_options: { include_usage: true },
    });
    const counts = chunks.map((c) => c.usage?.completion_tokens);
    expect(counts.every((n) => typeof n === 'number')).toBe(true);
    expect(counts).toEqual([...(counts as number[])].sort((a, b) => a - b));
    expect(counts.at(-1)).toBeGreaterThan(0);
    const reasoning = chunks.map((c) => c.choices?.[0]?.delta?.reasoning_content ?? '').join('');
    expect(reasoning).toBe('The user wants a number.');
    expect(textOf(chunks)).toBe('Seven.');
  });

  it('drops the per-chunk usage when continuousUsage is turned off', async () => {
    const quiet = await startSimulator({ profile: 'vllm-hermes', continuousUsage: false });
    try {
      const { chunks } = await streamChat(quiet, { messages: ask('hi') });
      expect(chunks.every((c) => c.usage === undefined)).toBe(true);
    } finally {
      await quiet.close();
    }
  });
});

describe('the ollama profile', () => {
  it('sends each call whole with index 0 and a distinct id, and finishes with stop', async () => {
    sim.setProfile('ollama');
    const { chunks } = await streamChat(sim, { messages: ask('parallel please'), tools: TOOLS });
    const calls = toolChunks(chunks);
    expect(calls).toHaveLength(2);
    const entries = toolEntries(chunks);
    expect(entries.map((e) => e.index)).toEqual([0, 0]);
    expect(entries[0]?.id).toMatch(/^call_[a-z0-9]{8}$/);
    expect(entries[0]?.id).not.toBe(entries[1]?.id);
    expect(JSON.parse(String(entries[0]?.function?.arguments ?? ''))).toEqual({
      location: 'Paris é',
    });
    expect(entries[1]?.function?.arguments).toBe('{}');
    expect(finishReasons(chunks)).toEqual(['stop']);
    for (const c of chunks) expect(delta(c).role).toBe('assistant');
  });

  it('streams reasoning in delta.reasoning', async () => {
    sim.setProfile('ollama');
    const { chunks } = await streamChat(sim, { messages: ask('think') });
    const reasoning = chunks.map((c) => c.choices?.[0]?.delta?.reasoning ?? '').join('');
    expect(reasoning).toBe('The user wants a number.');
    expect(textOf(chunks)).toBe('Seven.');
  });
});

describe('the groq profile', () => {
  it('sends whole calls with proper indexes and usage in x_groq on the last chunk', async () => {
    sim.setProfile('groq');
    const { chunks } = await streamChat(sim, { messages: ask('parallel please'), tools: TOOLS });
    expect(toolChunks(chunks)).toHaveLength(2);
    const entries = toolEntries(chunks);
    expect(entries.map((e) => e.index)).toEqual([0, 1]);
    expect(entries[0]).toMatchObject({
      type: 'function',
      function: { name: 'get_current_weather' },
    });
    expect(JSON.parse(String(entries[0]?.function?.arguments ?? ''))).toEqual({
      location: 'Paris é',
    });
    expect(finishReasons(chunks)).toEqual(['tool_calls']);
    const last = chunks.at(-1) as ChunkLike & {
      x_groq?: { usage?: { completion_tokens: number } };
    };
    expect(last.choices?.[0]?.finish_reason).toBe('tool_calls');
    expect(last.x_groq?.usage?.completion_tokens).toBeGreaterThan(0);
  });
});

describe('the mistral profile', () => {
  it('sends whole calls with 9-character ids, an index, no type and content "" beside them', async () => {
    sim.setProfile('mistral');
    const { chunks } = await streamChat(sim, { messages: ask('parallel please'), tools: TOOLS });
    const calls = toolChunks(chunks);
    expect(calls).toHaveLength(2);
    for (const [k, c] of calls.entries()) {
      expect(delta(c).content).toBe('');
      const entry = c.choices?.[0]?.delta?.tool_calls?.[0];
      expect(entry?.id).toMatch(/^[A-Za-z0-9]{9}$/);
      expect(entry?.index).toBe(k);
      expect(entry !== undefined && 'type' in entry).toBe(false);
    }
    expect(finishReasons(chunks)).toEqual(['tool_calls']);
  });
});

describe('the gemini-compat profile', () => {
  it('omits index, repeats the full id on every chunk of a call and finishes with stop', async () => {
    sim.setProfile('gemini-compat');
    const { chunks } = await streamChat(sim, { messages: ask('parallel please'), tools: TOOLS });
    const entries = toolEntries(chunks);
    expect(entries.length).toBe(4);
    for (const e of entries) expect('index' in e).toBe(false);
    expect(entries[0]?.id).toBe(entries[1]?.id);
    expect(entries[2]?.id).toBe(entries[3]?.id);
    expect(entries[0]?.id).not.toBe(entries[2]?.id);
    expect(entries[0]?.function?.name).toBe('get_current_weather');
    expect(JSON.parse(String(entries[1]?.function?.arguments ?? ''))).toEqual({
      location: 'Paris é',
    });
    expect(finishReasons(chunks)).toEqual(['stop']);
  });
});

describe('the lmstudio profile', () => {
  it('sends name "" first, the real name next, name "" after, and type only with the last fragment', async () => {
    sim.setProfile('lmstudio');
    const { chunks } = await streamChat(sim, { messages: ask('single call'), tools: TOOLS });
    const entries = toolEntries(chunks);
    expect(entries[0]).toEqual({
      index: 0,
      id: expect.stringMatching(/^\d{9}$/),
      function: { name: '', arguments: '' },
    });
    expect(entries[1]?.function?.name).toBe('get_current_weather');
    for (const e of entries.slice(2)) expect(e.function?.name).toBe('');
    expect(entries.map((e) => 'type' in e)).toEqual(
      entries.map((_, i) => i === entries.length - 1),
    );
    expect(JSON.parse(assembleCalls(chunks)[0]?.arguments ?? '')).toEqual({ location: 'Oslo' });
  });
});

describe('the litellm profile', () => {
  it('uses sparse indexes from 1, repeats the id, trails arguments "" and sends no finish reason', async () => {
    sim.setProfile('litellm');
    const { chunks, done } = await streamChat(sim, {
      messages: ask('parallel please'),
      tools: TOOLS,
    });
    const entries = toolEntries(chunks);
    expect([...new Set(entries.map((e) => e.index))]).toEqual([1, 3]);
    for (const index of [1, 3]) {
      const ofCall = entries.filter((e) => e.index === index);
      expect(new Set(ofCall.map((e) => e.id)).size).toBe(1);
      expect(ofCall.at(-1)?.function).toEqual({ arguments: '' });
    }
    expect(finishReasons(chunks)).toEqual([]);
    expect(done).toBe(true);
  });
});

describe('the legacy-functions profile', () => {
  it('streams one function_call with finish_reason function_call for a functions request', async () => {
    sim.setProfile('legacy-functions');
    const { chunks } = await streamChat(sim, {
      messages: ask('parallel please'),
      functions: TOOLS.map((t) => t.function),
    });
    const calls = chunks.flatMap((c) => c.choices?.[0]?.delta?.function_call ?? []);
    expect(calls[0]).toEqual({ name: 'get_current_weather', arguments: '' });
    expect(calls.slice(1).every((c) => Object.keys(c).join() === 'arguments')).toBe(true);
    expect(JSON.parse(calls.map((c) => c.arguments).join(''))).toEqual({ location: 'Paris é' });
    expect(toolEntries(chunks)).toEqual([]);
    expect(finishReasons(chunks)).toEqual(['function_call']);
  });

  it('streams like openai when the request uses tools', async () => {
    sim.setProfile('legacy-functions');
    const { chunks } = await streamChat(sim, { messages: ask('parallel please'), tools: TOOLS });
    expect(toolEntries(chunks)[0]).toMatchObject({ index: 0, type: 'function' });
    expect(finishReasons(chunks)).toEqual(['tool_calls']);
  });
});

describe('every profile', () => {
  it.each(PROFILE_NAMES)(
    'streams %s output that reassembles to the scripted reply',
    async (name) => {
      sim.setProfile(name);
      const { chunks, done } = await streamChat(sim, { messages: ask('parallel'), tools: TOOLS });
      expect(done).toBe(true);
      expect(textOf(chunks)).toBe('Checking. ');
      const calls = assembleCalls(chunks);
      expect(calls.map((c) => c.name)).toEqual(['get_current_weather', 'get_time']);
      expect(JSON.parse(calls[0]?.arguments ?? '')).toEqual({ location: 'Paris é' });
      expect(JSON.parse(calls[1]?.arguments || '{}')).toEqual({});
    },
  );
});

describe('scripts', () => {
  it('matches the user text case-insensitively and lets the first matching rule win', async () => {
    sim.setProfile('openai');
    expect((await complete({ messages: ask('HELLO friend') })).content).toBe('Hi there.');
  });

  it('matches the latest real user message, skipping prompt-mode TOOL_RESULT messages', async () => {
    const messages = [
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', content: 'Sure.' },
      { role: 'user', content: 'hello again' },
    ];
    expect((await complete({ messages })).content).toBe('Hi there.');
  });

  it('reads the text parts of a user message given as an array', async () => {
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } },
          { type: 'text', text: 'Hello there' },
        ],
      },
    ];
    expect((await complete({ messages })).content).toBe('Hi there.');
  });

  it('counts rounds as assistant messages after the user message', async () => {
    const first = await complete({ messages: ask('weather?'), tools: TOOLS });
    const calls = first.tool_calls as Array<{ id: string; function: { arguments: string } }>;
    expect(calls).toHaveLength(1);
    const messages = [
      ...ask('weather?'),
      { role: 'assistant', content: null, tool_calls: first.tool_calls },
      { role: 'tool', tool_call_id: calls[0]?.id, content: '{"sky":"cloudy"}' },
    ];
    expect((await complete({ messages, tools: TOOLS })).content).toBe('No idea.');
  });

  it('matches a tool result case-insensitively', async () => {
    const call = {
      id: 'call_1',
      type: 'function',
      function: { name: 'get_current_weather', arguments: '{}' },
    };
    const messages = [
      ...ask('weather?'),
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"sky":"SUNNY"}' },
    ];
    expect((await complete({ messages, tools: TOOLS })).content).toBe('It is sunny.');
  });

  it('matches a tool result fed back as a prompt-mode TOOL_RESULT user message', async () => {
    const messages = [
      ...ask('weather?'),
      { role: 'assistant', content: '<tool_call>get_current_weather</tool_call>' },
      { role: 'user', content: 'TOOL_RESULT get_current_weather: sunny, 24°C' },
    ];
    expect((await complete({ messages })).content).toBe('It is sunny.');
  });

  it('matches a substring of the system message', async () => {
    const messages = [{ role: 'system', content: 'You are a Pirate.' }, ...ask('yo')];
    expect((await complete({ messages })).content).toBe('Arr.');
  });

  it('answers with the default fallback when no rule matches', async () => {
    expect((await complete({ messages: ask('zzz') })).content).toBe(DEFAULT_FALLBACK_TEXT);
  });

  it('emits text before, between and after tool calls in the order given', async () => {
    sim.setProfile('openai');
    const { chunks } = await streamChat(sim, { messages: ask('interleave'), tools: TOOLS });
    const order: string[] = [];
    for (const c of chunks) {
      const d = c.choices?.[0]?.delta;
      const kind = d?.content
        ? `text`
        : d?.tool_calls?.[0]?.id
          ? `call:${d.tool_calls[0].function?.name}`
          : null;
      if (kind !== null && order.at(-1) !== kind && !(kind === 'text' && order.at(-1) === 'text')) {
        order.push(kind);
      }
    }
    expect(order).toEqual(['text', 'call:get_current_weather', 'text', 'call:get_time', 'text']);
    expect(textOf(chunks)).toBe('Before. Between. After.');
    expect(assembleCalls(chunks)[1]?.arguments).toBe('{"tz": "UTC"}');
  });

  it('leaves tool calls out when the request has no tools', async () => {
    const { chunks } = await streamChat(sim, { messages: ask('interleave') });
    expect(toolEntries(chunks)).toEqual([]);
    expect(textOf(chunks)).toBe('Before. Between. After.');
  });

  it('says tools are disabled when tool_choice is none and the reply held only calls', async () => {
    const { chunks } = await streamChat(sim, {
      messages: ask('call first'),
      tools: TOOLS,
      tool_choice: 'none',
    });
    expect(toolEntries(chunks)).toEqual([]);
    expect(textOf(chunks)).toBe(TOOLS_DISABLED_TEXT);
  });

  it('answers by the script set with setScript', async () => {
    const other = await startSimulator();
    try {
      other.setScript({ rules: [], fallback: { parts: [{ text: 'Custom fallback.' }] } });
      const { chunks } = await streamChat(other, { messages: ask('anything') });
      expect(textOf(chunks)).toBe('Custom fallback.');
    } finally {
      await other.close();
    }
  });
});

describe('non-streamed replies', () => {
  it('returns one chat.completion with content, tool calls, finish reason and usage', async () => {
    sim.setProfile('openai');
    const completion = await client.chat.completions.create({
      model: 'sim-model',
      messages: [{ role: 'user', content: 'parallel' }],
      tools: [...TOOLS] as OpenAI.Chat.ChatCompletionTool[],
    });
    expect(completion.object).toBe('chat.completion');
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBe('Checking. ');
    const calls = (choice?.message.tool_calls ??
      []) as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
    expect(calls.map((c) => c.function.name)).toEqual(['get_current_weather', 'get_time']);
    expect(JSON.parse(calls[0]?.function.arguments ?? '')).toEqual({ location: 'Paris é' });
    expect(completion.usage?.total_tokens).toBe(
      (completion.usage?.prompt_tokens ?? 0) + (completion.usage?.completion_tokens ?? 0),
    );
  });

  it('returns a legacy function_call for a functions request', async () => {
    sim.setProfile('legacy-functions');
    const message = await complete({
      messages: ask('single'),
      functions: TOOLS.map((t) => t.function),
    });
    expect(message.function_call).toEqual({
      name: 'get_current_weather',
      arguments: '{"location":"Oslo"}',
    });
    expect(message.tool_calls).toBeUndefined();
  });
});

describe('endpoints', () => {
  it('lists the configured models on GET /v1/models', async () => {
    const page = await client.models.list();
    expect(page.data).toEqual([
      { id: 'sim-model', object: 'model', created: expect.any(Number), owned_by: 'troupe-sim' },
    ]);
  });

  it('answers 404 with a JSON error for unknown paths', async () => {
    const res = await fetch(`${sim.url}/embeddings`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /No route/,
    );
  });

  it('answers 400 to a body that is not JSON', async () => {
    const res = await fetch(`${sim.url}/chat/completions`, { method: 'POST', body: '{"model":' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ object: 'error', type: 'BadRequestError', code: 400 });
  });

  it('answers 400 with vLLM’s error body to an invalid history', async () => {
    const res = await postChat(sim, {
      model: 'sim-model',
      messages: [
        ...ask('x'),
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toEqual({
      object: 'error',
      message: expect.stringContaining('messages[1]'),
      type: 'BadRequestError',
      param: null,
      code: 400,
    });
  });

  it('records every request with method, path, body, headers, time and status', async () => {
    sim.clearRequests();
    const before = performance.timeOrigin + performance.now();
    await fetch(`${sim.url}/models`);
    await streamChat(sim, { messages: ask('hello') });
    await fetch(`${sim.url}/nope`);
    expect(sim.requests.map((r) => [r.method, r.path, r.status])).toEqual([
      ['GET', '/v1/models', 200],
      ['POST', '/v1/chat/completions', 200],
      ['GET', '/v1/nope', 404],
    ]);
    const chat = sim.requests[1];
    expect(chat?.body).toMatchObject({ model: 'sim-model', messages: ask('hello') });
    expect(chat?.headers['content-type']).toBe('application/json');
    expect(chat?.receivedAt).toBeGreaterThanOrEqual(before);
    expect(chat?.outcome).toBe('complete');
    expect(sim.requests[0]?.body).toBeNull();
  });
});

describe('the request log', () => {
  it('keeps only the latest requests (keepRequests), so a long run holds a bounded log', async () => {
    const small = await startSimulator({ keepRequests: 3 });
    try {
      for (let i = 0; i < 5; i++) await streamChat(small, { messages: ask(`line ${i}`) });
      expect(small.requests.map((r) => (r.body as { messages: unknown }).messages)).toEqual([
        ask('line 2'),
        ask('line 3'),
        ask('line 4'),
      ]);
    } finally {
      await small.close();
    }
  });

  it('refuses a keepRequests that is not a whole number >= 0', async () => {
    await expect(startSimulator({ keepRequests: -1 })).rejects.toThrow(/keepRequests/);
    await expect(startSimulator({ keepRequests: 1.5 })).rejects.toThrow(/keepRequests/);
  });
});

describe('the request log over HTTP', () => {
  it('lists when each request arrived for clients in another process, and clears on DELETE', async () => {
    const root = sim.url.replace(/\/v1$/, '');
    await fetch(`${root}/sim/requests`, { method: 'DELETE' });
    await streamChat(sim, { messages: ask('hello') });
    const res = await fetch(`${root}/sim/requests`);
    const { requests } = (await res.json()) as { requests: Array<Record<string, unknown>> };
    expect(requests).toEqual([
      {
        method: 'POST',
        path: '/v1/chat/completions',
        receivedAt: expect.any(Number),
        status: 200,
        outcome: 'complete',
        chunksWritten: expect.any(Number),
      },
    ]);
    expect(sim.requests.at(-1)?.path).toBe('/sim/requests');
  });

  it('gives the latest requests with their bodies and faults when asked', async () => {
    const root = sim.url.replace(/\/v1$/, '');
    await fetch(`${root}/sim/requests`, { method: 'DELETE' });
    await streamChat(sim, { messages: ask('hello') });
    sim.injectFault({ type: 'http', status: 503 });
    await postChat(sim, { model: 'm', messages: ask('again'), stream: true });
    const res = await fetch(`${root}/sim/requests?bodies=1&last=1`);
    const { requests } = (await res.json()) as { requests: Array<Record<string, unknown>> };
    expect(requests).toEqual([
      expect.objectContaining({
        status: 503,
        body: expect.objectContaining({ messages: ask('again') }),
        fault: { type: 'http', status: 503 },
      }),
    ]);
    for (const query of ['bodies=yes', 'last=-1', 'last=2.5', 'last=']) {
      const bad = await fetch(`${root}/sim/requests?${query}`);
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(
        /^GET \/sim\/requests: (bodies|last) must be/,
      );
    }
  });
});

describe('usage', () => {
  it('sends a last chunk with no choices and usage when include_usage is set', async () => {
    sim.setProfile('openai');
    const { chunks, done } = await streamChat(sim, {
      messages: ask(`hello ${'x'.repeat(394)}`),
      stream_options: { include_usage: true },
    });
    expect(done).toBe(true);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    const pieces = chunks.filter((c) => (c.choices?.[0]?.delta?.content ?? '') !== '').length;
    expect(last?.usage).toEqual({
      prompt_tokens: 100,
      completion_tokens: pieces,
      total_tokens: 100 + pieces,
    });
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined)).toBe(true);
  });
});

describe('faults', () => {
  it('answers 429 with retry-after 0 and an error body', async () => {
    sim.injectFault({ type: 'http', status: 429 });
    const res = await postChat(sim, { model: 'm', messages: ask('hello'), stream: true });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('0');
    expect(await res.json()).toEqual({
      error: { message: expect.any(String), type: expect.any(String), code: 429 },
    });
  });

  it('applies faults once each, in the order they were injected', async () => {
    sim.injectFault({ type: 'http', status: 503, message: 'busy' });
    sim.injectFault({ type: 'http', status: 500 });
    const create = () =>
      client.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'hello' }],
      });
    await expect(create()).rejects.toMatchObject({ status: 503 });
    await expect(create()).rejects.toMatchObject({ status: 500 });
    expect((await create()).choices[0]?.message.content).toBe('Hi there.');
  });

  it('answers a request as usual for a none fault, and the next fault meets the next request', async () => {
    sim.injectFault({ type: 'none' });
    sim.injectFault({ type: 'http', status: 500 });
    const create = () =>
      client.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'hello' }],
      });
    expect((await create()).choices[0]?.message.content).toBe('Hi there.');
    expect(sim.requests.at(-1)?.outcome).toBe('complete');
    await expect(create()).rejects.toMatchObject({ status: 500 });
  });

  it('destroys the socket after n chunks on reset', async () => {
    sim.setProfile('openai');
    sim.injectFault({ type: 'reset', afterChunks: 3 });
    const res = await postChat(sim, { model: 'm', messages: ask('long'), stream: true });
    const { text, failed } = await readUntilEnd(res);
    expect(failed).toBe(true);
    const parsed = parseSse(text);
    expect(parsed.chunks).toHaveLength(3);
    expect(parsed.done).toBe(false);
    expect(sim.requests.at(-1)).toMatchObject({ chunksWritten: 3, outcome: 'fault' });
  });

  it('sends an error event after n chunks and ends the stream', async () => {
    sim.injectFault({ type: 'error-event', afterChunks: 2 });
    const parsed = await streamChat(sim, { messages: ask('long') });
    expect(parsed.chunks).toHaveLength(2);
    expect(parsed.errors).toEqual([
      { error: { message: expect.any(String), type: 'server_error', code: 500 } },
    ]);
    expect(parsed.done).toBe(false);
  });

  it('makes the openai package throw on an error event', async () => {
    sim.injectFault({ type: 'error-event', afterChunks: 1 });
    const stream = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'long' }],
      stream: true,
    });
    await expect(
      (async () => {
        for await (const _chunk of stream) {
          // drain
        }
      })(),
    ).rejects.toThrow();
  });

  it('omits every finish_reason but still sends [DONE] on no-finish', async () => {
    sim.injectFault({ type: 'no-finish' });
    const parsed = await streamChat(sim, { messages: ask('single'), tools: TOOLS });
    expect(finishReasons(parsed.chunks)).toEqual([]);
    expect(assembleCalls(parsed.chunks)).toHaveLength(1);
    expect(parsed.done).toBe(true);
  });

  it('corrupts tool call arguments on invalid-args', async () => {
    sim.injectFault({ type: 'invalid-args' });
    const parsed = await streamChat(sim, { messages: ask('single'), tools: TOOLS });
    const args = assembleCalls(parsed.chunks)[0]?.arguments ?? '';
    expect(args.startsWith('{"location":"Oslo"')).toBe(true);
    expect(args.endsWith('}')).toBe(false);
    expect(() => JSON.parse(args)).toThrow();
  });

  it('stalls after n chunks and holds the socket until the client leaves', async () => {
    sim.injectFault({ type: 'stall', afterChunks: 2 });
    const controller = new AbortController();
    const res = await postChat(
      sim,
      { model: 'm', messages: ask('long'), stream: true },
      { signal: controller.signal },
    );
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    expect(await readChunks(reader, 2)).toHaveLength(2);
    let idle = false;
    const idlePromise = sim.whenIdle().then(() => {
      idle = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(idle).toBe(false);
    controller.abort();
    await reader.read().catch(() => undefined);
    await idlePromise;
    expect(sim.requests.at(-1)).toMatchObject({ chunksWritten: 2, outcome: 'fault' });
  });

  it('ends a stalled response when the simulator closes', async () => {
    const other = await startSimulator({ script: SCRIPT });
    other.injectFault({ type: 'stall', afterChunks: 1 });
    const res = await postChat(other, { model: 'm', messages: ask('long'), stream: true });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await readChunks(reader, 1);
    await other.close();
    await expect(reader.read()).rejects.toThrow();
  });

  it('ends the response without [DONE] on end-without-done', async () => {
    sim.injectFault({ type: 'end-without-done' });
    const whole = await streamChat(sim, { messages: ask('hello') });
    expect(textOf(whole.chunks)).toBe('Hi there.');
    expect(finishReasons(whole.chunks)).toEqual(['stop']);
    expect(whole.done).toBe(false);

    sim.injectFault({ type: 'end-without-done', afterChunks: 1 });
    const cut = await streamChat(sim, { messages: ask('hello') });
    expect(cut.chunks).toHaveLength(1);
    expect(cut.done).toBe(false);
  });

  it('splits a multi-byte character across two socket writes on split-utf8', async () => {
    sim.setProfile('openai');
    sim.injectFault({ type: 'split-utf8' });
    const buffers = await new Promise<Buffer[]>((resolve, reject) => {
      const url = new URL(`${sim.url}/chat/completions`);
      const req = request(
        url,
        { method: 'POST', headers: { 'content-type': 'application/json' } },
        (res) => {
          const got: Buffer[] = [];
          res.on('data', (b: Buffer) => got.push(b));
          res.on('end', () => resolve(got));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'm', stream: true, messages: ask('café') }));
    });
    // Some read ends right after a lead byte (11xxxxxx): the character is cut in two.
    expect(buffers.some((b) => (b[b.length - 1] ?? 0) >= 0xc0)).toBe(true);
    const parsed = parseSse(Buffer.concat(buffers).toString('utf8'));
    expect(textOf(parsed.chunks)).toBe('Un café, très bien ☕ 😀.');
  });

  it('lets the openai package decode a split multi-byte character', async () => {
    sim.injectFault({ type: 'split-utf8' });
    const stream = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'café' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('Un café, très bien ☕ 😀.');
  });
});

describe('the latency model', () => {
  it('waits at least ttftMs before the first chunk', async () => {
    const slow = await startSimulator({ latency: { ttftMs: 120 } });
    try {
      const start = performance.timeOrigin + performance.now();
      const { chunks } = await streamChat(slow, { messages: ask('hi') });
      expect((chunks[0]?.x_sim_sent_at ?? 0) - start).toBeGreaterThanOrEqual(120);
    } finally {
      await slow.close();
    }
  });

  it('paces chunks at tokensPerSec', async () => {
    sim.setLatency({ tokensPerSec: 200 });
    try {
      const { chunks } = await streamChat(sim, { messages: ask('hello') });
      const first = chunks[0]?.x_sim_sent_at ?? 0;
      const last = chunks.at(-1)?.x_sim_sent_at ?? 0;
      // 5 ms apart; the first chunk is due at once, so allow it a little lateness.
      expect(last - first).toBeGreaterThanOrEqual((chunks.length - 1) * 5 - 2);
    } finally {
      sim.setLatency({});
    }
  });

  it('gives the same ids and splits for the same seed', async () => {
    const a = await startSimulator({ script: SCRIPT, seed: 7, latency: { jitterMs: 2 } });
    const b = await startSimulator({ script: SCRIPT, seed: 7, latency: { jitterMs: 2 } });
    try {
      const strip = (chunks: ChunkLike[]) =>
        chunks.map(({ x_sim_sent_at: _sent, created: _created, ...rest }) => rest);
      const body = { messages: ask('parallel'), tools: TOOLS };
      const [ra, rb] = await Promise.all([streamChat(a, body), streamChat(b, body)]);
      expect(strip(ra.chunks)).toEqual(strip(rb.chunks));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('client disconnects', () => {
  it('stops writing when the client goes away and keeps serving', async () => {
    sim.setProfile('openai');
    sim.setLatency({ tokensPerSec: 200 });
    try {
      const controller = new AbortController();
      const res = await postChat(
        sim,
        { model: 'm', messages: ask('long'), stream: true },
        { signal: controller.signal },
      );
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      await readChunks(reader, 2);
      controller.abort();
      await reader.read().catch(() => undefined);
      await sim.whenIdle();
      const record = sim.requests.at(-1);
      expect(record?.outcome).toBe('client-closed');
      expect(record?.chunksWritten).toBeLessThan(100);
    } finally {
      sim.setLatency({});
    }
    const { chunks } = await streamChat(sim, { messages: ask('hello') });
    expect(textOf(chunks)).toBe('Hi there.');
  });
});
