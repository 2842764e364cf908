import { describe, expect, it } from 'vitest';
import {
  PromptToolCallFilter,
  TOOL_CALL_MARKER,
  TOOL_RESULT_MARKER,
  promptToolResultsMessage,
  promptToolsInstructions,
  type FilterOutput,
  type PromptCall,
} from '../../src/llm/prompt-tools.js';
import type { ToolDescription, ToolResult } from '../../src/tools/types.js';

/** Feeds the pieces in order, then ends: what the user would see and the calls found. */
function feed(pieces: readonly string[]): {
  text: string;
  calls: PromptCall[];
  outputs: FilterOutput[];
} {
  const f = new PromptToolCallFilter();
  const outputs = pieces.map((p) => f.push(p));
  outputs.push(f.end());
  return {
    text: outputs.map((o) => o.text).join(''),
    calls: outputs.flatMap((o) => o.calls),
    outputs,
  };
}

/** Every way to cut `s` in two, plus one character at a time. */
function splits(s: string): string[][] {
  const out: string[][] = [[s], [...s]];
  for (let i = 1; i < s.length; i++) out.push([s.slice(0, i), s.slice(i)]);
  return out;
}

/** Asserts the filter reads `s` the same however it is chunked, and returns that reading. */
function expectSplitInvariant(s: string): { text: string; calls: PromptCall[] } {
  const whole = feed([s]);
  for (const pieces of splits(s)) {
    const got = feed(pieces);
    expect({ pieces, text: got.text, calls: got.calls }).toEqual({
      pieces,
      text: whole.text,
      calls: whole.calls,
    });
  }
  return { text: whole.text, calls: whole.calls };
}

