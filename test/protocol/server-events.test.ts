import { describe, expect, it } from 'vitest';
import { createEncoder } from '../../src/protocol/index.js';
import type { Item, ResponseObject, ServerEvent, SessionObject } from '../../src/session/events.js';

const message: Item = {
  id: 'item_1',
  object: 'realtime.item',
  type: 'message',
  status: 'completed',
  role: 'assistant',
  content: [{ type: 'output_text', text: 'Hi' }],
};

const call: Item = {
  id: 'item_2',
  object: 'realtime.item',
  type: 'function_call',
  status: 'completed',
  call_id: 'call_1',
  name: 'get_time',
  arguments: '{}',
};

const session: SessionObject = {
  type: 'realtime',
  object: 'realtime.session',
  id: 'sess_1',
  model: 'troupe',
  character: 'plain',
  instructions: 'Be brief.',
  output_modalities: ['text'],
  tools: [],
  tool_choice: 'auto',
  max_output_tokens: 'inf',
  audio: {
    input: {
      format: { type: 'audio/pcm', rate: 24000 },
      turn_detection: null,
      transcription: null,
      noise_reduction: null,
    },
    output: { format: { type: 'audio/pcmu' }, voice: 'alloy', speed: 1 },
  },
  truncation: 'auto',
  include: [],
  prompt: null,
  tracing: null,
  expires_at: 0,
  troupe: {
    greeting: true,
    metadata: {},
    character: {
      id: 'plain',
      name: 'Plain',
      description: '',
      variant: 'default',
      tools: [],
      greeting: null,
    },
  },
};

const response: ResponseObject = {
  object: 'realtime.response',
  id: 'resp_1',
  status: 'completed',
  status_details: null,
  output: [message, call],
  output_modalities: ['text'],
  usage: {
    total_tokens: 3,
    input_tokens: 2,
    output_tokens: 1,
    input_token_details: {
      text_tokens: 2,
      audio_tokens: 0,
      image_tokens: 0,
      cached_tokens: 0,
      cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
    },
    output_token_details: { text_tokens: 1, audio_tokens: 0 },
  },
  metadata: null,
};

const at = { response_id: 'resp_1', item_id: 'item_1', output_index: 0, content_index: 0 };

/** Encodes and parses back; null when the dialect drops the event. */
function roundTrip(dialect: 'openai' | 'openai-beta', event: ServerEvent) {
  const frame = createEncoder(dialect).encode(event);
  return frame === null ? null : (JSON.parse(frame) as Record<string, unknown>);
}

describe('the event encoder', () => {
  it('gives every event of a connection its own event_id', () => {
    const encoder = createEncoder('openai');
    const ids = Array.from({ length: 500 }, () => {
      const frame = encoder.encode({ type: 'session.updated', session });
      return (JSON.parse(frame!) as { event_id: string }).event_id;
    });
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => id.startsWith('event_'))).toBe(true);
  });

  it('gives two connections different event ids', () => {
    const a = createEncoder('openai').encode({ type: 'session.updated', session });
    const b = createEncoder('openai').encode({ type: 'session.updated', session });
    expect(JSON.parse(a!).event_id).not.toBe(JSON.parse(b!).event_id);
  });

  it('sends GA events unchanged in the openai dialect', () => {
    const event: ServerEvent = { type: 'response.output_text.delta', ...at, delta: 'Hi' };
    const { event_id, ...rest } = roundTrip('openai', event)!;
    expect(event_id).toEqual(expect.any(String));
    expect(rest).toEqual(event);
  });
});

