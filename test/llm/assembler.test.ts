import { describe, expect, it } from 'vitest';
import {
  StreamAssembler,
  generateCallId,
  type AssembledCompletion,
  type AssemblerEvent,
} from '../../src/llm/assembler.js';
import type { ChunkLike, DeltaLike, UsageLike } from '../../src/llm/chunk.js';

// Every sequence below is written the way the named server puts it on the
// wire: full `chat.completion.chunk` objects, one per SSE `data:` line, with
// arguments cut where tokenizers cut them (mid-key, mid-string, mid-escape).

/** A server that writes chunks of one completion (same id/created/model on each). */
function server(model: string, id = 'chatcmpl-9Qx7TzKp2mLb') {
  const meta = { id, object: 'chat.completion.chunk', created: 1_718_000_000, model };
  return {
    /** One chunk with one choice. */
    chunk(delta: DeltaLike | null, finish_reason: string | null = null): ChunkLike {
      return { ...meta, choices: [{ index: 0, delta, finish_reason }] };
    },
    /** The `stream_options.include_usage` chunk: no choices, only usage. */
    usage(usage: UsageLike): ChunkLike {
      return { ...meta, choices: [], usage };
    },
  };
}

interface Run {
  /** Events per pushed chunk. */
  perChunk: AssemblerEvent[][];
  events: AssemblerEvent[];
  result: AssembledCompletion;
}

function run(chunks: readonly ChunkLike[]): Run {
  const asm = new StreamAssembler();
  const perChunk = chunks.map((c) => asm.push(c));
  const run: Run = { perChunk, events: perChunk.flat(), result: asm.finish() };
  expectCoherent(run);
  return run;
}

/** Events as short strings, to assert their order at a glance. */
function compact(events: readonly AssemblerEvent[]): string[] {
  return events.map((e) => {
    switch (e.type) {
      case 'text':
        return `text ${e.delta}`;
      case 'reasoning':
        return `reasoning ${e.delta}`;
      case 'tool_call.start':
        return `start#${e.slot} ${e.name}`;
      case 'tool_call.arguments':
        return `args#${e.slot} ${e.delta}`;
    }
  });
}

/**
 * What must hold for every stream: text and reasoning events add up to the
 * result; each named call is started exactly once, before its argument
 * deltas, with the id it ends up with; its argument deltas add up to its
 * final arguments; a call without a name never produced events.
 */
function expectCoherent({ events, result }: Run): void {
  const text = events.flatMap((e) => (e.type === 'text' ? [e.delta] : [])).join('');
  const reasoning = events.flatMap((e) => (e.type === 'reasoning' ? [e.delta] : [])).join('');
  expect(text).toBe(result.text);
  expect(reasoning).toBe(result.reasoning);
  expect(result.toolCalls.map((c) => c.slot)).toEqual(result.toolCalls.map((_, i) => i));
  for (const call of result.toolCalls) {
    const own = events.filter(
      (e) =>
        (e.type === 'tool_call.start' || e.type === 'tool_call.arguments') && e.slot === call.slot,
    );
    if (call.name === '') {
      expect(own).toEqual([]);
      continue;
    }
    const starts = own.filter((e) => e.type === 'tool_call.start');
    expect(starts).toEqual([
      { type: 'tool_call.start', slot: call.slot, id: call.id, name: call.name },
    ]);
    expect(own[0]).toBe(starts[0]);
    const args = own.flatMap((e) => (e.type === 'tool_call.arguments' ? [e] : []));
    for (const a of args) expect(a.id).toBe(call.id);
    expect(args.map((a) => a.delta).join('')).toBe(call.arguments);
  }
}

const GENERATED_ID = /^call_[0-9a-z]+$/;