describe('PromptToolCallFilter', () => {
  it('reads the same text and calls wherever the marker is split across chunks', () => {
    const s =
      'Let me look that up.\n' +
      'TOOL_CALL: {"tool_name": "get_weather", "parameters": {"city": "Paris"}}\n' +
      'One moment.';
    const at = s.indexOf(TOOL_CALL_MARKER);
    // Every cut inside the marker in particular, as three pieces too.
    for (let i = at; i <= at + TOOL_CALL_MARKER.length; i++) {
      for (let j = i; j <= at + TOOL_CALL_MARKER.length; j++) {
        const got = feed([s.slice(0, i), s.slice(i, j), s.slice(j)]);
        expect(got.text).toBe('Let me look that up.\nOne moment.');
        expect(got.calls).toEqual([
          { ok: true, name: 'get_weather', arguments: '{"city":"Paris"}' },
        ]);
      }
    }
    expect(expectSplitInvariant(s)).toEqual({
      text: 'Let me look that up.\nOne moment.',
      calls: [{ ok: true, name: 'get_weather', arguments: '{"city":"Paris"}' }],
    });
  });

  it('reads JSON split mid-string with braces and escaped quotes inside strings', () => {
    const s =
      'TOOL_CALL: {"tool_name": "save_note", "parameters": ' +
      '{"title": "a {tricky} one", "body": "she said \\"}\\" and left \\\\", "tags": ["{", "}"]}}\n' +
      'Saved.';
    const got = expectSplitInvariant(s);
    expect(got.text).toBe('Saved.');
    expect(got.calls).toHaveLength(1);
    const call = got.calls[0]!;
    expect(call.ok).toBe(true);
    expect(call.ok && call.name).toBe('save_note');
    expect(call.ok && JSON.parse(call.arguments)).toEqual({
      title: 'a {tricky} one',
      body: 'she said "}" and left \\',
      tags: ['{', '}'],
    });
  });

  it('shows text before and after a call on the same line, without gluing the words', () => {
    const s = 'Sure, checking. TOOL_CALL: {"tool_name": "get_time", "parameters": {}} One moment.';
    expect(expectSplitInvariant(s)).toEqual({
      text: 'Sure, checking. One moment.',
      calls: [{ ok: true, name: 'get_time', arguments: '{}' }],
    });
  });

  it('shows the lines before and after a call and drops the call line itself', () => {
    for (const nl of ['\n', '\r\n']) {
      const s =
        `Let me check.${nl}` +
        `TOOL_CALL: {"tool_name": "get_time", "parameters": {"tz": "Asia/Tokyo"}}  ${nl}` +
        `It is late there.${nl}Anything else?`;
      expect(expectSplitInvariant(s)).toEqual({
        text: `Let me check.${nl}It is late there.${nl}Anything else?`,
        calls: [{ ok: true, name: 'get_time', arguments: '{"tz":"Asia/Tokyo"}' }],
      });
    }
  });

  it('finds several calls, one line each, in order', () => {
    const s =
      'Checking both cities.\n' +
      'TOOL_CALL: {"tool_name": "get_weather", "parameters": {"city": "Oslo"}}\n' +
      'TOOL_CALL: {"tool_name": "get_weather", "parameters": {"city": "Rome"}}\n' +
      'TOOL_CALL: {"tool_name": "get_time", "parameters": {}}';
    expect(expectSplitInvariant(s)).toEqual({
      text: 'Checking both cities.\n',
      calls: [
        { ok: true, name: 'get_weather', arguments: '{"city":"Oslo"}' },
        { ok: true, name: 'get_weather', arguments: '{"city":"Rome"}' },
        { ok: true, name: 'get_time', arguments: '{}' },
      ],
    });
  });

  it('gives back a marker prefix that turns out not to be a marker (TOOL_CA then T)', () => {
    const f = new PromptToolCallFilter();
    expect(f.push('The constant is TOOL_CA')).toEqual({ text: 'The constant is ', calls: [] });
    expect(f.push('T, not TOOL_')).toEqual({ text: 'TOOL_CAT, not ', calls: [] });
    expect(f.push('CALLS.')).toEqual({ text: 'TOOL_CALLS.', calls: [] });
    expect(f.end()).toEqual({ text: '', calls: [] });
  });

  it('reports malformed JSON as ok:false with a reason and hides it', () => {
    const json = '{"tool_name": "get_weather", "parameters": {city: "Paris",}}';
    const got = expectSplitInvariant(`Let me see.\nTOOL_CALL: ${json}\nHmm.`);
    expect(got.text).toBe('Let me see.\nHmm.');
    expect(got.calls).toEqual([
      { ok: false, raw: json, reason: expect.stringMatching(/^not valid JSON/) },
    ]);
  });

  it('reports a call without a tool_name as ok:false', () => {
    for (const json of [
      '{"parameters": {"city": "Paris"}}',
      '{"tool_name": "", "parameters": {}}',
      '{"tool_name": 7}',
    ]) {
      const got = feed([`TOOL_CALL: ${json}\n`]);
      expect(got.text).toBe('');
      expect(got.calls).toEqual([{ ok: false, raw: json, reason: 'no "tool_name" string' }]);
    }
  });

  it('accepts name and arguments as aliases of tool_name and parameters', () => {
    const got = feed(['TOOL_CALL: {"name": "get_weather", "arguments": {"city": "Kyiv"}}\n']);
    expect(got.calls).toEqual([{ ok: true, name: 'get_weather', arguments: '{"city":"Kyiv"}' }]);
  });

  it('accepts parameters given as a JSON string and passes it on as is', () => {
    const got = feed([
      'TOOL_CALL: {"tool_name": "get_weather", "parameters": "{\\"city\\": \\"Lima\\"}"}\n',
    ]);
    expect(got.calls).toEqual([{ ok: true, name: 'get_weather', arguments: '{"city": "Lima"}' }]);
  });

  it('reports a call still unfinished at end() as ok:false and shows none of it', () => {
    const f = new PromptToolCallFilter();
    expect(f.push('Looking.\nTOOL_CALL: {"tool_name": "get_weather", ')).toEqual({
      text: 'Looking.\n',
      calls: [],
    });
    expect(f.push('"parameters": {"city": "Pa')).toEqual({ text: '', calls: [] });
    expect(f.end()).toEqual({
      text: '',
      calls: [
        {
          ok: false,
          raw: '{"tool_name": "get_weather", "parameters": {"city": "Pa',
          reason: 'the JSON ended before it was complete',
        },
      ],
    });
  });

  it('reports a marker not followed by JSON as malformed and hides the rest of its line', () => {
    const s = 'Okay.\nTOOL_CALL: get_weather(city="Paris")\nDone.';
    expect(expectSplitInvariant(s)).toEqual({
      text: 'Okay.\nDone.',
      calls: [
        { ok: false, raw: 'get_weather(city="Paris")', reason: 'no JSON object after the marker' },
      ],
    });
  });

  it('passes text without the marker straight through, withholding only a possible marker prefix at a chunk end', () => {
    const f = new PromptToolCallFilter();
    const pieces = [
      'Hello',
      ' there! ',
      'It is ',
      'sunny in Tou',
      'louse; TO',
      'TAL: 21 °C.\n',
      'Bye 👋',
      ' T',
    ];
    const seen = pieces.map((p) => f.push(p));
    expect(seen).toEqual([
      { text: 'Hello', calls: [] },
      { text: ' there! ', calls: [] },
      { text: 'It is ', calls: [] },
      // "T" could begin TOOL_CALL:, so it waits for the next piece.
      { text: 'sunny in Tou', calls: [] },
      { text: 'louse; ', calls: [] },
      { text: 'TOTAL: 21 °C.\n', calls: [] },
      { text: 'Bye 👋', calls: [] },
      { text: ' ', calls: [] },
    ]);
    expect(f.end()).toEqual({ text: 'T', calls: [] });
  });
});

