import { describe, expect, it } from 'vitest';
import {
  createEncoder,
  detectDialect,
  parseClientEvent,
  unmuteVoiceList,
} from '../../src/protocol/index.js';
import type {
  ClientEvent,
  Item,
  ResponseObject,
  ServerEvent,
  SessionObject,
} from '../../src/session/events.js';

const session: SessionObject = {
  type: 'realtime',
  object: 'realtime.session',
  id: 'sess_1',
  model: 'troupe',
  character: 'plain',
  instructions: 'Be brief.',
  output_modalities: ['audio'],
  tools: [],
  tool_choice: 'auto',
  max_output_tokens: 'inf',
  audio: {
    input: {
      format: { type: 'audio/ogg', rate: 24000 },
      turn_detection: null,
      transcription: null,
      noise_reduction: null,
    },
    output: { format: { type: 'audio/ogg', rate: 24000 }, speed: 1 },
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

const at = { response_id: 'resp_1', item_id: 'item_1', output_index: 0, content_index: 0 };

/** Encodes one event in the unmute dialect; null when it is not sent. */
function unmute(event: ServerEvent, encoder = createEncoder('unmute')) {
  const frame = encoder.encode(event);
  if (frame === null) return null;
  const { event_id, ...rest } = JSON.parse(frame) as Record<string, unknown>;
  expect(event_id).toEqual(expect.stringMatching(/^event_/));
  return rest;
}

/** Parses an unmute-dialect frame and expects it to be taken. */
function parse(event: object): ClientEvent {
  const parsed = parseClientEvent(JSON.stringify(event), 'unmute');
  if (!parsed.ok) throw new Error(`refused: ${parsed.error.message}`);
  return parsed.event;
}

/** Parses an unmute-dialect frame and expects it to be refused; returns the wire error. */
function refuse(event: object) {
  const parsed = parseClientEvent(JSON.stringify(event), 'unmute');
  if (parsed.ok) throw new Error(`taken: ${JSON.stringify(parsed.event)}`);
  return parsed.error.payload;
}

const update = (s: object) => ({ type: 'session.update', session: s });

describe('the unmute encoder', () => {
  it('sends audio as response.audio.delta and response.audio.done, with nothing else', () => {
    expect(unmute({ type: 'response.output_audio.delta', ...at, delta: 'T2dnUw==' })).toEqual({
      type: 'response.audio.delta',
      delta: 'T2dnUw==',
    });
    expect(unmute({ type: 'response.output_audio.done', ...at })).toEqual({
      type: 'response.audio.done',
    });
  });

  it("sends the audio's transcript as response.text.delta and response.text.done", () => {
    expect(
      unmute({ type: 'response.output_audio_transcript.delta', ...at, delta: 'Hello' }),
    ).toEqual({ type: 'response.text.delta', delta: 'Hello' });
    expect(
      unmute({ type: 'response.output_audio_transcript.done', ...at, transcript: 'Hello there' }),
    ).toEqual({ type: 'response.text.done', text: 'Hello there' });
  });

  it('sends the user transcript with its start_time, 0 when the session gave none', () => {
    const delta = {
      type: 'conversation.item.input_audio_transcription.delta',
      item_id: 'item_1',
      content_index: 0,
      delta: 'hi',
    } as const;
    expect(unmute(delta)).toEqual({ type: delta.type, delta: 'hi', start_time: 0 });
    expect(unmute({ ...delta, start_time: 1.25 })).toEqual({
      type: delta.type,
      delta: 'hi',
      start_time: 1.25,
    });
  });

  it('passes VAD events, errors and the unmute.* events through', () => {
    const events: ServerEvent[] = [
      { type: 'input_audio_buffer.speech_started', audio_start_ms: 10, item_id: 'item_1' },
      { type: 'input_audio_buffer.speech_stopped', audio_end_ms: 900, item_id: 'item_1' },
      {
        type: 'error',
        error: {
          type: 'invalid_request_error',
          code: 'x',
          message: 'm',
          param: null,
          event_id: null,
        },
      },
      { type: 'unmute.response.text.delta.ready', delta: 'Hel' },
      { type: 'unmute.interrupted_by_vad' },
    ];
    for (const event of events) expect(unmute(event)).toEqual(event);
  });

  it('sends spoken text without the spaces around it, as its backend sends TTS words', () => {
    const at = { response_id: 'r', item_id: 'i', output_index: 0, content_index: 0 };
    const delta = (d: string) =>
      unmute({ type: 'response.output_audio_transcript.delta', ...at, delta: d });
    expect(delta(' there,')).toMatchObject({ type: 'response.text.delta', delta: 'there,' });
    expect(delta('Hello ')).toMatchObject({ delta: 'Hello' });
    expect(delta(' ')).toBeNull();
  });

  it("fills additional_outputs' debug_dict with the last response's timings", () => {
    const encoder = createEncoder('unmute');
    const history: ServerEvent = {
      type: 'unmute.additional_outputs',
      args: { chat_history: [{ role: 'user', content: 'hi' }] },
    };
    expect(unmute(history, encoder)).toMatchObject({
      args: {
        chat_history: [{ role: 'user', content: 'hi' }],
        debug_dict: { timing: {}, responses: 0 },
      },
    });
    const troupe = {
      character: 'plain',
      variant: 'default',
      ttft_ms: 120,
      llm_ttft_ms: 80,
      first_audio_ms: 300,
      duration_ms: 900,
      tool_rounds: 0,
      llm_requests: 1,
      rounds: [],
      tools: [],
    };
    encoder.encode({
      type: 'response.done',
      response: {
        object: 'realtime.response',
        id: 'resp_1',
        status: 'completed',
        status_details: null,
        output: [],
        output_modalities: ['audio'],
        usage: null,
        metadata: null,
        troupe,
      },
    });
    expect(unmute(history, encoder)).toMatchObject({
      args: {
        debug_dict: {
          timing: { to_first_token: 0.08, to_first_text: 0.12, tts_audio: 0.3, total: 0.9 },
          responses: 1,
          conversation_state: 'waiting_for_user',
          troupe: { response: 'resp_1', status: 'completed', ttft_ms: 120 },
        },
      },
    });
  });

  it('sends errors about ignored bridge events as warnings, which the frontend only logs', () => {
    const error = {
      type: 'invalid_request_error',
      code: 'ignored_event',
      message: 'm',
      param: 'type',
      event_id: null,
    } as const;
    expect(unmute({ type: 'error', error })).toEqual({
      type: 'error',
      error: { ...error, type: 'warning' },
    });
  });

  it('reports a failed transcription as an error', () => {
    expect(
      unmute({
        type: 'conversation.item.input_audio_transcription.failed',
        item_id: 'item_1',
        content_index: 0,
        error: { type: 'stt_error', code: 'E_STT', message: 'pocketsphinx stopped' },
      }),
    ).toMatchObject({ type: 'error', error: { code: 'E_STT', message: 'pocketsphinx stopped' } });
  });

  it("shows response.created in Unmute's shape, naming the character as the voice", () => {
    const encoder = createEncoder('unmute', { character: 'plain' });
    const response: ResponseObject = {
      object: 'realtime.response',
      id: 'resp_1',
      status: 'in_progress',
      status_details: null,
      output: [],
      output_modalities: ['audio'],
      usage: null,
      metadata: null,
    };
    expect(unmute({ type: 'response.created', response }, encoder)).toEqual({
      type: 'response.created',
      response: {
        object: 'realtime.response',
        status: 'in_progress',
        voice: 'plain',
        chat_history: [],
      },
    });
    // After a character change, the new one.
    unmute({ type: 'session.updated', session: { ...session, character: 'weather' } }, encoder);
    expect(unmute({ type: 'response.created', response }, encoder)).toMatchObject({
      response: { voice: 'weather' },
    });
  });

  it("shows session.updated in Unmute's shape, with the allow_recording the client sent", () => {
    const encoder = createEncoder('unmute');
    expect(unmute({ type: 'session.updated', session }, encoder)).toEqual({
      type: 'session.updated',
      session: {
        instructions: { type: 'constant', text: 'Be brief.' },
        voice: 'plain',
        allow_recording: false,
      },
    });
    encoder.observe({ allow_recording: true });
    expect(unmute({ type: 'session.updated', session }, encoder)).toMatchObject({
      session: { allow_recording: true },
    });
  });

  it('sends none of the events Unmute does not know', () => {
    const item: Item = {
      id: 'item_1',
      object: 'realtime.item',
      type: 'message',
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'Hi' }],
    };
    const dropped: ServerEvent[] = [
      { type: 'session.created', session },
      { type: 'conversation.item.added', previous_item_id: null, item },
      { type: 'conversation.item.done', previous_item_id: null, item },
      { type: 'conversation.item.deleted', item_id: 'item_1' },
      { type: 'response.output_item.added', response_id: 'resp_1', output_index: 0, item },
      { type: 'response.content_part.added', ...at, part: { type: 'output_text', text: '' } },
      { type: 'response.output_text.delta', ...at, delta: 'Hi' },
      { type: 'response.output_text.done', ...at, text: 'Hi' },
      { type: 'response.function_call_arguments.delta', ...at, call_id: 'c', delta: '{' },
      {
        type: 'troupe.tool_call.result',
        ...at,
        call_id: 'c',
        name: 'get_time',
        outcome: 'ok',
        output: '12:00',
        duration_ms: 3,
      },
      { type: 'input_audio_buffer.committed', previous_item_id: null, item_id: 'item_1' },
      {
        type: 'response.done',
        response: {
          object: 'realtime.response',
          id: 'resp_1',
          status: 'completed',
          status_details: null,
          output: [item],
          output_modalities: ['audio'],
          usage: null,
          metadata: null,
        },
      },
    ];
    for (const event of dropped) expect(unmute(event), event.type).toBeNull();
  });
});