describe('StreamAssembler — the reference OpenAI format', () => {
  it('assembles a single call whose arguments are split mid-key and mid-escape', () => {
    const s = server('gpt-4o-2024-08-06');
    const { events, perChunk, result } = run([
      s.chunk({
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            index: 0,
            id: 'call_Vp3bKxQm1rT8sN2d',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"loc' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: 'ation": "Mont' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: 'r\\u00' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: 'e9al"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events)).toEqual([
      'start#0 get_weather',
      'args#0 {"loc',
      'args#0 ation": "Mont',
      'args#0 r\\u00',
      'args#0 e9al"}',
    ]);
    expect(perChunk[0]).toEqual([
      { type: 'tool_call.start', slot: 0, id: 'call_Vp3bKxQm1rT8sN2d', name: 'get_weather' },
    ]);
    expect(result.toolCalls).toEqual([
      {
        slot: 0,
        id: 'call_Vp3bKxQm1rT8sN2d',
        name: 'get_weather',
        arguments: '{"location": "Montr\\u00e9al"}',
        legacy: false,
      },
    ]);
    expect(JSON.parse(result.toolCalls[0]!.arguments)).toEqual({ location: 'Montréal' });
    expect(result.text).toBe('');
    expect(result.finishReason).toBe('tool_calls');
    expect(result.chunks).toBe(6);
  });

  it('assembles parallel calls that each come with a new index and a new id', () => {
    const s = server('gpt-4o-mini-2024-07-18');
    const { events, result } = run([
      s.chunk({ role: 'assistant', content: null }),
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_a1B2c3D4e5F6g7H8',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: 'ty": "Par' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: 'is"}' } }] }),
      s.chunk({
        tool_calls: [
          {
            index: 1,
            id: 'call_Z9y8X7w6V5u4T3s2',
            type: 'function',
            function: { name: 'get_time', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: '{"time' } }] }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: 'zone": "Europe/' } }] }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: 'Paris"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events)).toEqual([
      'start#0 get_weather',
      'args#0 {"ci',
      'args#0 ty": "Par',
      'args#0 is"}',
      'start#1 get_time',
      'args#1 {"time',
      'args#1 zone": "Europe/',
      'args#1 Paris"}',
    ]);
    expect(result.toolCalls.map((c) => [c.id, c.name, JSON.parse(c.arguments)])).toEqual([
      ['call_a1B2c3D4e5F6g7H8', 'get_weather', { city: 'Paris' }],
      ['call_Z9y8X7w6V5u4T3s2', 'get_time', { timezone: 'Europe/Paris' }],
    ]);
    expect(result.finishReason).toBe('tool_calls');
  });

  it('streams a text reply that starts with role:"assistant" and content:""', () => {
    const s = server('gpt-4o-2024-08-06');
    const { events, perChunk, result } = run([
      s.chunk({ role: 'assistant', content: '', refusal: null } as DeltaLike),
      s.chunk({ content: 'Bon' }),
      s.chunk({ content: 'jour' }),
      s.chunk({ content: ', how can I help?' }),
      s.chunk({}, 'stop'),
    ]);

    expect(perChunk[0]).toEqual([]);
    expect(compact(events)).toEqual(['text Bon', 'text jour', 'text , how can I help?']);
    expect(result).toMatchObject({
      text: 'Bonjour, how can I help?',
      toolCalls: [],
      finishReason: 'stop',
    });
  });

  it('treats content:null as no text at all', () => {
    // DeepSeek on vLLM-Ascend repeats content:null on every tool-call delta.
    const s = server('DeepSeek-V4-Flash', 'chatcmpl-b1c2d3');
    const { events, result } = run([
      s.chunk({ role: 'assistant', content: null }),
      s.chunk({
        content: null,
        tool_calls: [
          {
            index: 0,
            id: 'call_xk2',
            type: 'function',
            function: { name: 'read_file', arguments: '' },
          },
        ],
      }),
      s.chunk({
        content: null,
        tool_calls: [{ index: 0, function: { arguments: '{"path": "/et' } }],
      }),
      s.chunk({ content: null, tool_calls: [{ index: 0, function: { arguments: 'c/hosts"}' } }] }),
      s.chunk({ content: null }, 'tool_calls'),
    ]);

    expect(events.filter((e) => e.type === 'text')).toEqual([]);
    expect(result.text).toBe('');
    expect(result.toolCalls.map((c) => c.arguments)).toEqual(['{"path": "/etc/hosts"}']);
  });

  it('takes the usage from the include_usage chunk that has choices:[]', () => {
    const s = server('gpt-4o-2024-08-06');
    // With include_usage, OpenAI puts usage:null on every chunk but the last.
    const withNullUsage = (c: ChunkLike): ChunkLike => ({ ...c, usage: null });
    const { perChunk, result } = run([
      withNullUsage(s.chunk({ role: 'assistant', content: '' })),
      withNullUsage(s.chunk({ content: 'It is 21 °C' })),
      withNullUsage(s.chunk({ content: ' in Paris.' })),
      withNullUsage(s.chunk({}, 'stop')),
      s.usage({ prompt_tokens: 87, completion_tokens: 9, total_tokens: 96 }),
    ]);

    expect(perChunk[4]).toEqual([]);
    expect(result.usage).toEqual({ prompt_tokens: 87, completion_tokens: 9, total_tokens: 96 });
    // The usage chunk has no choice, so it must not clear the finish reason.
    expect(result.finishReason).toBe('stop');
    expect(result.text).toBe('It is 21 °C in Paris.');
    expect(result.chunks).toBe(5);
  });
});

describe('StreamAssembler — the legacy function_call format', () => {
  it('assembles one legacy call with a generated call_ id and finish_reason "function_call"', () => {
    const s = server('gpt-3.5-turbo-0613');
    const { events, result } = run([
      s.chunk({
        role: 'assistant',
        content: null,
        function_call: { name: 'get_weather', arguments: '' },
      }),
      s.chunk({ function_call: { arguments: '{\n' } }),
      s.chunk({ function_call: { arguments: ' "' } }),
      s.chunk({ function_call: { arguments: 'loc' } }),
      s.chunk({ function_call: { arguments: 'ation": "Z' } }),
      s.chunk({ function_call: { arguments: '\\u00fc' } }),
      s.chunk({ function_call: { arguments: 'rich"\n}' } }),
      s.chunk({}, 'function_call'),
    ]);

    expect(compact(events)).toEqual([
      'start#0 get_weather',
      'args#0 {\n',
      'args#0  "',
      'args#0 loc',
      'args#0 ation": "Z',
      'args#0 \\u00fc',
      'args#0 rich"\n}',
    ]);
    expect(result.toolCalls).toHaveLength(1);
    const call = result.toolCalls[0]!;
    expect(call).toMatchObject({ slot: 0, name: 'get_weather', legacy: true });
    expect(call.id).toMatch(GENERATED_ID);
    expect(JSON.parse(call.arguments)).toEqual({ location: 'Zürich' });
    expect(result.finishReason).toBe('function_call');
  });
});

