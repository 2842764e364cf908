import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import type { ChatMessage } from '../../src/llm/chunk.js';
import {
  PROFILE_NAMES,
  conversationFacts,
  corruptArguments,
  createRng,
  parseSimScript,
  planReply,
  splitFragments,
  splitText,
} from '../../src/testing/simulator/index.js';

describe('splitText', () => {
  it('splits into word pieces without losing a byte, multi-byte characters included', () => {
    const text = '  Un café ☕, très   bien 😀!\nextraordinarily long 👩‍👩‍👧 words ';
    const pieces = splitText(text);
    expect(pieces.join('')).toBe(text);
    expect(pieces.length).toBeGreaterThan(8);
    // No piece starts or ends inside a surrogate pair: each is valid UTF-8 on its own.
    for (const p of pieces) expect(Buffer.from(p, 'utf8').toString('utf8')).toBe(p);
  });
});

describe('splitFragments', () => {
  it('cuts arguments into 1 to 8 code points, the same way for the same seed', () => {
    const args = '{"location":"Paris \\u00e9","days":[1,2,3]}';
    const a = splitFragments(args, createRng(3));
    expect(a.join('')).toBe(args);
    for (const f of a) expect(Array.from(f).length).toBeGreaterThanOrEqual(1);
    for (const f of a) expect(Array.from(f).length).toBeLessThanOrEqual(8);
    expect(splitFragments(args, createRng(3))).toEqual(a);
  });
});

describe('corruptArguments', () => {
  it('drops the closing brace and adds a truncated value', () => {
    expect(corruptArguments('{"location":"Paris"}')).toBe('{"location":"Paris", "location": "Par');
    expect(corruptArguments('{}')).toBe('{"location": "Par');
  });
});

describe('planReply', () => {
  it.each(PROFILE_NAMES)('keeps given arguments strings as they are under %s', (profile) => {
    const plan = planReply(
      { parts: [{ toolCall: { name: 'f', arguments: '{ "a" : 1 }' } }] },
      { profile, mode: 'tools', rng: createRng(1) },
    );
    const step = plan.steps[0];
    expect(step?.kind === 'call' && step.call.arguments).toBe('{ "a" : 1 }');
  });

  it('keeps only the first call in legacy functions mode', () => {
    const plan = planReply(
      {
        parts: [
          { toolCall: { name: 'f', arguments: {} } },
          { toolCall: { name: 'g', arguments: {} } },
        ],
      },
      { profile: 'openai', mode: 'functions', rng: createRng(1) },
    );
    expect(plan.steps.map((s) => s.kind)).toEqual(['call']);
    expect(plan.finishReason).toBe('function_call');
  });

  it('lets the script override the finish reason', () => {
    const plan = planReply(
      { parts: [{ text: 'cut' }], finishReason: 'length' },
      { profile: 'ollama', mode: 'none', rng: createRng(1) },
    );
    expect(plan.finishReason).toBe('length');
  });
});

describe('conversationFacts', () => {
  it('finds the latest real user message, the round and the tool results after it', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'old question' },
      { role: 'assistant', content: 'old answer' },
      { role: 'user', content: 'new question' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'c', content: 'result one' },
      { role: 'assistant', content: 'CALL g' },
      { role: 'user', content: 'TOOL_RESULT result two' },
    ];
    expect(conversationFacts(messages)).toEqual({
      user: 'new question',
      round: 2,
      toolResults: ['result one', 'TOOL_RESULT result two'],
      system: ['sys'],
      background: false,
    });
  });

  it('reads a background tool result as a tool result, not as the user, and says when it is last', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'find flights' },
      { role: 'assistant', content: 'Searching.' },
      {
        role: 'user',
        content:
          '[Background tool result] search (call c1) finished:\n{"flight":"TP 1351"}\n(Not from the user.)',
      },
    ];
    expect(conversationFacts(messages)).toMatchObject({
      user: 'find flights',
      round: 1,
      toolResults: ['{"flight":"TP 1351"}'],
      background: true,
    });
  });
});

describe('parseSimScript', () => {
  it('accepts the example script', async () => {
    const file = new URL('../../src/testing/scripts/example.json', import.meta.url);
    const script = parseSimScript(JSON.parse(await readFile(file, 'utf8')), 'example.json');
    expect(script.rules.length).toBeGreaterThan(0);
  });

  it('names the source and the bad field in its error', () => {
    const bad = {
      rules: [{ when: { user: 'x' }, reply: { parts: [{ text: 'ok' }, { txt: 1 }] } }],
    };
    expect(() => parseSimScript(bad, 'my.json')).toThrow(ConfigError);
    expect(() => parseSimScript(bad, 'my.json')).toThrow(/my\.json.*rules\[0\]\.reply\.parts\[1\]/);
  });

  it('reports a misspelt condition', () => {
    const bad = { rules: [{ when: { User: 'x' }, reply: { parts: [] } }] };
    expect(() => parseSimScript(bad)).toThrow(/rules\[0\]\.when.*"User"/);
  });
});