describe('GA shapes the openai typings give', () => {
  it('calls content_part parts "text" and "audio", while items keep output_text and output_audio', () => {
    for (const [type, wire] of [
      ['output_text', 'text'],
      ['output_audio', 'audio'],
    ] as const) {
      for (const event of ['response.content_part.added', 'response.content_part.done'] as const) {
        const part = type === 'output_text' ? { type, text: '' } : { type, transcript: '' };
        expect(roundTrip('openai', { type: event, ...at, part })).toMatchObject({
          type: event,
          part: { type: wire },
        });
      }
    }
    expect(
      roundTrip('openai', {
        type: 'response.output_item.done',
        response_id: 'resp_1',
        output_index: 0,
        item: message,
      }),
    ).toMatchObject({ item: { content: [{ type: 'output_text' }] } });
  });

  it('sends mcp_call items and their events in GA, and only the items in beta', () => {
    const mcp: Item = {
      id: 'item_3',
      object: 'realtime.item',
      type: 'mcp_call',
      server_label: 'weather',
      name: 'get_current_weather',
      arguments: '{}',
      output: '{"t":1}',
      error: null,
      approval_request_id: null,
    };
    const added: ServerEvent = {
      type: 'response.output_item.added',
      response_id: 'resp_1',
      output_index: 0,
      item: mcp,
    };
    const completed: ServerEvent = {
      type: 'response.mcp_call.completed',
      item_id: 'item_3',
      output_index: 0,
    };
    expect(roundTrip('openai', added)).toMatchObject({ item: mcp });
    expect(roundTrip('openai', completed)).toMatchObject(completed);
    expect(roundTrip('openai-beta', added)).toMatchObject({ item: mcp });
    expect(roundTrip('openai-beta', completed)).toBeNull();
    expect(
      roundTrip('openai-beta', { type: 'response.mcp_call_arguments.delta', ...at, delta: '{' }),
    ).toBeNull();
  });
});

describe('the openai-beta dialect', () => {
  it.each([
    ['response.output_text.delta', 'response.text.delta'],
    ['response.output_text.done', 'response.text.done'],
  ] as const)('renames %s to %s', (ga, beta) => {
    const event = (
      ga === 'response.output_text.delta'
        ? { type: ga, ...at, delta: 'Hi' }
        : { type: ga, ...at, text: 'Hi' }
    ) as ServerEvent;
    expect(roundTrip('openai-beta', event)).toMatchObject({ type: beta, item_id: 'item_1' });
  });

  it('renames conversation.item.added to conversation.item.created, with text parts', () => {
    const out = roundTrip('openai-beta', {
      type: 'conversation.item.added',
      previous_item_id: null,
      item: message,
    });
    expect(out).toMatchObject({
      type: 'conversation.item.created',
      previous_item_id: null,
      item: { id: 'item_1', content: [{ type: 'text', text: 'Hi' }] },
    });
  });

  it('drops conversation.item.done, which beta does not have', () => {
    expect(
      roundTrip('openai-beta', {
        type: 'conversation.item.done',
        previous_item_id: null,
        item: message,
      }),
    ).toBeNull();
  });

  it('calls content parts "text" in content_part events and output items', () => {
    expect(
      roundTrip('openai-beta', {
        type: 'response.content_part.added',
        ...at,
        part: { type: 'output_text', text: '' },
      }),
    ).toMatchObject({ type: 'response.content_part.added', part: { type: 'text', text: '' } });
    expect(
      roundTrip('openai-beta', {
        type: 'response.output_item.done',
        response_id: 'resp_1',
        output_index: 0,
        item: message,
      }),
    ).toMatchObject({ item: { content: [{ type: 'text' }] } });
  });

  it('leaves function_call items as they are', () => {
    expect(
      roundTrip('openai-beta', {
        type: 'response.output_item.added',
        response_id: 'resp_1',
        output_index: 1,
        item: call,
      }),
    ).toMatchObject({ item: call });
  });

  it('says modalities instead of output_modalities on responses', () => {
    const out = roundTrip('openai-beta', { type: 'response.done', response }) as {
      response: Record<string, unknown>;
    };
    expect(out.response.modalities).toEqual(['text']);
    expect(out.response).not.toHaveProperty('output_modalities');
    expect(out.response.output).toMatchObject([{ content: [{ type: 'text' }] }, call]);
  });

  it('shows the session in the beta shape', () => {
    const out = roundTrip('openai-beta', { type: 'session.created', session }) as {
      type: string;
      session: Record<string, unknown>;
    };
    expect(out.type).toBe('session.created');
    expect(out.session).toMatchObject({
      id: 'sess_1',
      object: 'realtime.session',
      modalities: ['text'],
      voice: 'alloy',
      input_audio_format: 'pcm16',
      output_audio_format: 'g711_ulaw',
      turn_detection: null,
      max_response_output_tokens: 'inf',
      instructions: 'Be brief.',
      troupe: session.troupe,
    });
    for (const ga of ['output_modalities', 'audio', 'max_output_tokens', 'type']) {
      expect(out.session).not.toHaveProperty(ga);
    }
  });

  it('passes events beta shares with GA through under the same name', () => {
    expect(
      roundTrip('openai-beta', {
        type: 'error',
        error: {
          type: 'invalid_request_error',
          code: 'x',
          message: 'm',
          param: null,
          event_id: null,
        },
      }),
    ).toMatchObject({ type: 'error', error: { code: 'x' } });
    expect(
      roundTrip('openai-beta', { type: 'conversation.item.deleted', item_id: 'i' }),
    ).toMatchObject({
      type: 'conversation.item.deleted',
    });
  });
});