describe('unmute session.update', () => {
  it("takes Unmute's frontend update: the voice names the character", () => {
    const event = parse(
      update({
        instructions: { type: 'constant', text: 'Concise.', character: 'plain' },
        voice: 'plain',
        allow_recording: false,
      }),
    );
    expect(event).toEqual({
      type: 'session.update',
      session: { character: 'plain', instructions: '', allow_recording: false },
    });
  });

  it('keeps the character\'s own prompt ("") for instructions from the voice list or Unmute\'s built-ins', () => {
    for (const instructions of [
      { type: 'constant', text: 'Concise.', character: 'plain', language: 'en' },
      { type: 'smalltalk', language: 'en/fr' },
      { type: 'quiz_show' },
      { type: 'domestic_robot', text: 'Keep it short.' },
    ]) {
      const event = parse(update({ instructions, voice: 'plain', allow_recording: true }));
      expect(event).toMatchObject({ session: { instructions: '' } });
    }
  });

  it('takes text the user typed (a constant without character, or a string) as the prompt', () => {
    expect(
      parse(
        update({
          instructions: { type: 'constant', text: 'Talk like a pirate.', language: 'en/fr' },
          voice: 'plain',
          allow_recording: false,
        }),
      ),
    ).toMatchObject({ session: { instructions: 'Talk like a pirate.', character: 'plain' } });
    expect(parse(update({ instructions: 'Be terse.', allow_recording: false }))).toEqual({
      type: 'session.update',
      session: { instructions: 'Be terse.', allow_recording: false },
    });
  });

  it('leaves the character and prompt alone when voice and instructions are null', () => {
    expect(parse(update({ instructions: null, voice: null, allow_recording: true }))).toEqual({
      type: 'session.update',
      session: { allow_recording: true },
    });
  });

  it('refuses a constant without text, naming the field', () => {
    expect(
      refuse(
        update({ instructions: { type: 'constant' }, voice: 'plain', allow_recording: false }),
      ),
    ).toMatchObject({
      code: 'missing_required_parameter',
      param: 'session.instructions.text',
    });
  });

  it('refuses fields Unmute does not send, and instructions of the wrong type', () => {
    expect(refuse(update({ allow_recording: false, tools: [] }))).toMatchObject({
      code: 'unknown_parameter',
      param: 'session.tools',
    });
    expect(refuse(update({ allow_recording: 'yes' }))).toMatchObject({
      code: 'invalid_value',
      param: 'session.allow_recording',
    });
    expect(refuse(update({ instructions: 42 }))).toMatchObject({
      param: 'session.instructions',
    });
  });

  it('takes the other client events as in the openai dialect, Ogg/Opus appends included', () => {
    expect(parse({ type: 'input_audio_buffer.append', audio: 'T2dnUwACAAAA' })).toEqual({
      type: 'input_audio_buffer.append',
      audio: 'T2dnUwACAAAA',
    });
    expect(parse({ type: 'response.create' })).toEqual({ type: 'response.create' });
  });

  it('answers bridge.* events with an ignored_event error that says what to do instead', () => {
    const error = refuse({ type: 'bridge.pause_session', reason: 'ui_disconnect_pause' });
    expect(error).toMatchObject({ code: 'ignored_event', param: 'type' });
    expect(error.message).toContain('bridge.pause_session');
    expect(error.message).toMatch(/close the socket/);
  });

  it('refuses unmute.input_audio_buffer.append_pcm, pointing to Ogg/Opus or the openai dialect', () => {
    const error = refuse({ type: 'unmute.input_audio_buffer.append_pcm', audio: 'AAAA' });
    expect(error).toMatchObject({ code: 'unsupported_event', param: 'type' });
    expect(error.message).toMatch(/input_audio_buffer\.append/);
    expect(error.message).toMatch(/dialect=openai/);
  });

  it('still refuses Unmute fields and bridge events in the openai dialect', () => {
    const parsed = parseClientEvent(
      JSON.stringify(update({ instructions: { type: 'smalltalk' }, allow_recording: true })),
    );
    expect(parsed.ok).toBe(false);
    const bridge = parseClientEvent('{"type":"bridge.reset_session"}');
    expect(!bridge.ok && bridge.error.wireCode).toBe('unknown_event_type');
  });
});