describe('promptToolsInstructions', () => {
  it('lists every tool with its JSON Schema and shows the TOOL_CALL line to write', () => {
    const tools: ToolDescription[] = [
      {
        name: 'get_weather',
        description: 'Current weather in a city.',
        parameters: {
          type: 'object',
          properties: { city: { type: 'string' } },
          required: ['city'],
        },
      },
      {
        name: 'get_time',
        description: 'The time now.',
        parameters: { type: 'object', properties: {} },
      },
    ];
    const text = promptToolsInstructions(tools);
    expect(text).toContain('- get_weather: Current weather in a city.');
    expect(text).toContain(JSON.stringify(tools[0]!.parameters));
    expect(text).toContain('- get_time: The time now.');
    expect(text).toContain(
      `${TOOL_CALL_MARKER} {"tool_name": "<name>", "parameters": {<arguments as JSON>}}`,
    );
    expect(text).toContain(TOOL_RESULT_MARKER);
  });
});

describe('promptToolResultsMessage', () => {
  it('writes one TOOL_RESULT line per result, in order', () => {
    const result = (name: string, outcome: ToolResult['outcome'], output: string): ToolResult => ({
      callId: `prompt_call_${name}`,
      name,
      outcome,
      output,
      durationMs: 3,
      handlerMs: 2,
      variant: 'default',
    });
    const message = promptToolResultsMessage([
      result('get_weather', 'ok', '{"temp_c": 21}'),
      result('get_time', 'unknown_tool', 'Error: no tool named get_time.\nPick another.'),
    ]);
    const lines = message.split('\n');
    expect(lines).toHaveLength(2);
    expect(lines.every((l) => l.startsWith(`${TOOL_RESULT_MARKER} `))).toBe(true);
    expect(lines.map((l) => JSON.parse(l.slice(TOOL_RESULT_MARKER.length + 1)))).toEqual([
      { tool_name: 'get_weather', outcome: 'ok', output: '{"temp_c": 21}' },
      {
        tool_name: 'get_time',
        outcome: 'unknown_tool',
        output: 'Error: no tool named get_time.\nPick another.',
      },
    ]);
  });
});

describe('PromptToolCallFilter with the JSON on the next line', () => {
  it('reads a call whose JSON starts on the line after the marker', () => {
    const f = new PromptToolCallFilter();
    const a = f.push('TOOL_CALL:\n{"tool_name": "x", "parameters": {"a": 1}}\nDone.');
    const b = f.end();
    expect(a.text + b.text).toBe('Done.');
    expect([...a.calls, ...b.calls]).toEqual([{ ok: true, name: 'x', arguments: '{"a":1}' }]);
  });
});