describe('voice and Unmute events in the openai dialects', () => {
  const voiceEvents: ServerEvent[] = [
    { type: 'input_audio_buffer.speech_started', audio_start_ms: 0, item_id: 'item_1' },
    { type: 'input_audio_buffer.speech_stopped', audio_end_ms: 800, item_id: 'item_1' },
    { type: 'input_audio_buffer.committed', previous_item_id: null, item_id: 'item_1' },
    { type: 'input_audio_buffer.cleared' },
    {
      type: 'conversation.item.input_audio_transcription.delta',
      item_id: 'item_1',
      content_index: 0,
      delta: 'hi',
    },
    {
      type: 'conversation.item.input_audio_transcription.completed',
      item_id: 'item_1',
      content_index: 0,
      transcript: 'hi',
      usage: { type: 'duration', seconds: 0.8 },
    },
    { type: 'conversation.item.truncated', item_id: 'item_1', content_index: 0, audio_end_ms: 5 },
    { type: 'response.output_audio.delta', ...at, delta: 'AAAA' },
    { type: 'response.output_audio.done', ...at },
    { type: 'response.output_audio_transcript.delta', ...at, delta: 'Hi' },
    { type: 'response.output_audio_transcript.done', ...at, transcript: 'Hi' },
  ];

  it('sends voice events under their GA names in the openai dialect', () => {
    for (const event of voiceEvents) {
      const { event_id: _id, ...rest } = roundTrip('openai', event)!;
      expect(rest).toEqual(event);
    }
  });

  it.each([
    ['response.output_audio.delta', 'response.audio.delta'],
    ['response.output_audio.done', 'response.audio.done'],
    ['response.output_audio_transcript.delta', 'response.audio_transcript.delta'],
    ['response.output_audio_transcript.done', 'response.audio_transcript.done'],
    ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_started'],
    [
      'conversation.item.input_audio_transcription.completed',
      'conversation.item.input_audio_transcription.completed',
    ],
  ])('sends %s as %s in the openai-beta dialect', (ga, beta) => {
    const event = voiceEvents.find((e) => e.type === ga)!;
    const { type, event_id: _id, ...rest } = roundTrip('openai-beta', event)!;
    const { type: _ga, ...fields } = event;
    expect(type).toBe(beta);
    expect(rest).toEqual(fields);
  });

  it('drops the unmute.* events, which only Unmute knows', () => {
    const unmuteOnly: ServerEvent[] = [
      { type: 'unmute.response.text.delta.ready', delta: 'Hi' },
      { type: 'unmute.interrupted_by_vad' },
      { type: 'unmute.additional_outputs', args: { chat_history: [] } },
    ];
    for (const event of unmuteOnly) {
      expect(roundTrip('openai', event), event.type).toBeNull();
      expect(roundTrip('openai-beta', event), event.type).toBeNull();
    }
  });
});