describe('StreamAssembler — quirks of real servers (docs/llm-streams.md)', () => {
  it('1. matches calls by id when tool_calls carry no index at all (Gemini)', () => {
    // Gemini's OpenAI endpoint: no `index`, calls mostly whole, sometimes
    // continued by an index-less, id-less delta; finish_reason "stop".
    const s = server('gemini-2.5-flash', 'Wm0BaPqXLJ3i-O4P');
    const { events, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [
          {
            id: 'function-call-1',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"location":' },
          },
        ],
      }),
      s.chunk({ role: 'assistant', tool_calls: [{ function: { arguments: '"Sydney"}' } }] }),
      s.chunk({
        role: 'assistant',
        tool_calls: [
          {
            id: 'function-call-2',
            type: 'function',
            function: { name: 'get_time', arguments: '{"tz":"Australia/Sydney"}' },
          },
        ],
      }),
      s.chunk({ role: 'assistant' }, 'stop'),
    ]);

    expect(compact(events)).toEqual([
      'start#0 get_weather',
      'args#0 {"location":',
      'args#0 "Sydney"}',
      'start#1 get_time',
      'args#1 {"tz":"Australia/Sydney"}',
    ]);
    expect(result.toolCalls.map((c) => [c.id, c.name, c.arguments])).toEqual([
      ['function-call-1', 'get_weather', '{"location":"Sydney"}'],
      ['function-call-2', 'get_time', '{"tz":"Australia/Sydney"}'],
    ]);
  });

  it('2. separates parallel calls that all say index 0 but carry distinct ids (Ollama, SGLang)', () => {
    const s = server('qwen2.5-coder:7b', 'chatcmpl-412');
    const { events, result } = run([
      s.chunk({
        role: 'assistant',
        content: '',
        tool_calls: [
          {
            index: 0,
            id: 'call_hq4l0w6c',
            type: 'function',
            function: { name: 'file_write', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"filePath": "hel' } }] }),
      s.chunk({
        tool_calls: [
          { index: 0, function: { arguments: 'lo.py", "content": "print(\\"hello\\")"}' } },
        ],
      }),
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_9x1mzn3a',
            type: 'function',
            function: { name: 'file_write', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"filePath": "wor' } }] }),
      s.chunk({
        tool_calls: [
          { index: 0, function: { arguments: 'ld.py", "content": "print(\\"world\\")"}' } },
        ],
      }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events).filter((e) => e.startsWith('start'))).toEqual([
      'start#0 file_write',
      'start#1 file_write',
    ]);
    expect(result.toolCalls.map((c) => [c.id, JSON.parse(c.arguments)])).toEqual([
      ['call_hq4l0w6c', { filePath: 'hello.py', content: 'print("hello")' }],
      ['call_9x1mzn3a', { filePath: 'world.py', content: 'print("world")' }],
    ]);
  });

  it('3. numbers calls by stream order when the first index is 1 and indexes are sparse (LiteLLM)', () => {
    // LiteLLM in front of Anthropic: the text block takes index 0, so the
    // first tool call is index 1; a later one skips to 3.
    const s = server('claude-sonnet-4-20250514', 'chatcmpl-3f2a');
    const { events, result } = run([
      s.chunk({ role: 'assistant', content: 'Let me check both.' }),
      s.chunk({
        tool_calls: [
          {
            index: 1,
            id: 'toolu_01A9qVXpJ6w',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: '{"city": "Os' } }] }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: 'lo"}' } }] }),
      s.chunk({
        tool_calls: [
          {
            index: 3,
            id: 'toolu_01Bx7Lm2Kc4',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 3, function: { arguments: '{"city": "Ber' } }] }),
      s.chunk({ tool_calls: [{ index: 3, function: { arguments: 'gen"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events)[0]).toBe('text Let me check both.');
    expect(result.toolCalls.map((c) => [c.slot, c.id, c.arguments])).toEqual([
      [0, 'toolu_01A9qVXpJ6w', '{"city": "Oslo"}'],
      [1, 'toolu_01Bx7Lm2Kc4', '{"city": "Bergen"}'],
    ]);
  });

  it('4. never concatenates an id that is repeated in full on every chunk (LiteLLM)', () => {
    const s = server('gpt-4o', 'chatcmpl-litellm-77');
    const id = 'call_8dWq2ZrT5nYx';
    const { events, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [
          { index: 0, id, type: 'function', function: { name: 'search_docs', arguments: '' } },
        ],
      }),
      s.chunk({
        tool_calls: [{ index: 0, id, type: 'function', function: { arguments: '{"que' } }],
      }),
      s.chunk({
        tool_calls: [{ index: 0, id, type: 'function', function: { arguments: 'ry": "refund' } }],
      }),
      s.chunk({
        tool_calls: [{ index: 0, id, type: 'function', function: { arguments: ' policy"}' } }],
      }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(events.filter((e) => e.type === 'tool_call.start')).toHaveLength(1);
    expect(result.toolCalls).toEqual([
      { slot: 0, id, name: 'search_docs', arguments: '{"query": "refund policy"}', legacy: false },
    ]);
  });

  it('5. keeps the id when continuation chunks send id:"" or id:null (vLLM)', () => {
    const s = server('meta-llama/Llama-3.1-8B-Instruct', 'chatcmpl-7c1e9f');
    const id = 'chatcmpl-tool-4b1f0c6a2d9e4e7f';
    const { events, result } = run([
      s.chunk({ role: 'assistant', content: '' }),
      s.chunk({
        tool_calls: [
          { index: 0, id, type: 'function', function: { name: 'get_weather', arguments: '' } },
        ],
      }),
      s.chunk({
        tool_calls: [
          { index: 0, id: '', type: null, function: { name: null, arguments: '{"city": "To' } },
        ],
      }),
      s.chunk({
        tool_calls: [
          { index: 0, id: null, type: null, function: { name: null, arguments: 'kyo"}' } },
        ],
      }),
      s.chunk({ content: '' }, 'tool_calls'),
    ]);

    expect(events.filter((e) => 'id' in e).every((e) => 'id' in e && e.id === id)).toBe(true);
    expect(result.toolCalls.map((c) => [c.id, c.arguments])).toEqual([[id, '{"city": "Tokyo"}']]);
  });

  it('6. generates a call_ id for each call when the server sends no id at all (vLLM)', () => {
    const s = server('mistralai/Mistral-7B-Instruct-v0.3', 'chatcmpl-0a9b');
    const { events, result } = run([
      s.chunk({ role: 'assistant', content: '' }),
      s.chunk({
        tool_calls: [
          { index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": "Lyon"}' } }] }),
      s.chunk({
        tool_calls: [{ index: 1, type: 'function', function: { name: 'get_time', arguments: '' } }],
      }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: '{"tz": "CET"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    const [first, second] = result.toolCalls;
    expect(first!.id).toMatch(GENERATED_ID);
    expect(second!.id).toMatch(GENERATED_ID);
    expect(first!.id).not.toBe(second!.id);
    // The id announced at start is the one the call keeps (checked for every event too).
    expect(events[0]).toEqual({
      type: 'tool_call.start',
      slot: 0,
      id: first!.id,
      name: 'get_weather',
    });
  });

  it('7. overwrites a name that is repeated on every chunk instead of appending it (vLLM)', () => {
    const s = server('Qwen/Qwen3-32B', 'chatcmpl-5e5e');
    const { events, result } = run([
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'chatcmpl-tool-91',
            type: 'function',
            function: { name: 'search_weather', arguments: '{"query": ' },
          },
        ],
      }),
      s.chunk({
        tool_calls: [
          { index: 0, function: { name: 'search_weather', arguments: '"weather tomorrow' } },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { name: 'search_weather', arguments: '"' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { name: 'search_weather', arguments: '}' } }] }),
      s.chunk(
        { tool_calls: [{ index: 0, function: { name: 'search_weather', arguments: '' } }] },
        'tool_calls',
      ),
    ]);

    expect(events.filter((e) => e.type === 'tool_call.start')).toHaveLength(1);
    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['search_weather', '{"query": "weather tomorrow"}'],
    ]);
  });

  it('8. keeps the name when a later chunk sends name:"" and starts the call only once a real name arrives (LM Studio)', () => {
    const s = server('qwen/qwen3-vl-30b', 'chatcmpl-lms-1');
    const { events, perChunk, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [
          { index: 0, id: '123456789', type: 'function', function: { name: '', arguments: '' } },
        ],
      }),
      s.chunk({
        tool_calls: [
          { index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } },
        ],
      }),
      s.chunk({
        tool_calls: [{ index: 0, type: 'function', function: { name: '', arguments: '{"city":' } }],
      }),
      s.chunk({
        tool_calls: [{ index: 0, type: 'function', function: { name: '', arguments: '"Lima"}' } }],
      }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(perChunk[0]).toEqual([]);
    expect(compact(events)).toEqual(['start#0 get_weather', 'args#0 {"city":', 'args#0 "Lima"}']);
    expect(result.toolCalls.map((c) => [c.id, c.name])).toEqual([['123456789', 'get_weather']]);
  });

  it('9. holds arguments that arrive before the name and sends them with the start (vercel/ai)', () => {
    const s = server('command-a-03-2025', 'chatcmpl-c0de');
    const { perChunk, events, result } = run([
      s.chunk({ role: 'assistant', content: '' }),
      s.chunk({
        tool_calls: [
          { index: 0, id: 'call_k8', type: 'function', function: { arguments: '{"ticker": "' } },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: 'NVDA", ' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { name: 'get_quote' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '"currency": "EUR"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(perChunk[1]).toEqual([]);
    expect(perChunk[2]).toEqual([]);
    expect(compact(events)).toEqual([
      'start#0 get_quote',
      'args#0 {"ticker": "NVDA", ',
      'args#0 "currency": "EUR"}',
    ]);
    expect(JSON.parse(result.toolCalls[0]!.arguments)).toEqual({ ticker: 'NVDA', currency: 'EUR' });
  });

  it('10. ignores a missing type and a type that only arrives after the arguments (vLLM)', () => {
    const s = server('Qwen/Qwen2.5-72B-Instruct', 'chatcmpl-ty9');
    const { perChunk, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [
          { index: 0, id: 'chatcmpl-tool-e1', function: { name: 'set_timer', arguments: '' } },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"minutes": ' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '12}' } }] }),
      s.chunk({ tool_calls: [{ index: 0, type: 'function' }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(perChunk[3]).toEqual([]);
    expect(result.toolCalls).toEqual([
      {
        slot: 0,
        id: 'chatcmpl-tool-e1',
        name: 'set_timer',
        arguments: '{"minutes": 12}',
        legacy: false,
      },
    ]);
  });

  it('11. assembles a whole call that arrives in one chunk (Groq)', () => {
    const s = server('llama-3.3-70b-versatile', 'chatcmpl-51f3e2b1');
    const whole = s.chunk({
      tool_calls: [
        {
          id: 'call_1yz4',
          type: 'function',
          function: {
            name: 'get_weather',
            arguments: '{"location":"Reykjav\\u00edk","unit":"celsius"}',
          },
          index: 0,
        },
      ],
    });
    // Groq reports usage in `x_groq.usage` on the last chunk.
    const last = Object.assign(s.chunk({}, 'tool_calls'), {
      x_groq: {
        id: 'req_01j',
        usage: { prompt_tokens: 212, completion_tokens: 28, total_tokens: 240 },
      },
    });
    const { perChunk, result } = run([s.chunk({ role: 'assistant', content: null }), whole, last]);

    expect(perChunk[1]).toEqual([
      { type: 'tool_call.start', slot: 0, id: 'call_1yz4', name: 'get_weather' },
      {
        type: 'tool_call.arguments',
        slot: 0,
        id: 'call_1yz4',
        delta: '{"location":"Reykjav\\u00edk","unit":"celsius"}',
      },
    ]);
    expect(JSON.parse(result.toolCalls[0]!.arguments)).toEqual({
      location: 'Reykjavík',
      unit: 'celsius',
    });
    expect(result.usage).toEqual({ prompt_tokens: 212, completion_tokens: 28, total_tokens: 240 });
  });

  it('12. applies the arguments remainder in the final chunk before its finish_reason', () => {
    const s = server('gpt-4.1-2025-04-14');
    const { perChunk, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [
          {
            index: 0,
            id: 'call_fin',
            type: 'function',
            function: { name: 'book_table', arguments: '' },
          },
        ],
      }),
      s.chunk({
        tool_calls: [{ index: 0, function: { arguments: '{"people": 4, "time": "19:' } }],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '30"}' } }] }, 'tool_calls'),
    ]);

    expect(perChunk[2]).toEqual([
      { type: 'tool_call.arguments', slot: 0, id: 'call_fin', delta: '30"}' },
    ]);
    expect(result.toolCalls[0]!.arguments).toBe('{"people": 4, "time": "19:30"}');
    expect(result.finishReason).toBe('tool_calls');
  });

  it('13. ignores a trailing arguments:"" delta after the arguments looked complete (vercel/ai)', () => {
    const s = server('gpt-4o-2024-08-06');
    const { perChunk, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [
          {
            index: 0,
            id: 'call_tr',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": "Quito"}' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(perChunk[2]).toEqual([]);
    expect(result.toolCalls).toHaveLength(1);
    expect(result.toolCalls[0]!.arguments).toBe('{"city": "Quito"}');
  });

  it('14. starts no-parameter calls whose arguments are "", null or absent, and keeps them empty', () => {
    // vLLM sends "" or null for a tool without parameters; the executor reads
    // empty arguments as {} — the assembler must not invent anything.
    const s = server('ibm-granite/granite-3.3-8b-instruct', 'chatcmpl-np');
    const { events, result } = run([
      s.chunk({ role: 'assistant', content: '' }),
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_n1',
            type: 'function',
            function: { name: 'get_time', arguments: '' },
          },
        ],
      }),
      s.chunk({
        tool_calls: [
          {
            index: 1,
            id: 'call_n2',
            type: 'function',
            function: { name: 'get_date', arguments: null },
          },
        ],
      }),
      s.chunk({
        tool_calls: [
          { index: 2, id: 'call_n3', type: 'function', function: { name: 'get_location' } },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 2, function: { arguments: null } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events)).toEqual([
      'start#0 get_time',
      'start#1 get_date',
      'start#2 get_location',
    ]);
    expect(result.toolCalls.map((c) => [c.id, c.name, c.arguments])).toEqual([
      ['call_n1', 'get_time', ''],
      ['call_n2', 'get_date', ''],
      ['call_n3', 'get_location', ''],
    ]);
  });

  it('15. reports calls that end with finish_reason "stop" (named tool_choice, Gemini)', () => {
    // OpenAI with tool_choice {type:"function", ...} ends with "stop", not "tool_calls".
    const s = server('gpt-4o-2024-08-06');
    const { result } = run([
      s.chunk({
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            index: 0,
            id: 'call_st',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":"Nai' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: 'robi"}' } }] }),
      s.chunk({}, 'stop'),
    ]);

    expect(result.finishReason).toBe('stop');
    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['get_weather', '{"city":"Nairobi"}'],
    ]);
  });

  it('16. reports a partial call cut off by "length" or "content_filter" with that finish reason', () => {
    for (const reason of ['length', 'content_filter']) {
      const s = server('gpt-4o-mini-2024-07-18');
      const { result } = run([
        s.chunk({
          role: 'assistant',
          tool_calls: [
            {
              index: 0,
              id: 'call_cut',
              type: 'function',
              function: { name: 'write_note', arguments: '' },
            },
          ],
        }),
        s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"title": "Shop' } }] }),
        s.chunk(
          { tool_calls: [{ index: 0, function: { arguments: 'ping", "body": "eggs, mi' } }] },
          reason,
        ),
      ]);

      expect(result.finishReason).toBe(reason);
      expect(result.toolCalls.map((c) => c.arguments)).toEqual([
        '{"title": "Shopping", "body": "eggs, mi',
      ]);
    }
  });

  it('17. assembles calls when the stream ends with no finish_reason at all', () => {
    const s = server('llama3.1:8b', 'chatcmpl-nofin');
    const { result } = run([
      s.chunk({ role: 'assistant', content: '' }),
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_nf',
            type: 'function',
            function: { name: 'lights_off', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"room": "kitchen"}' } }] }),
      // [DONE] follows directly: no chunk ever carried a finish_reason.
    ]);

    expect(result.finishReason).toBeNull();
    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['lights_off', '{"room": "kitchen"}'],
    ]);
  });

  it('18. streams text before, between and after tool calls in stream order (vLLM)', () => {
    const s = server('Qwen/Qwen3-30B-A3B', 'chatcmpl-mix');
    const { events, result } = run([
      s.chunk({ role: 'assistant', content: '' }),
      s.chunk({ content: 'Checking Rome' }),
      s.chunk({ content: ' first.' }),
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_r',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": "Rome"}' } }] }),
      s.chunk({ content: '\nNow Milan.' }),
      s.chunk({
        tool_calls: [
          {
            index: 1,
            id: 'call_m',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: '{"city": "Milan"}' } }] }),
      s.chunk({ content: '\nDone.' }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events)).toEqual([
      'text Checking Rome',
      'text  first.',
      'start#0 get_weather',
      'args#0 {"city": "Rome"}',
      'text \nNow Milan.',
      'start#1 get_weather',
      'args#1 {"city": "Milan"}',
      'text \nDone.',
    ]);
    expect(result.text).toBe('Checking Rome first.\nNow Milan.\nDone.');
    expect(result.toolCalls.map((c) => c.id)).toEqual(['call_r', 'call_m']);
  });

  it('19. keeps delta.reasoning_content and delta.reasoning apart from the text', () => {
    // DeepSeek/vLLM use reasoning_content, OpenRouter/Ollama use reasoning;
    // some vLLM versions fill in both with the same delta.
    const variants: Array<(r: string) => DeltaLike> = [
      (r) => ({ reasoning_content: r, content: null }),
      (r) => ({ reasoning: r, content: null }),
      (r) => ({ reasoning_content: r, reasoning: r, content: null }),
    ];
    for (const reasoningDelta of variants) {
      const s = server('deepseek-reasoner', 'chatcmpl-r1');
      const { events, result } = run([
        s.chunk({ role: 'assistant', content: '' }),
        s.chunk(reasoningDelta('The user wants')),
        s.chunk(reasoningDelta(' a greeting.')),
        s.chunk({ content: 'Hello!', reasoning_content: null }),
        s.chunk({}, 'stop'),
      ]);

      expect(compact(events)).toEqual([
        'reasoning The user wants',
        'reasoning  a greeting.',
        'text Hello!',
      ]);
      expect(result.text).toBe('Hello!');
      expect(result.reasoning).toBe('The user wants a greeting.');
    }
  });

  it('20. keeps \\uXXXX escapes split mid-escape and non-ASCII text intact', () => {
    const s = server('mistral-large-latest', 'cmpl-e5cd');
    const { result } = run([
      s.chunk({ role: 'assistant', content: 'Ça ' }),
      s.chunk({ content: 'pleut à Köln ' }),
      // A server that cuts between the two UTF-16 halves of 🌧 (U+1F327).
      s.chunk({ content: '\ud83c' }),
      s.chunk({ content: '\udf27 ' }),
      s.chunk({ content: '雨。' }),
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_u',
            type: 'function',
            function: { name: 'save_note', arguments: '{"text": "K\\u00f' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '6ln \\ud83c' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '\\udf27", "lang": "日本' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '語"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(result.text).toBe('Ça pleut à Köln 🌧 雨。');
    expect(JSON.parse(result.toolCalls[0]!.arguments)).toEqual({ text: 'Köln 🌧', lang: '日本語' });
  });

  it('21. keeps the last usage when every chunk carries running usage (vLLM continuous usage stats)', () => {
    const s = server('meta-llama/Llama-3.1-8B-Instruct', 'chatcmpl-cu');
    const withUsage = (c: ChunkLike, completion: number): ChunkLike => ({
      ...c,
      usage: { prompt_tokens: 40, completion_tokens: completion, total_tokens: 40 + completion },
    });
    const { result } = run([
      withUsage(s.chunk({ role: 'assistant', content: '' }), 0),
      withUsage(s.chunk({ content: 'Sure' }), 1),
      withUsage(s.chunk({ content: ', on it.' }), 4),
      withUsage(s.chunk({ content: '' }, 'stop'), 5),
      s.usage({ prompt_tokens: 40, completion_tokens: 5, total_tokens: 45 }),
    ]);

    expect(result.usage).toEqual({ prompt_tokens: 40, completion_tokens: 5, total_tokens: 45 });
    expect(result.text).toBe('Sure, on it.');
  });

  it('22. keeps arguments that are not valid JSON, or not an object, exactly as streamed', () => {
    const s = server('hermes-3-llama-3.1-8b', 'chatcmpl-bad');
    const { result } = run([
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_b1',
            type: 'function',
            function: { name: 'get_weather', arguments: "{'city': " },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: "'Paris',}" } }] }),
      s.chunk({
        tool_calls: [
          {
            index: 1,
            id: 'call_b2',
            type: 'function',
            function: { name: 'get_weather', arguments: '["Pa' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 1, function: { arguments: 'ris"]' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(result.toolCalls.map((c) => c.arguments)).toEqual(["{'city': 'Paris',}", '["Paris"]']);
  });

  it('23. keeps a tool name the character does not have, as sent', () => {
    const s = server('gpt-4o-2024-08-06');
    const { events, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [
          {
            index: 0,
            id: 'call_unk',
            type: 'function',
            function: { name: 'functions.launch_rocket', arguments: '' },
          },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"target": "moon"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(events[0]).toEqual({
      type: 'tool_call.start',
      slot: 0,
      id: 'call_unk',
      name: 'functions.launch_rocket',
    });
    expect(result.toolCalls[0]!.name).toBe('functions.launch_rocket');
  });

  it('24. assembles every round of a model that calls tools forever from a clean slate with fresh ids', () => {
    // The turn runner makes one assembler per round and stops at its round
    // limit; each round must stand alone and ids must never repeat, or the
    // replayed history would hold two tool results for one tool_call_id.
    const ids = new Set<string>();
    for (let round = 0; round < 12; round++) {
      const s = server('mistralai/Mistral-7B-Instruct-v0.3', `chatcmpl-round${round}`);
      const { result } = run([
        s.chunk({
          tool_calls: [{ index: 0, type: 'function', function: { name: 'search', arguments: '' } }],
        }),
        s.chunk({ tool_calls: [{ index: 0, function: { arguments: `{"page": ${round}}` } }] }),
        s.chunk({}, 'tool_calls'),
      ]);
      expect(result.toolCalls).toHaveLength(1);
      expect(result.toolCalls[0]!.arguments).toBe(`{"page": ${round}}`);
      expect(result.chunks).toBe(3);
      ids.add(result.toolCalls[0]!.id);
    }
    expect(ids.size).toBe(12);
    const many = new Set(Array.from({ length: 2000 }, () => generateCallId()));
    expect(many.size).toBe(2000);
  });
});

describe('StreamAssembler — adversarial streams', () => {
  it('separates two parallel calls with no id and no index by their different names', () => {
    const s = server('gemma3:27b', 'chatcmpl-noid');
    const { events, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: '' } }],
      }),
      s.chunk({ tool_calls: [{ function: { arguments: '{"city": ' } }] }),
      s.chunk({ tool_calls: [{ function: { arguments: '"Cairo"}' } }] }),
      s.chunk({
        tool_calls: [{ type: 'function', function: { name: 'get_time', arguments: '' } }],
      }),
      s.chunk({ tool_calls: [{ function: { arguments: '{"tz": "Africa/Cairo"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events)).toEqual([
      'start#0 get_weather',
      'args#0 {"city": ',
      'args#0 "Cairo"}',
      'start#1 get_time',
      'args#1 {"tz": "Africa/Cairo"}',
    ]);
    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['get_weather', '{"city": "Cairo"}'],
      ['get_time', '{"tz": "Africa/Cairo"}'],
    ]);
    expect(result.toolCalls[0]!.id).not.toBe(result.toolCalls[1]!.id);
  });

  it('separates same-name parallel calls without ids when a new { follows complete arguments', () => {
    // Each call opens with a bare {name, arguments:""} delta, as OpenAI-style
    // servers do; the second header alone could be a repeated name, so only
    // the `{` after it shows a new call began.
    const s = server('gemma3:27b', 'chatcmpl-same');
    const { events, result } = run([
      s.chunk({
        role: 'assistant',
        tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: '' } }],
      }),
      s.chunk({ tool_calls: [{ function: { arguments: '{"city": "Pa' } }] }),
      s.chunk({ tool_calls: [{ function: { arguments: 'ris"}' } }] }),
      s.chunk({
        tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: '' } }],
      }),
      s.chunk({ tool_calls: [{ function: { arguments: '{"city": "Li' } }] }),
      s.chunk({ tool_calls: [{ function: { arguments: 'sbon"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);

    expect(compact(events)).toEqual([
      'start#0 get_weather',
      'args#0 {"city": "Pa',
      'args#0 ris"}',
      'start#1 get_weather',
      'args#1 {"city": "Li',
      'args#1 sbon"}',
    ]);
    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['get_weather', '{"city": "Paris"}'],
      ['get_weather', '{"city": "Lisbon"}'],
    ]);
    expect(result.toolCalls[0]!.id).not.toBe(result.toolCalls[1]!.id);
  });

  it('does not open a phantom call for a bare repeated name after complete arguments', () => {
    const s = server('Qwen/Qwen3-8B', 'chatcmpl-rep');
    const { result } = run([
      s.chunk({
        tool_calls: [
          { type: 'function', function: { name: 'get_weather', arguments: '{"city": ' } },
        ],
      }),
      s.chunk({ tool_calls: [{ function: { name: 'get_weather', arguments: '"Rome"}' } }] }),
      s.chunk({ tool_calls: [{ function: { name: 'get_weather', arguments: '' } }] }, 'tool_calls'),
    ]);

    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['get_weather', '{"city": "Rome"}'],
    ]);
  });

  it('survives null and undefined in every optional field', () => {
    const nulls = {
      id: 'chatcmpl-nul',
      object: 'chat.completion.chunk',
      created: 1_718_000_000,
      model: 'local-model',
      usage: null,
    };
    const { events, result } = run([
      {
        ...nulls,
        choices: [
          {
            index: 0,
            delta: {
              role: null,
              content: null,
              reasoning_content: null,
              reasoning: null,
              tool_calls: null,
              function_call: null,
            },
            finish_reason: null,
          },
        ],
      },
      {
        ...nulls,
        choices: [
          { index: 0, delta: { role: 'assistant', content: 'Hi' }, finish_reason: undefined },
        ],
      },
      {
        ...nulls,
        choices: [
          {
            index: 0,
            delta: {
              content: null,
              tool_calls: [
                {
                  index: null,
                  id: 'call_nul',
                  type: null,
                  function: { name: 'ping', arguments: null },
                },
              ],
            },
            finish_reason: null,
          },
        ],
      },
      {
        ...nulls,
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index: null, id: null, type: null, function: null }] },
          },
        ],
      },
      {
        ...nulls,
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [
                { index: undefined, id: undefined, function: { name: null, arguments: '{}' } },
              ],
            },
          },
        ],
      },
      { ...nulls, choices: [{ delta: {}, finish_reason: 'tool_calls' }] },
      { ...nulls, choices: undefined },
    ]);

    expect(compact(events)).toEqual(['text Hi', 'start#0 ping', 'args#0 {}']);
    expect(result).toMatchObject({
      text: 'Hi',
      reasoning: '',
      toolCalls: [{ slot: 0, id: 'call_nul', name: 'ping', arguments: '{}', legacy: false }],
      finishReason: 'tool_calls',
      usage: null,
      chunks: 7,
    });
  });

  it('ignores a chunk with choices:[] at the start of the stream (Azure prompt filter results)', () => {
    const s = server('gpt-4o', 'chatcmpl-az');
    const filterResults = {
      id: '',
      object: '',
      created: 0,
      model: '',
      choices: [],
      prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }],
    };
    const asm = new StreamAssembler();
    expect(asm.push(filterResults)).toEqual([]);
    expect(asm.push(s.chunk({ role: 'assistant', content: '' }))).toEqual([]);
    expect(asm.push(s.chunk({ content: 'Hello.' }))).toEqual([{ type: 'text', delta: 'Hello.' }]);
    expect(asm.push(s.chunk({}, 'stop'))).toEqual([]);
    expect(asm.finish()).toMatchObject({
      text: 'Hello.',
      toolCalls: [],
      finishReason: 'stop',
      chunks: 4,
    });
  });

  it('ignores an empty delta and delta:null between real deltas', () => {
    const s = server('llama.cpp', 'chatcmpl-emp');
    const { perChunk, result } = run([
      s.chunk({ role: 'assistant', content: null }),
      s.chunk({}),
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_e',
            type: 'function',
            function: { name: 'roll_dice', arguments: '{"sides"' },
          },
        ],
      }),
      s.chunk(null),
      s.chunk({}),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: ': 20}' } }] }),
      s.chunk(null, 'tool_calls'),
    ]);

    expect(perChunk[1]).toEqual([]);
    expect(perChunk[3]).toEqual([]);
    expect(perChunk[4]).toEqual([]);
    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['roll_dice', '{"sides": 20}'],
    ]);
    expect(result.finishReason).toBe('tool_calls');
  });

  it('skips tool_calls entries that are null', () => {
    const s = server('some-proxy-model', 'chatcmpl-nulls');
    const { result } = run([
      s.chunk({
        tool_calls: [
          null as unknown as NonNullable<DeltaLike['tool_calls']>[number],
          {
            index: 0,
            id: 'call_nn',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"city":' },
          },
        ],
      }),
      s.chunk({ tool_calls: [null as unknown as NonNullable<DeltaLike['tool_calls']>[number]] }),
      s.chunk({ tool_calls: [] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: ' "Doha"}' } }] }, 'tool_calls'),
    ]);

    expect(result.toolCalls).toEqual([
      { slot: 0, id: 'call_nn', name: 'get_weather', arguments: '{"city": "Doha"}', legacy: false },
    ]);
  });

  it('takes arguments sent as a JSON object as the arguments (proxies that parse them)', () => {
    const s = server('proxy-model', 'chatcmpl-obj');
    const { result } = run([
      s.chunk({
        tool_calls: [
          {
            index: 0,
            id: 'call_obj',
            type: 'function',
            function: { name: 'get_weather', arguments: { city: 'Rome' } },
          },
        ],
      }),
      s.chunk({}, 'tool_calls'),
    ]);
    expect(result.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ['get_weather', { city: 'Rome' }],
    ]);
  });

  it('takes a whole non-streamed message whose arguments are an object', () => {
    const { result } = run([
      {
        choices: [
          {
            index: 0,
            delta: {
              role: 'assistant',
              function_call: { name: 'lookup', arguments: { q: 'fox', n: 2 } },
            },
            finish_reason: 'function_call',
          },
        ],
      },
    ]);
    expect(JSON.parse(result.toolCalls[0]!.arguments)).toEqual({ q: 'fox', n: 2 });
  });

  it('separates calls that all say index 0 and carry no ids (Gemini proxies)', () => {
    const s = server('gemini-2.5-flash', 'chatcmpl-gem');
    const { events, result } = run([
      s.chunk({
        tool_calls: [{ index: 0, function: { name: 'say', arguments: '{"text":"one"}' } }],
      }),
      s.chunk({
        tool_calls: [{ index: 0, function: { name: 'say', arguments: '{"text":"two"}' } }],
      }),
      s.chunk({}, 'tool_calls'),
    ]);
    expect(compact(events).filter((e) => e.startsWith('start'))).toEqual([
      'start#0 say',
      'start#1 say',
    ]);
    expect(result.toolCalls.map((c) => c.arguments)).toEqual(['{"text":"one"}', '{"text":"two"}']);
    expect(new Set(result.toolCalls.map((c) => c.id)).size).toBe(2);
  });

  it('separates index-0 calls whose name comes in a delta of its own before the arguments', () => {
    const s = server('gemini-2.5-flash', 'chatcmpl-gem2');
    const { result } = run([
      s.chunk({ tool_calls: [{ index: 0, function: { name: 'say' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"text":' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '"one"}' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { name: 'say' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { arguments: '{"text":"two"}' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);
    expect(result.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['say', '{"text":"one"}'],
      ['say', '{"text":"two"}'],
    ]);
  });

  it('keeps a call whole when vLLM repeats its name on every index-0 chunk', () => {
    const s = server('Qwen/Qwen3-8B', 'chatcmpl-vllm');
    const { result } = run([
      s.chunk({
        tool_calls: [{ index: 0, id: 'call_v', function: { name: 'say', arguments: '{"te' } }],
      }),
      s.chunk({ tool_calls: [{ index: 0, function: { name: 'say', arguments: 'xt":"hi"}' } }] }),
      s.chunk({ tool_calls: [{ index: 0, function: { name: 'say', arguments: '' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);
    expect(result.toolCalls.map((c) => [c.id, c.arguments])).toEqual([['call_v', '{"text":"hi"}']]);
  });

  it('separates two calls that share one id at different indexes (MiMo, Kimi, llama.cpp)', () => {
    const s = server('kimi-k2', 'chatcmpl-kimi');
    const { result } = run([
      s.chunk({
        tool_calls: [
          { index: 0, id: 'call_same', function: { name: 'say', arguments: '{"text":"one"}' } },
        ],
      }),
      s.chunk({
        tool_calls: [
          { index: 1, id: 'call_same', function: { name: 'say', arguments: '{"text":"two"}' } },
        ],
      }),
      s.chunk({ tool_calls: [{ index: 1, id: 'call_same', function: { arguments: '' } }] }),
      s.chunk({}, 'tool_calls'),
    ]);
    expect(result.toolCalls.map((c) => c.arguments)).toEqual(['{"text":"one"}', '{"text":"two"}']);
    // History needs one id per call: the second gets a fresh one.
    expect(result.toolCalls[0]!.id).toBe('call_same');
    expect(result.toolCalls[1]!.id).not.toBe('call_same');
  });

  it('gives a fresh id to a call whose id the conversation already used', () => {
    const s = server('llama.cpp', 'chatcmpl-llama');
    const asm = new StreamAssembler({ idTaken: (id) => id === 'call_constant' });
    const events = asm.push(
      s.chunk({
        tool_calls: [
          { index: 0, id: 'call_constant', function: { name: 'say', arguments: '{"text":"x"}' } },
        ],
      }),
    );
    const { toolCalls } = asm.finish();
    expect(toolCalls[0]!.id).not.toBe('call_constant');
    expect(events[0]).toMatchObject({ type: 'tool_call.start', id: toolCalls[0]!.id });
  });
});
