import { describe, expect, it } from 'vitest';
import { checkChatRequest } from '../../src/testing/simulator/index.js';

const WEATHER = {
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: {} } },
};

function call(id: string, args = '{"city":"Paris"}') {
  return { id, type: 'function', function: { name: 'get_weather', arguments: args } };
}

function request(messages: unknown[], extra: Record<string, unknown> = {}) {
  return { model: 'm', messages, tools: [WEATHER], ...extra };
}

const user = { role: 'user', content: 'weather?' };

describe('checkChatRequest', () => {
  it('accepts a history with tool calls, their results in any order and legacy function calls', () => {
    const body = request([
      { role: 'system', content: 'Be brief.' },
      user,
      { role: 'assistant', content: null, tool_calls: [call('a'), call('b')] },
      { role: 'tool', tool_call_id: 'b', content: 'rain' },
      { role: 'tool', tool_call_id: 'a', content: 'sun' },
      { role: 'assistant', content: 'Mixed.' },
      { role: 'user', content: [{ type: 'text', text: 'and now?' }] },
      { role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{}' } },
      { role: 'function', name: 'get_weather', content: 'snow' },
    ]);
    expect(checkChatRequest(body)).toBeNull();
  });

  it('rejects a body that is not an object', () => {
    expect(checkChatRequest([1])).toMatch(/JSON object/);
  });

  it('rejects a request without a model', () => {
    expect(checkChatRequest({ messages: [user] })).toMatch(/model/);
  });

  it('rejects an empty messages array', () => {
    expect(checkChatRequest({ model: 'm', messages: [] })).toMatch(/messages must be a non-empty/);
  });

  it('rejects an unknown role, naming the message index', () => {
    expect(checkChatRequest(request([user, { role: 'robot', content: 'x' }]))).toMatch(
      /^messages\[1\]\.role/,
    );
  });

  it('rejects user content that is neither a string nor text/image parts', () => {
    expect(checkChatRequest(request([{ role: 'user', content: 42 }]))).toMatch(
      /^messages\[0\]\.content/,
    );
  });

  it('rejects an assistant message with neither content nor tool calls', () => {
    expect(checkChatRequest(request([user, { role: 'assistant' }]))).toMatch(
      /^messages\[1\] is an assistant message with neither/,
    );
  });

  it('rejects tool calls that are never answered', () => {
    const problem = checkChatRequest(
      request([user, { role: 'assistant', content: null, tool_calls: [call('a')] }]),
    );
    expect(problem).toMatch(/^messages\[1\]\.tool_calls\[0\] \(id "a"\) has no tool message/);
  });

  it('rejects a history that answers only one of two parallel calls', () => {
    const problem = checkChatRequest(
      request([
        user,
        { role: 'assistant', content: null, tool_calls: [call('a'), call('b')] },
        { role: 'tool', tool_call_id: 'a', content: 'sun' },
      ]),
    );
    expect(problem).toMatch(/messages\[1\]\.tool_calls\[1\] \(id "b"\)/);
  });

  it('rejects a user message between the tool calls and their results', () => {
    const problem = checkChatRequest(
      request([
        user,
        { role: 'assistant', content: null, tool_calls: [call('a')] },
        { role: 'user', content: 'hurry' },
        { role: 'tool', tool_call_id: 'a', content: 'sun' },
      ]),
    );
    expect(problem).toMatch(/^messages\[1\]\.tool_calls\[0\]/);
  });

  it('rejects a tool message whose tool_call_id matches no call', () => {
    const problem = checkChatRequest(
      request([
        user,
        { role: 'assistant', content: null, tool_calls: [call('a')] },
        { role: 'tool', tool_call_id: 'a', content: 'sun' },
        { role: 'tool', tool_call_id: 'zzz', content: 'rain' },
      ]),
    );
    expect(problem).toMatch(/^messages\[3\] is a tool message with tool_call_id "zzz"/);
  });

  it('rejects a tool message with no assistant tool call before it', () => {
    const problem = checkChatRequest(
      request([user, { role: 'tool', tool_call_id: 'a', content: 'sun' }]),
    );
    expect(problem).toMatch(/^messages\[1\] is a tool message/);
  });

  it('rejects a call answered twice', () => {
    const problem = checkChatRequest(
      request([
        user,
        { role: 'assistant', content: null, tool_calls: [call('a')] },
        { role: 'tool', tool_call_id: 'a', content: 'sun' },
        { role: 'tool', tool_call_id: 'a', content: 'sun again' },
      ]),
    );
    expect(problem).toMatch(/^messages\[3\] answers tool call "a" of messages\[1\] a second time/);
  });

  it('rejects replayed arguments that are not valid JSON, as vLLM does (#47761)', () => {
    const problem = checkChatRequest(
      request([
        user,
        { role: 'assistant', content: null, tool_calls: [call('a', '{"city": "Par')] },
        { role: 'tool', tool_call_id: 'a', content: 'sun' },
      ]),
    );
    expect(problem).toMatch(
      /^messages\[1\]\.tool_calls\[0\]\.function\.arguments is not valid JSON/,
    );
  });

  it('rejects arguments given as an object instead of a string', () => {
    const bad = { id: 'a', type: 'function', function: { name: 'get_weather', arguments: {} } };
    const problem = checkChatRequest(
      request([
        user,
        { role: 'assistant', content: null, tool_calls: [bad] },
        { role: 'tool', tool_call_id: 'a', content: 'sun' },
      ]),
    );
    expect(problem).toMatch(/arguments must be a string of JSON/);
  });

  it('rejects an empty tool call id', () => {
    const problem = checkChatRequest(
      request([
        user,
        { role: 'assistant', content: null, tool_calls: [call('')] },
        { role: 'tool', tool_call_id: '', content: 'sun' },
      ]),
    );
    expect(problem).toMatch(/^messages\[1\]\.tool_calls\[0\]\.id must be a non-empty string/);
  });

  it('rejects a legacy function_call not followed by a function message of that name', () => {
    const problem = checkChatRequest(
      request([
        user,
        {
          role: 'assistant',
          content: null,
          function_call: { name: 'get_weather', arguments: '{}' },
        },
        { role: 'function', name: 'other', content: 'snow' },
      ]),
    );
    expect(problem).toMatch(/^messages\[1\]\.function_call \("get_weather"\) is not followed/);
  });

  it('rejects a function message that answers no function_call', () => {
    const problem = checkChatRequest(
      request([user, { role: 'function', name: 'get_weather', content: 'snow' }]),
    );
    expect(problem).toMatch(/^messages\[1\] is a function message/);
  });

  it('rejects a malformed tools entry', () => {
    expect(checkChatRequest(request([user], { tools: [{ function: { name: 'x' } }] }))).toMatch(
      /^tools\[0\]\.type/,
    );
    expect(
      checkChatRequest(
        request([user], { tools: [{ type: 'function', function: { name: 'a b' } }] }),
      ),
    ).toMatch(/^tools\[0\]\.function\.name/);
    expect(
      checkChatRequest(
        request([user], { tools: [{ type: 'function', function: { name: 'a', parameters: 3 } }] }),
      ),
    ).toMatch(/^tools\[0\]\.function\.parameters/);
  });

  it('rejects an unknown tool_choice', () => {
    expect(checkChatRequest(request([user], { tool_choice: 'always' }))).toMatch(/^tool_choice/);
  });

  it('rejects a named tool_choice that is not among the tools', () => {
    const choice = { type: 'function', function: { name: 'nope' } };
    expect(checkChatRequest(request([user], { tool_choice: choice }))).toMatch(
      /Tool 'nope' has not been passed/,
    );
  });

  it('rejects tool_choice required without tools', () => {
    expect(checkChatRequest({ model: 'm', messages: [user], tool_choice: 'required' })).toMatch(
      /`tools` must be set/,
    );
  });

  it('rejects stream_options without stream', () => {
    expect(checkChatRequest(request([user], { stream_options: { include_usage: true } }))).toMatch(
      /Stream options/,
    );
  });
});
