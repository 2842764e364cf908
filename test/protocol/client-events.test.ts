import { describe, expect, it } from 'vitest';
import { CLIENT_EVENT_TYPES, MAX_EVENT_DEPTH, parseClientEvent } from '../../src/protocol/index.js';
import type { ClientEvent } from '../../src/session/events.js';

/** Parses an object as a frame and expects it to be taken. */
function parse(event: object): ClientEvent {
  const parsed = parseClientEvent(JSON.stringify(event));
  if (!parsed.ok) throw new Error(`refused: ${parsed.error.message}`);
  return parsed.event;
}

/** Parses a frame and expects it to be refused; returns the wire error. */
function refuse(frame: object | string) {
  const parsed = parseClientEvent(typeof frame === 'string' ? frame : JSON.stringify(frame));
  if (parsed.ok) throw new Error(`taken: ${JSON.stringify(parsed.event)}`);
  return parsed.error.payload;
}

const userText = (text: string) => ({
  type: 'message',
  role: 'user',
  content: [{ type: 'input_text', text }],
});

describe('parseClientEvent: events it takes', () => {
  it('takes every client event type in its GA shape', () => {
    const events: object[] = [
      {
        type: 'session.update',
        session: {
          type: 'realtime',
          character: 'weather',
          instructions: 'Be brief.',
          tools: [{ type: 'function', name: 'get_time', description: 'Now', parameters: {} }],
          tool_choice: { type: 'function', name: 'get_time' },
          output_modalities: ['text'],
          audio: {
            input: { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: null },
            output: { format: { type: 'audio/pcmu' }, voice: 'alloy' },
          },
          temperature: 0.5,
          max_output_tokens: 100,
        },
      },
      { type: 'conversation.item.create', previous_item_id: null, item: userText('Hi') },
      {
        type: 'conversation.item.create',
        item: { type: 'function_call_output', call_id: 'call_1', output: '{"ok":true}' },
      },
      { type: 'conversation.item.retrieve', item_id: 'item_1' },
      { type: 'conversation.item.delete', item_id: 'item_1' },
      { type: 'conversation.item.truncate', item_id: 'item_1', content_index: 0, audio_end_ms: 0 },
      { type: 'response.create' },
      { type: 'response.create', response: { instructions: 'Shout.', metadata: { a: 'b' } } },
      { type: 'response.cancel' },
      { type: 'input_audio_buffer.append', audio: 'AAAA' },
      { type: 'input_audio_buffer.commit' },
      { type: 'input_audio_buffer.clear' },
    ];
    const types = events.map((e) => parse(e).type);
    expect(new Set(types)).toEqual(new Set(CLIENT_EVENT_TYPES));
  });

  it('maps the GA session fields onto the session update', () => {
    const event = parse({
      type: 'session.update',
      session: {
        audio: { input: { format: { type: 'audio/pcm', rate: 24000 } }, output: { voice: 'nova' } },
        output_modalities: ['text'],
        max_output_tokens: 'inf',
      },
    });
    expect(event).toEqual({
      type: 'session.update',
      session: {
        voice: 'nova',
        output_modalities: ['text'],
        input_audio_format: { type: 'audio/pcm', rate: 24000 },
        max_output_tokens: 'inf',
      },
    });
  });

  it('takes the beta session names as aliases of the GA ones', () => {
    const event = parse({
      type: 'session.update',
      session: {
        modalities: ['text'],
        input_audio_format: 'pcm16',
        output_audio_format: 'g711_ulaw',
        turn_detection: { type: 'server_vad', silence_duration_ms: 500 },
        max_response_output_tokens: 42,
        voice: 'echo',
      },
    });
    expect(event).toEqual({
      type: 'session.update',
      session: {
        voice: 'echo',
        output_modalities: ['text'],
        input_audio_format: { type: 'audio/pcm', rate: 24000 },
        output_audio_format: { type: 'audio/pcmu' },
        turn_detection: { type: 'server_vad', silence_duration_ms: 500 },
        max_output_tokens: 42,
      },
    });
  });

  it('takes beta response options as aliases', () => {
    const event = parse({
      type: 'response.create',
      response: {
        modalities: ['text'],
        max_response_output_tokens: 7,
        voice: 'echo',
        output_audio_format: 'g711_ulaw',
      },
    });
    expect(event).toEqual({
      type: 'response.create',
      response: {
        output_modalities: ['text'],
        max_output_tokens: 7,
        voice: 'echo',
        output_audio_format: { type: 'audio/pcmu' },
      },
    });
  });

  it('turns a beta assistant "text" part into output_text', () => {
    const event = parse({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'assistant', content: [{ type: 'text', text: 'Hello' }] },
    });
    expect(event).toMatchObject({
      item: { role: 'assistant', content: [{ type: 'output_text', text: 'Hello' }] },
    });
  });

  it('takes an image part with a data URL beside the text', () => {
    const url = 'data:image/png;base64,iVBORw0KGgo=';
    const event = parse({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is this?' },
          { type: 'input_image', image_url: url },
        ],
      },
    });
    expect(event).toMatchObject({
      item: { content: [{ type: 'input_text' }, { type: 'input_image', image_url: url }] },
    });
  });

  it("takes null as not set for a response's options, as LiveKit sends them", () => {
    expect(
      parse({
        type: 'response.create',
        response: { instructions: null, metadata: { client_event_id: 'e1' } },
      }),
    ).toEqual({ type: 'response.create', response: { metadata: { client_event_id: 'e1' } } });
    const nulls = {
      instructions: null,
      output_modalities: null,
      modalities: null,
      tool_choice: null,
      temperature: null,
      max_output_tokens: null,
      max_response_output_tokens: null,
      metadata: null,
      conversation: null,
      input: null,
      tools: null,
      voice: null,
      audio: { output: { format: null, voice: null } },
      parallel_tool_calls: null,
      reasoning: null,
      output_audio_format: null,
    };
    expect(parse({ type: 'response.create', response: nulls })).toEqual({
      type: 'response.create',
      response: {},
    });
    expect(parse({ type: 'response.create', response: null })).toEqual({
      type: 'response.create',
    });
    expect(parse({ type: 'response.cancel', event_id: null, response_id: null })).toEqual({
      type: 'response.cancel',
    });
  });

  it("takes null as not set for a session's settings, but keeps the nulls that mean off", () => {
    const event = parse({
      type: 'session.update',
      session: {
        type: null,
        model: null,
        instructions: null,
        voice: null,
        tools: null,
        tool_choice: null,
        output_modalities: null,
        temperature: null,
        max_output_tokens: null,
        modalities: null,
        input_audio_format: null,
        output_audio_format: null,
        max_response_output_tokens: null,
        include: null,
        truncation: null,
        parallel_tool_calls: null,
        reasoning: null,
        speed: null,
        audio: {
          input: { format: null, turn_detection: null, transcription: null, noise_reduction: null },
          output: { format: null, voice: null, speed: null },
        },
        tracing: null,
        prompt: null,
      },
    });
    expect(event).toEqual({
      type: 'session.update',
      session: {
        turn_detection: null,
        input_audio_transcription: null,
        input_audio_noise_reduction: null,
        tracing: null,
        prompt: null,
      },
    });
  });

  it("takes null as not set for an item's optional fields", () => {
    const event = parse({
      type: 'conversation.item.create',
      previous_item_id: null,
      item: {
        type: 'message',
        id: null,
        object: null,
        status: null,
        role: 'user',
        content: [
          { type: 'input_text', text: 'Hi' },
          { type: 'input_audio', audio: null, transcript: 'Hello' },
          { type: 'input_image', image_url: 'https://example.com/a.png', detail: null },
        ],
      },
    });
    expect(event).toEqual({
      type: 'conversation.item.create',
      previous_item_id: null,
      item: {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'Hi' },
          { type: 'input_audio', transcript: 'Hello' },
          { type: 'input_image', image_url: 'https://example.com/a.png' },
        ],
      },
    });
    expect(
      parse({
        type: 'conversation.item.create',
        item: { type: 'function_call', call_id: null, name: 'f', arguments: '{}', status: null },
      }),
    ).toEqual({
      type: 'conversation.item.create',
      item: { type: 'function_call', name: 'f', arguments: '{}' },
    });
  });

  it('keeps the client event_id on the parsed event', () => {
    expect(parse({ type: 'response.create', event_id: 'evt_1' })).toEqual({
      type: 'response.create',
      event_id: 'evt_1',
    });
  });
});

