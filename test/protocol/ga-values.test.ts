import { describe, expect, it } from 'vitest';
import {
  parseClientEvent,
  SEMANTIC_VAD_EAGERNESS,
  SEMANTIC_VAD_SILENCE_MS,
} from '../../src/protocol/index.js';
import type { ClientEvent, SessionUpdate } from '../../src/session/events.js';

function parse(event: object): ClientEvent {
  const parsed = parseClientEvent(JSON.stringify(event));
  if (!parsed.ok) throw new Error(`refused: ${parsed.error.message}`);
  return parsed.event;
}

function refuse(event: object) {
  const parsed = parseClientEvent(JSON.stringify(event));
  if (parsed.ok) throw new Error(`taken: ${JSON.stringify(parsed.event)}`);
  return parsed.error.payload;
}

const session = (s: object): SessionUpdate => {
  const e = parse({ type: 'session.update', session: s });
  if (e.type !== 'session.update') throw new Error(e.type);
  return e.session;
};

/** What the Agents SDK (0.14) sends on connect with its default config. */
const AGENTS_SDK_DEFAULT = {
  type: 'realtime',
  instructions: 'Be nice.',
  model: 'gpt-realtime',
  output_modalities: ['audio'],
  audio: {
    input: {
      format: { type: 'audio/pcm', rate: 24000 },
      noise_reduction: null,
      transcription: { model: 'gpt-4o-mini-transcribe' },
      turn_detection: { type: 'semantic_vad' },
    },
    output: { format: { type: 'audio/pcm', rate: 24000 }, speed: 1 },
  },
  tools: [
    {
      type: 'function',
      name: 'add',
      description: 'adds',
      parameters: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: { a: { type: 'number' } },
        required: ['a'],
        additionalProperties: false,
      },
    },
  ],
};

describe('GA session values', () => {
  it("takes the Agents SDK's default session.update whole", () => {
    const s = session(AGENTS_SDK_DEFAULT);
    expect(s).toMatchObject({
      instructions: 'Be nice.',
      model: 'gpt-realtime',
      output_modalities: ['audio'],
      input_audio_noise_reduction: null,
      input_audio_transcription: { model: 'gpt-4o-mini-transcribe' },
      output_audio_speed: 1,
      tools: [expect.objectContaining({ name: 'add' })],
    });
    expect(session({ type: 'realtime', tracing: 'auto' })).toEqual({ tracing: 'auto' });
  });

  it.each(SEMANTIC_VAD_EAGERNESS)(
    'runs semantic_vad with eagerness %s as the server VAD with its silence window',
    (eagerness) => {
      const s = session({
        audio: { input: { turn_detection: { type: 'semantic_vad', eagerness } } },
      });
      expect(s.turn_detection).toEqual({
        type: 'server_vad',
        eagerness,
        silence_duration_ms: SEMANTIC_VAD_SILENCE_MS[eagerness],
      });
    },
  );

  it('treats semantic_vad without eagerness as auto, keeping create_response and interrupt_response', () => {
    const s = session({
      turn_detection: { type: 'semantic_vad', create_response: false, interrupt_response: false },
    });
    expect(s.turn_detection).toEqual({
      type: 'server_vad',
      eagerness: 'auto',
      silence_duration_ms: SEMANTIC_VAD_SILENCE_MS.auto,
      create_response: false,
      interrupt_response: false,
    });
  });

  it('orders the eagerness levels from the longest silence window to the shortest', () => {
    const { low, medium, high, auto } = SEMANTIC_VAD_SILENCE_MS;
    expect(low).toBeGreaterThan(medium);
    expect(medium).toBeGreaterThan(high);
    expect(auto).toBe(medium);
  });

  it('takes server_vad with idle_timeout_ms', () => {
    const s = session({
      audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: 6000 } } },
    });
    expect(s.turn_detection).toEqual({ type: 'server_vad', idle_timeout_ms: 6000 });
  });

  it('takes every other documented GA session value as a typed value', () => {
    const s = session({
      type: 'realtime',
      truncation: { type: 'retention_ratio', retention_ratio: 0.5, token_limits: {} },
      include: ['item.input_audio_transcription.logprobs'],
      prompt: { id: 'pmpt_1', version: '2', variables: { city: 'Oslo' } },
      tracing: { workflow_name: 'w', group_id: 'g', metadata: { a: 1 } },
      parallel_tool_calls: false,
      reasoning: { effort: 'low' },
      audio: {
        input: { noise_reduction: { type: 'far_field' }, transcription: { language: 'en' } },
        output: { speed: 1.25, voice: { id: 'voice_123' } },
      },
      tools: [{ type: 'function', name: 'f', parameters: {}, strict: true }],
    });
    expect(s).toEqual({
      truncation: { type: 'retention_ratio', retention_ratio: 0.5, token_limits: {} },
      include: ['item.input_audio_transcription.logprobs'],
      prompt: { id: 'pmpt_1', version: '2', variables: { city: 'Oslo' } },
      tracing: { workflow_name: 'w', group_id: 'g', metadata: { a: 1 } },
      parallel_tool_calls: false,
      reasoning: { effort: 'low' },
      input_audio_noise_reduction: { type: 'far_field' },
      input_audio_transcription: { language: 'en' },
      output_audio_speed: 1.25,
      voice: 'voice_123',
      tools: [{ type: 'function', name: 'f', description: '', parameters: {}, strict: true }],
    });
    expect(session({ truncation: 'disabled', prompt: null, tracing: null })).toEqual({
      truncation: 'disabled',
      prompt: null,
      tracing: null,
    });
  });

  it('takes the beta names of transcription, noise reduction and speed', () => {
    expect(
      session({
        input_audio_transcription: { model: 'whisper-1' },
        input_audio_noise_reduction: { type: 'near_field' },
        speed: 0.8,
      }),
    ).toEqual({
      input_audio_transcription: { model: 'whisper-1' },
      input_audio_noise_reduction: { type: 'near_field' },
      output_audio_speed: 0.8,
    });
  });
});

