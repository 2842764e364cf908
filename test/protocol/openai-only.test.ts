import { describe, expect, it } from 'vitest';
import { openAiOnly } from '../../src/protocol/openai-only.js';
import type { Item, ServerEvent } from '../../src/session/events.js';

const message = (id: string): Item => ({
  id,
  object: 'realtime.item',
  type: 'message',
  status: 'completed',
  role: 'assistant',
  content: [{ type: 'output_text', text: 'Hi.' }],
});
const mcpCall = (id: string): Item => ({
  id,
  object: 'realtime.item',
  type: 'mcp_call',
  server_label: 'weather',
  name: 'get_weather',
  arguments: '{}',
  output: '{"c":12}',
  error: null,
  approval_request_id: null,
});
const added = (item: Item, previous: string | null): ServerEvent => ({
  type: 'conversation.item.added',
  previous_item_id: previous,
  item,
});
const outputAdded = (item: Item, index: number): ServerEvent => ({
  type: 'response.output_item.added',
  response_id: 'resp_1',
  output_index: index,
  item,
});

describe("OpenAI's events only", () => {
  it('leaves out the tools the server runs and places what follows after what was shown', () => {
    const only = openAiOnly();
    expect(only(added(message('user_1'), null))).toEqual(added(message('user_1'), null));
    expect(only(outputAdded(mcpCall('call_1'), 0))).toBeNull();
    expect(only(added(mcpCall('call_1'), 'user_1'))).toBeNull();
    expect(only({ type: 'response.mcp_call.completed', item_id: 'call_1' } as never)).toBeNull();
    // The reply after the call: placed after the user's message, first of the response's shown output.
    expect(only(outputAdded(message('msg_1'), 1))).toMatchObject({ output_index: 0 });
    expect(only(added(message('msg_1'), 'call_1'))).toMatchObject({ previous_item_id: 'user_1' });
    expect(
      only({
        type: 'response.output_text.delta',
        response_id: 'resp_1',
        item_id: 'msg_1',
        output_index: 1,
        content_index: 0,
        delta: 'Hi',
      }),
    ).toMatchObject({ output_index: 0, delta: 'Hi' });
    const done = only({
      type: 'response.done',
      response: {
        object: 'realtime.response',
        id: 'resp_1',
        status: 'completed',
        status_details: null,
        output: [mcpCall('call_1'), message('msg_1')],
        output_modalities: ['text'],
        usage: null,
        metadata: null,
      },
    });
    expect(done).toMatchObject({ response: { output: [{ id: 'msg_1' }] } });
  });

  it('names the shown item before a hidden one when the user speaks after it', () => {
    const only = openAiOnly();
    only(added(message('user_1'), null));
    only(added(mcpCall('call_1'), 'user_1'));
    only(added(mcpCall('call_2'), 'call_1'));
    expect(
      only({ type: 'input_audio_buffer.committed', previous_item_id: 'call_2', item_id: 'u2' }),
    ).toMatchObject({ previous_item_id: 'user_1' });
  });

  it('sends no troupe.* event and no error for a failed response, whose response.done says it', () => {
    const only = openAiOnly();
    const result = {
      type: 'troupe.tool_call.result',
      call_id: 'c',
      name: 'get_weather',
      outcome: 'ok',
      duration_ms: 1,
    } as unknown as ServerEvent;
    expect(only(result)).toBeNull();
    const llm = { type: 'llm_error', code: 'llm_stream_error', message: 'x', param: null };
    expect(only({ type: 'error', error: { ...llm, event_id: null } } as ServerEvent)).toBeNull();
    const refused: ServerEvent = {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        code: 'invalid_value',
        message: 'bad',
        param: 'x',
        event_id: null,
      },
    };
    expect(only(refused)).toBe(refused);
  });
});