describe('parseClientEvent: what it refuses and how it says so', () => {
  it('refuses client tool parameters nested past 32 levels, naming them', () => {
    // 40 deep: past the tool check's 32, within the event's 64 (nested deeper,
    // the whole event is refused first, below).
    const frame =
      '{"type":"session.update","session":{"tools":[{"type":"function","name":"deep","parameters":' +
      '{"a":'.repeat(40) +
      '1' +
      '}'.repeat(40) +
      '}]}}';
    const error = refuse(frame);
    expect(error).toMatchObject({
      type: 'invalid_request_error',
      param: 'session.tools[0].parameters',
    });
    expect(error.message).toContain('32 levels');
  });

  it('refuses client tool parameters over 64 KB', () => {
    const properties = Object.fromEntries(
      Array.from({ length: 3000 }, (_, i) => [
        `field_${i}`,
        { type: 'string', description: 'x'.repeat(20) },
      ]),
    );
    const error = refuse({
      type: 'session.update',
      session: {
        tools: [{ type: 'function', name: 'wide', parameters: { type: 'object', properties } }],
      },
    });
    expect(error.message).toContain('65536 bytes');
  });
  it('answers a frame that is not JSON with invalid_json', () => {
    expect(refuse('{"type":')).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_json',
      event_id: null,
    });
  });

  it('answers a JSON value that is not an object with invalid_event', () => {
    expect(refuse('[1,2]')).toMatchObject({ code: 'invalid_event' });
  });

  it('answers an event without a type with missing_required_parameter on type', () => {
    expect(refuse({ event_id: 'e1' })).toMatchObject({
      code: 'missing_required_parameter',
      param: 'type',
      event_id: 'e1',
    });
  });

  it.each([
    [42, 'a number'],
    [null, 'null'],
    [['response.create'], 'an array'],
    [{}, 'an object'],
    [true, 'a boolean'],
  ])(
    'answers a type that is not a string (%j) with invalid_value saying what it is',
    (type, given) => {
      expect(refuse({ type, event_id: 'e3' })).toMatchObject({
        code: 'invalid_value',
        param: 'type',
        event_id: 'e3',
        message: `The event's "type" must be a string, not ${given}.`,
      });
    },
  );

  it('answers an unknown type with unknown_event_type listing the types it knows', () => {
    const error = refuse({ type: 'session.destroy', event_id: 'e2' });
    expect(error).toMatchObject({ code: 'unknown_event_type', param: 'type', event_id: 'e2' });
    for (const type of CLIENT_EVENT_TYPES) expect(error.message).toContain(type);
  });

  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty'])(
    'answers the type %s, a name every object has, with unknown_event_type',
    (type) => {
      expect(refuse({ type })).toMatchObject({ code: 'unknown_event_type', param: 'type' });
    },
  );

  it.each([
    [{ type: 'session.update', session: { foo: 1 } }, 'session.foo'],
    [{ type: 'response.create', bogus: true }, 'bogus'],
    [
      {
        type: 'conversation.item.create',
        item: {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: 'hi', bogus: 1 }],
        },
      },
      'item.content[0].bogus',
    ],
    [
      {
        type: 'session.update',
        session: { audio: { input: { format: { type: 'audio/pcm', bogus: 1 } } } },
      },
      'session.audio.input.format.bogus',
    ],
    [
      { type: 'session.update', session: { tools: [{ type: 'function', name: 'a', x: 1 }] } },
      'session.tools[0].x',
    ],
  ])('answers an unknown field with unknown_parameter naming its path (%#)', (event, param) => {
    const error = refuse(event);
    expect(error).toMatchObject({ code: 'unknown_parameter', param });
    expect(error.message).toContain(param);
  });

  it.each([
    [{ type: 'session.update' }, 'session'],
    [{ type: 'conversation.item.retrieve' }, 'item_id'],
    [{ type: 'conversation.item.create' }, 'item'],
    [{ type: 'conversation.item.create', item: { role: 'user', content: [] } }, 'item.type'],
    [
      {
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text' }] },
      },
      'item.content[0].text',
    ],
    [
      { type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'c' } },
      'item.output',
    ],
    [
      { type: 'session.update', session: { tool_choice: { type: 'function' } } },
      'session.tool_choice.name',
    ],
    [{ type: 'input_audio_buffer.append' }, 'audio'],
  ])('answers a missing field with missing_required_parameter (%#)', (event, param) => {
    expect(refuse(event)).toMatchObject({ code: 'missing_required_parameter', param });
  });

  it.each([
    [{ type: 'session.update', session: { temperature: 5 } }, 'session.temperature', 'got 5'],
    [
      { type: 'session.update', session: { output_modalities: [] } },
      'session.output_modalities',
      'got []',
    ],
    [
      { type: 'session.update', session: { input_audio_format: 'mp3' } },
      'session.input_audio_format',
      'got "mp3"',
    ],
    [
      { type: 'response.create', response: { output_audio_format: 'mp3' } },
      'response.output_audio_format',
      'got "mp3"',
    ],
    [
      { type: 'session.update', session: { tool_choice: 'maybe' } },
      'session.tool_choice',
      'got "maybe"',
    ],
    [
      { type: 'session.update', session: { tools: [{ type: 'function', name: 'bad name' }] } },
      'session.tools[0].name',
      'got "bad name"',
    ],
    [
      { type: 'conversation.item.create', item: { type: 'message', role: 'bot', content: [] } },
      'item.role',
      'got "bot"',
    ],
    [
      {
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'nope', text: 'x' }] },
      },
      'item.content[0].type',
      'got "nope"',
    ],
    [
      {
        type: 'conversation.item.create',
        item: {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_image', image_url: 'ftp://x' }],
        },
      },
      'item.content[0].image_url',
      'got "ftp://x"',
    ],
    [
      { type: 'response.create', response: { conversation: 'conv_1' } },
      'response.conversation',
      'got "conv_1"',
    ],
    [{ type: 'input_audio_buffer.append', audio: '!!' }, 'audio', 'got "!!"'],
    [
      { type: 'session.update', session: { max_output_tokens: 0 } },
      'session.max_output_tokens',
      'expected a whole number from 1 to 1000000, or "inf", got 0',
    ],
    [
      { type: 'session.update', session: { max_output_tokens: 'lots' } },
      'session.max_output_tokens',
      '"inf", got "lots"',
    ],
    [
      { type: 'conversation.item.truncate', item_id: 'i', content_index: -1, audio_end_ms: 0 },
      'content_index',
      'got -1',
    ],
  ])('answers a wrong value with invalid_value saying what it got (%#)', (event, param, got) => {
    const error = refuse(event);
    expect(error).toMatchObject({ code: 'invalid_value', param });
    expect(error.message).toContain(got);
  });

  it('names the content types it takes when a part has an unknown type', () => {
    const error = refuse({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'nope', text: 'x' }] },
    });
    expect(error.message).toContain('"input_text"');
    expect(error.message).toContain('"input_image"');
  });

  it('names the options of a tool_choice it does not know', () => {
    expect(refuse({ type: 'session.update', session: { tool_choice: 'maybe' } }).message).toMatch(
      /"auto"\|"none"\|"required"/,
    );
  });

  it("echoes the client's event_id on every kind of refusal", () => {
    expect(refuse({ type: 'nope', event_id: 'a' }).event_id).toBe('a');
    expect(refuse({ type: 'session.update', event_id: 'b', session: { x: 1 } }).event_id).toBe('b');
    expect(refuse({ type: 'conversation.item.retrieve', event_id: 'c' }).event_id).toBe('c');
    expect(
      refuse({ type: 'session.update', event_id: 'd', session: { temperature: 9 } }).event_id,
    ).toBe('d');
  });

  it('starts every message with the event type, so a log line says what was refused', () => {
    expect(refuse({ type: 'session.update', session: { foo: 1 } }).message).toMatch(
      /^session\.update: session\.foo: /,
    );
  });
});