describe('detectDialect', () => {
  it('says unmute for a session.update carrying allow_recording, or a bridge.* event', () => {
    expect(detectDialect(JSON.stringify(update({ voice: 'x', allow_recording: false })))).toBe(
      'unmute',
    );
    expect(detectDialect('{"type":"bridge.resume_session","reason":"ui_connect_resume"}')).toBe(
      'unmute',
    );
  });

  it('says openai for any other session.update', () => {
    expect(detectDialect(JSON.stringify(update({ instructions: 'Hi' })))).toBe('openai');
  });

  it('says nothing about other frames, broken ones included', () => {
    for (const frame of [
      '{"type":"input_audio_buffer.append","audio":"AAAA"}',
      '{"type":"response.create"}',
      'session.update {',
      '["session.update"]',
      '{"type":"conversation.item.create","item":{"text":"session.update"}}',
    ]) {
      expect(detectDialect(frame), frame).toBeUndefined();
    }
  });
});

describe('unmuteVoiceList', () => {
  it('makes every character a voice whose path_on_server is its id', () => {
    const [voice] = unmuteVoiceList([
      { id: 'plain', name: 'Plain', description: 'Concise.', voice: { espeak: 'en-us' } },
    ]);
    expect(voice).toEqual({
      name: 'Plain',
      good: true,
      instructions: { type: 'constant', text: 'Concise.', character: 'plain' },
      source: { source_type: 'file', path_on_server: 'plain', description: 'Concise.' },
    });
  });

  it('names the Kyutai voice, keeps Unmute languages only, and keeps names unique', () => {
    const voices = unmuteVoiceList([
      { id: 'a', name: 'Twin', voice: { kyutai: 'expresso/happy.wav' }, language: 'fr' },
      { id: 'b', name: 'Twin', language: 'de' },
    ]);
    expect(voices.map((v) => v.name)).toEqual(['Twin (a)', 'Twin (b)']);
    expect(voices[0]!.source.description).toContain('expresso/happy.wav');
    expect(voices[0]!.instructions.language).toBe('fr');
    expect(voices[1]!.instructions).not.toHaveProperty('language');
  });

  it('gives instructions that parse back as "the character\'s own prompt"', () => {
    const [voice] = unmuteVoiceList([{ id: 'plain', name: 'Plain' }]);
    const event = parse(
      update({
        instructions: voice!.instructions,
        voice: voice!.source.path_on_server,
        allow_recording: false,
      }),
    );
    expect(event).toEqual({
      type: 'session.update',
      session: { character: 'plain', instructions: '', allow_recording: false },
    });
  });
});