describe('GA response values', () => {
  it('takes an out-of-band response with its own input, tools, voice and format', () => {
    const e = parse({
      type: 'response.create',
      response: {
        conversation: 'none',
        input: [
          {
            type: 'message',
            role: 'user',
            content: [{ type: 'input_text', text: 'Classify this.' }],
          },
          { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: 'ok', status: 'completed' },
        ],
        tools: [{ type: 'function', name: 'f', strict: false }],
        audio: { output: { voice: 'alloy', format: { type: 'audio/pcm', rate: 24000 } } },
        metadata: { topic: 'x' },
        parallel_tool_calls: true,
      },
    });
    expect(e).toEqual({
      type: 'response.create',
      response: {
        conversation: 'none',
        input: [
          {
            type: 'message',
            role: 'user',
            content: [{ type: 'input_text', text: 'Classify this.' }],
          },
          { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: 'ok' },
        ],
        tools: [
          {
            type: 'function',
            name: 'f',
            description: '',
            parameters: { type: 'object', properties: {} },
            strict: false,
          },
        ],
        voice: 'alloy',
        output_audio_format: { type: 'audio/pcm', rate: 24000 },
        metadata: { topic: 'x' },
        parallel_tool_calls: true,
      },
    });
  });
});

describe('GA values that are wrong: the field and what is allowed', () => {
  it.each([
    [
      { audio: { input: { turn_detection: { type: 'magic_vad' } } } },
      'session.audio.input.turn_detection.type',
      /"server_vad", "semantic_vad".*got "magic_vad"/,
    ],
    [
      { audio: { input: { turn_detection: { type: 'semantic_vad', eagerness: 'eager' } } } },
      'session.audio.input.turn_detection.eagerness',
      /"low".*"medium".*"high".*"auto".*got "eager"/,
    ],
    [
      { turn_detection: { type: 'semantic_vad', silence_duration_ms: 300 } },
      'session.turn_detection.silence_duration_ms',
      /server_vad setting; semantic_vad takes eagerness/,
    ],
    [
      { audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: 10 } } } },
      'session.audio.input.turn_detection.idle_timeout_ms',
      />=5000, got 10/,
    ],
    [{ audio: { output: { speed: 3 } } }, 'session.audio.output.speed', /<=1.5, got 3/],
    [
      { audio: { input: { noise_reduction: { type: 'studio' } } } },
      'session.audio.input.noise_reduction.type',
      /"near_field"\|"far_field", got "studio"/,
    ],
    [{ truncation: 'sometimes' }, 'session.truncation', /got "sometimes"/],
    [{ include: ['everything'] }, 'session.include[0]', /item.input_audio_transcription.logprobs/],
    [{ tracing: 'on' }, 'session.tracing', /"auto", an object .* or null/],
    [
      { tools: [{ type: 'mcp', server_label: 'x', server_url: 'https://x' }] },
      'session.tools[0].type',
      /MCP server tools are not offered/,
    ],
    [{ tools: [{ type: 'web_search' }] }, 'session.tools[0].type', /"function", "mcp"/],
    [
      { tools: [{ type: 'function', name: 'f', strict: 'yes' }] },
      'session.tools[0].strict',
      /boolean/,
    ],
  ])('refuses session %j naming %s', (s, param, message) => {
    const error = refuse({ type: 'session.update', session: s });
    expect(error).toMatchObject({ code: 'invalid_value', param });
    expect(error.message).toMatch(message);
  });

  it('refuses a conversation other than "auto" and "none", saying both', () => {
    const error = refuse({ type: 'response.create', response: { conversation: 'conv_9' } });
    expect(error).toMatchObject({ code: 'invalid_value', param: 'response.conversation' });
    expect(error.message).toMatch(/"auto".*"none"/);
  });

  it('refuses a function_call input item whose arguments are not a JSON object', () => {
    const error = refuse({
      type: 'response.create',
      response: { input: [{ type: 'function_call', name: 'f', arguments: '[1]' }] },
    });
    expect(error).toMatchObject({ param: 'response.input[0].arguments' });
    expect(error.message).toMatch(/JSON object/);
  });
});