describe('parseClientEvent: events nested too deep', () => {
  /**
   * A `session.update` frame with a value of `levels` nested objects under
   * `tracing.metadata` (3 levels above it) or `prompt.variables.v` (4 above).
   * Built as text: JSON.stringify itself overflows on such values.
   */
  function deepUpdate(under: 'tracing' | 'prompt', levels: number): string {
    const value = '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
    const session =
      under === 'tracing'
        ? `{"tracing":{"metadata":${value}}}`
        : `{"prompt":{"id":"pmpt_1","variables":{"v":${value}}}}`;
    return `{"type":"session.update","event_id":"evt_deep","session":${session}}`;
  }

  it.each(['tracing', 'prompt'] as const)(
    'refuses a session.update with %s values nested 20,000 deep, saying the limit',
    (under) => {
      const error = refuse(deepUpdate(under, 20_000));
      expect(error).toMatchObject({
        type: 'invalid_request_error',
        code: 'invalid_event',
        param: null,
        event_id: 'evt_deep',
      });
      expect(error.message).toMatch(/^session\.update: /);
      expect(error.message).toContain(`more than ${MAX_EVENT_DEPTH} levels deep`);
      expect(error.message).toContain('nothing of it was applied');
    },
  );

  it('takes 64 levels, the event itself counted, where the schema takes any JSON, and refuses 65', () => {
    expect(MAX_EVENT_DEPTH).toBe(64);
    const tracing = parse(JSON.parse(deepUpdate('tracing', 61)) as object);
    expect(tracing.type).toBe('session.update');
    const prompt = parse(JSON.parse(deepUpdate('prompt', 60)) as object);
    expect(prompt.type).toBe('session.update');
    expect(refuse(deepUpdate('tracing', 62)).code).toBe('invalid_event');
    expect(refuse(deepUpdate('prompt', 61)).code).toBe('invalid_event');
  });

  it('counts arrays as levels too', () => {
    const frame = `{"type":"session.update","session":{"tracing":{"metadata":${'['.repeat(20_000)}${']'.repeat(20_000)}}}}`;
    expect(refuse(frame)).toMatchObject({ code: 'invalid_event', event_id: null });
  });
});
