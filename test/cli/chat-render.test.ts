import { describe, expect, it } from 'vitest';
import {
  announcesGreeting,
  createChatRenderer,
  describeClose,
  describeConnectError,
  describeRejectedUpgrade,
  formatDuration,
  isAssistantMessage,
  parseServerEvent,
  shorten,
  type ChatRenderer,
  type Output,
  type ServerEvent,
} from '../../src/cli/chat-render.js';

const SESSION: ServerEvent = {
  type: 'session.created',
  event_id: 'ev_1',
  session: {
    id: 'sess_1',
    character: 'weather',
    troupe: { character: { id: 'weather', name: 'Weather', tools: ['get_current_weather'] } },
  },
};

const greeting = (type: string): ServerEvent => ({
  type,
  item: {
    id: 'item_greet',
    type: 'message',
    role: 'assistant',
    content: [{ type: 'output_text', text: 'Hi! Ask me about the weather anywhere.' }],
  },
});

/** Feeds events in order; returns what went to stdout and to stderr. */
function play(events: ServerEvent[], renderer: ChatRenderer = createChatRenderer()) {
  const outputs: Output[] = events.flatMap((e) => renderer.render(e));
  const text = (stream: Output['stream']) =>
    outputs
      .filter((o) => o.stream === stream)
      .map((o) => o.text)
      .join('');
  return { stdout: text('stdout'), stderr: text('stderr'), renderer };
}

const delta = (text: string, item = 'msg_1'): ServerEvent => ({
  type: 'response.output_text.delta',
  item_id: item,
  content_index: 0,
  delta: text,
});

/** A weather turn as Troupe sends it: text, a tool call, its result, more text. */
const WEATHER_TURN: ServerEvent[] = [
  { type: 'response.created', response: { id: 'resp_1', status: 'in_progress' } },
  {
    type: 'response.output_item.added',
    item: { id: 'msg_1', type: 'message', role: 'assistant', content: [] },
  },
  {
    type: 'conversation.item.added',
    item: { id: 'msg_1', type: 'message', role: 'assistant', content: [] },
  },
  delta('Checking '),
  delta('Glasgow. '),
  {
    type: 'response.output_text.done',
    item_id: 'msg_1',
    content_index: 0,
    text: 'Checking Glasgow. ',
  },
  {
    type: 'conversation.item.done',
    item: {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'Checking Glasgow. ' }],
    },
  },
  {
    type: 'response.output_item.added',
    item: {
      id: 'fc_1',
      type: 'function_call',
      call_id: 'call_1',
      name: 'get_current_weather',
      arguments: '',
    },
  },
  {
    type: 'response.function_call_arguments.delta',
    item_id: 'fc_1',
    call_id: 'call_1',
    delta: '{"location": "Glasgow, Scotland",',
  },
  {
    type: 'response.function_call_arguments.done',
    item_id: 'fc_1',
    call_id: 'call_1',
    name: 'get_current_weather',
    arguments: '{"location": "Glasgow, Scotland", "format": "celsius"}',
  },
  {
    type: 'response.output_item.done',
    item: {
      id: 'fc_1',
      type: 'function_call',
      call_id: 'call_1',
      name: 'get_current_weather',
      arguments: '{"location": "Glasgow, Scotland", "format": "celsius"}',
    },
  },
  {
    type: 'troupe.tool_call.result',
    call_id: 'call_1',
    name: 'get_current_weather',
    outcome: 'ok',
    output:
      '{"location":"Glasgow, Scotland","format":"celsius","temperature":12,"conditions":"light rain"}',
    duration_ms: 1.234,
  },
  delta("That's the weather ", 'msg_2'),
  delta('in Glasgow right now.', 'msg_2'),
  { type: 'response.output_text.done', item_id: 'msg_2', content_index: 0, text: '' },
  {
    type: 'response.done',
    response: { id: 'resp_1', status: 'completed', troupe: { ttft_ms: 12, tool_rounds: 1 } },
  },
];

describe('the chat renderer', () => {
  it('names the character from session.created and prints the greeting once', () => {
    const { stdout } = play([
      SESSION,
      greeting('conversation.item.added'),
      greeting('conversation.item.done'),
    ]);
    expect(stdout).toBe(
      'connected to Weather (weather), session sess_1\n' +
        'Weather: Hi! Ask me about the weather anywhere.\n',
    );
  });

  it('takes the name from an inline character object or a bare id too', () => {
    const inline = play([
      { type: 'session.created', session: { character: { id: 'quiz', name: 'Quizmaster' } } },
    ]);
    expect(inline.renderer.characterName).toBe('Quizmaster');
    const bare = play([{ type: 'session.created', session: { character: 'plain' } }]);
    expect(bare.stdout).toBe('connected to plain\n');
  });

  it('streams the reply under the character name and puts each tool call on its own lines', () => {
    const { stdout, stderr } = play([SESSION, ...WEATHER_TURN]);
    expect(stderr).toBe('');
    expect(stdout.split('\n')).toEqual([
      'connected to Weather (weather), session sess_1',
      'Weather: Checking Glasgow. ',
      '  [tool] get_current_weather {"location":"Glasgow, Scotland","format":"celsius"}',
      '  [tool] get_current_weather → ok in 1.2 ms: ' +
        '{"location":"Glasgow, Scotland","format":"celsius","temperature":12,"conditions":"light rain"}',
      "Weather: That's the weather in Glasgow right now.",
      '',
    ]);
  });

  it("shows a server-run tool sent as GA's mcp_call item on the same two lines", () => {
    const args = '{"location": "Glasgow, Scotland", "format": "celsius"}';
    const output = '{"temperature":12}';
    const mcp = (extra: object) => ({
      id: 'mcp_1',
      type: 'mcp_call',
      server_label: 'weather',
      name: 'get_current_weather',
      error: null,
      approval_request_id: null,
      ...extra,
    });
    const turn: ServerEvent[] = [
      { type: 'response.created', response: { id: 'resp_1', status: 'in_progress' } },
      { type: 'response.output_item.added', item: mcp({ arguments: '', output: null }) },
      { type: 'conversation.item.added', item: mcp({ arguments: '', output: null }) },
      { type: 'response.mcp_call_arguments.delta', item_id: 'mcp_1', delta: args },
      { type: 'response.mcp_call_arguments.done', item_id: 'mcp_1', arguments: args },
      { type: 'response.mcp_call.in_progress', item_id: 'mcp_1', output_index: 0 },
      { type: 'response.mcp_call.completed', item_id: 'mcp_1', output_index: 0 },
      {
        type: 'troupe.tool_call.result',
        item_id: 'mcp_1',
        call_id: 'call_1',
        name: 'get_current_weather',
        outcome: 'ok',
        output,
        duration_ms: 2,
      },
      { type: 'response.output_item.done', item: mcp({ arguments: args, output }) },
      { type: 'conversation.item.done', item: mcp({ arguments: args, output }) },
      { type: 'response.done', response: { id: 'resp_1', status: 'completed' } },
    ];
    const { stdout, stderr } = play([SESSION, ...turn]);
    expect(stderr).toBe('');
    expect(stdout.split('\n')).toEqual([
      'connected to Weather (weather), session sess_1',
      '  [tool] get_current_weather {"location":"Glasgow, Scotland","format":"celsius"}',
      `  [tool] get_current_weather → ok in 2.0 ms: ${output}`,
      '',
    ]);
  });

  it('does not repeat a reply when its history item arrives during the response', () => {
    const { stdout } = play([SESSION, ...WEATHER_TURN]);
    expect(stdout.match(/Checking Glasgow/g)).toHaveLength(1);
  });

  it('prints the whole text from .done when no delta carried it', () => {
    const { stdout } = play([
      { type: 'response.created', response: {} },
      { type: 'response.output_text.done', item_id: 'm', content_index: 0, text: 'All at once.' },
      { type: 'response.done', response: { status: 'completed' } },
    ]);
    expect(stdout).toBe('assistant: All at once.\n');
  });

  it('shows audio transcripts and beta text events like text', () => {
    const { stdout } = play([
      { type: 'response.created', response: {} },
      { type: 'response.output_audio_transcript.delta', item_id: 'a', delta: 'Spoken ' },
      { type: 'response.text.delta', item_id: 'a', delta: 'words.' },
      { type: 'response.done', response: { status: 'completed' } },
    ]);
    expect(stdout).toBe('assistant: Spoken words.\n');
  });

  it('shows the call line from the result when the arguments never came', () => {
    const { stdout } = play([
      { type: 'response.created', response: {} },
      {
        type: 'troupe.tool_call.result',
        call_id: 'c',
        name: 'score',
        outcome: 'error',
        output: 'no quiz is running; call start_quiz to begin one',
        duration_ms: 25,
      },
    ]);
    expect(stdout).toBe(
      '  [tool] score {}\n' +
        '  [tool] score → error in 25 ms: no quiz is running; call start_quiz to begin one\n',
    );
  });

  it('cuts long tool output to one short line', () => {
    const { stdout } = play([
      {
        type: 'troupe.tool_call.result',
        call_id: 'c',
        name: 'forecast',
        outcome: 'ok',
        output: JSON.stringify({ days: Array.from({ length: 14 }, (_, day) => ({ day })) }),
        duration_ms: 1500,
      },
    ]);
    const result = stdout.split('\n')[1]!;
    expect(result).toMatch(/^ {2}\[tool\] forecast → ok in 1\.5 s: \{"days":.*…$/);
    expect(result.length).toBeLessThan(160);
  });

  it("keeps a failed call's whole output, and every output when previews are not cut (piped)", () => {
    const long = `${'x'.repeat(150)} the key part at the end`;
    const failed = play([
      { type: 'troupe.tool_call.result', call_id: 'c', name: 'f', outcome: 'error', output: long },
    ]);
    expect(failed.stdout).toContain('the key part at the end');
    const output = JSON.stringify({ days: Array.from({ length: 14 }, (_, day) => ({ day })) });
    const renderer = createChatRenderer({ cutPreviews: false });
    const text = renderer
      .render({
        type: 'troupe.tool_call.result',
        call_id: 'c',
        name: 'forecast',
        outcome: 'ok',
        output,
      })
      .map((o) => o.text)
      .join('');
    expect(text).toContain(output);
    expect(text).not.toContain('…');
  });

  it('prints an error about the audio already sent once, says the repeats are not shown, and shows other errors', () => {
    const refused = (n: number): ServerEvent => ({
      type: 'error',
      error: { code: 'audio_not_supported', message: 'no audio', event_id: `evt_audio_${n}` },
    });
    const { stderr } = play([
      refused(1),
      refused(2),
      refused(3),
      refused(4),
      { type: 'error', error: { code: 'rate_limited', message: 'slow down' } },
    ]);
    expect(stderr).toBe(
      'error [audio_not_supported]: no audio\n' +
        '(the same audio_not_supported error for the audio already sent is not repeated)\n' +
        'error [rate_limited]: slow down\n',
    );
  });

  it('says (cancelled) and other unfinished statuses when a response ends early', () => {
    const cancelled = play([
      { type: 'response.created', response: {} },
      delta('Once upon'),
      { type: 'response.done', response: { status: 'cancelled' } },
    ]);
    expect(cancelled.stdout).toBe('assistant: Once upon\n(cancelled)\n');
    const failed = play([
      { type: 'response.created', response: {} },
      {
        type: 'response.done',
        response: {
          status: 'failed',
          status_details: { type: 'failed', error: { message: 'the LLM stream broke' } },
        },
      },
    ]);
    expect(failed.stdout).toBe('(response failed: the LLM stream broke)\n');
  });

  it('sends errors to stderr with their code, ending the open line first', () => {
    const { stdout, stderr } = play([
      { type: 'response.created', response: {} },
      delta('Half a'),
      {
        type: 'error',
        error: {
          type: 'invalid_request_error',
          code: 'unknown_character',
          message: 'No character "nobody".',
          param: 'character',
          event_id: null,
        },
      },
      delta(' sentence.'),
    ]);
    expect(stderr).toBe('error [unknown_character]: No character "nobody". (param: character)\n');
    // The reply resumes on a new line, under the name again.
    expect(stdout).toBe('assistant: Half a\nassistant: sentence.');
  });

  it('ignores user echoes, tool items in history and events it does not know', () => {
    const { stdout, stderr } = play([
      {
        type: 'conversation.item.added',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
      },
      {
        type: 'conversation.item.done',
        item: { type: 'function_call_output', call_id: 'c', output: '{}' },
      },
      { type: 'input_audio_buffer.cleared' },
      { type: 'rate_limits.updated' },
    ]);
    expect(stdout + stderr).toBe('');
  });

  it('paints only when asked to', () => {
    const plain = play([SESSION, greeting('conversation.item.added')]);
    expect(plain.stdout).not.toContain('\x1b[');
    const colored = play(
      [SESSION, greeting('conversation.item.added')],
      createChatRenderer({ color: true }),
    );
    expect(colored.stdout).toContain('\x1b[1mWeather:\x1b[0m');
  });

  it('echoes piped user lines and closes a half-written line on request', () => {
    const r = createChatRenderer();
    const outputs = [
      ...r.user('Celsius, please.'),
      ...r.render({ type: 'response.created', response: {} }),
      ...r.render(delta('Checking')),
      ...r.endLine(),
      ...r.endLine(),
    ];
    expect(outputs.map((o) => o.text).join('')).toBe(
      'you: Celsius, please.\nassistant: Checking\n',
    );
    expect(r.responding).toBe(true);
  });
});

describe('the chat renderer in a voice session', () => {
  const transcript = (text: string, item = 'msg_1'): ServerEvent => ({
    type: 'response.output_audio_transcript.delta',
    item_id: item,
    content_index: 0,
    delta: text,
  });

  it('shows what the server heard as a "you (spoken):" line between discreet VAD lines', () => {
    const { stdout, stderr } = play([
      SESSION,
      { type: 'input_audio_buffer.speech_started', item_id: 'item_u1', audio_start_ms: 300 },
      { type: 'input_audio_buffer.speech_stopped', item_id: 'item_u1', audio_end_ms: 2_100 },
      { type: 'input_audio_buffer.committed', item_id: 'item_u1' },
      {
        type: 'conversation.item.input_audio_transcription.delta',
        item_id: 'item_u1',
        delta: "what's the weather",
      },
      {
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: 'item_u1',
        content_index: 0,
        transcript: "what's the weather in glasgow",
      },
      { type: 'response.created', response: { id: 'resp_1' } },
      transcript('Sure — in celsius '),
      transcript('or fahrenheit?'),
      { type: 'response.output_audio.delta', item_id: 'msg_1', delta: 'AAAA' },
      { type: 'response.done', response: { status: 'completed' } },
    ]);
    expect(stderr).toBe('');
    expect(stdout).toBe(
      'connected to Weather (weather), session sess_1\n' +
        '  [vad] speech started\n' +
        '  [vad] speech stopped (1.8 s)\n' +
        "you (spoken): what's the weather in glasgow\n" +
        'Weather: Sure — in celsius or fahrenheit?\n',
    );
  });

  it('says when nothing was recognised, and puts a failed transcription on stderr', () => {
    const { stdout, stderr } = play([
      {
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: 'item_u1',
        transcript: '  ',
      },
      {
        type: 'conversation.item.input_audio_transcription.failed',
        item_id: 'item_u2',
        error: { type: 'server_error', code: 'stt_failed', message: 'engine gone' },
      },
    ]);
    expect(stdout).toBe('you (spoken): (no words recognised)\n');
    expect(stderr).toBe('error [stt_failed]: your speech was not understood: engine gone\n');
  });

  it('does not print a spoken greeting twice: once as history, not again as its transcript', () => {
    const { stdout } = play([
      SESSION,
      greeting('conversation.item.added'),
      { type: 'response.created', response: { id: 'resp_greet' } },
      transcript('Hi! Ask me about ', 'item_greet'),
      transcript('the weather anywhere.', 'item_greet'),
      {
        type: 'response.output_audio_transcript.done',
        item_id: 'item_greet',
        transcript: 'Hi! Ask me about the weather anywhere.',
      },
      { type: 'response.done', response: { status: 'completed' } },
    ]);
    expect(stdout.match(/Ask me about/g)).toHaveLength(1);
  });

  it('notes how much of a reply was heard when it is cut short by barge-in', () => {
    const { stdout } = play([
      { type: 'response.created', response: { id: 'resp_1' } },
      transcript('Sure — in celsius'),
      { type: 'input_audio_buffer.speech_started', item_id: 'item_u2', audio_start_ms: 5_000 },
      { type: 'conversation.item.truncated', item_id: 'msg_1', audio_end_ms: 1_250 },
      { type: 'response.done', response: { status: 'cancelled' } },
    ]);
    expect(stdout).toBe(
      'assistant: Sure — in celsius\n' +
        '  [vad] speech started\n' +
        '(reply cut after 1.3 s)\n' +
        '(cancelled)\n',
    );
  });
});

describe('announcesGreeting and isAssistantMessage', () => {
  it('tell the client to wait for a greeting only when the session announces one', () => {
    const created = (greeting: unknown): ServerEvent => ({
      type: 'session.created',
      session: { character: 'x', troupe: { character: { id: 'x', greeting } } },
    });
    expect(announcesGreeting(created('Hello!'))).toBe(true);
    expect(announcesGreeting(created(null))).toBe(false);
    expect(announcesGreeting(created('  '))).toBe(false);
    expect(announcesGreeting({ type: 'session.created', session: { character: 'x' } })).toBe(false);
  });

  it('recognise the greeting item but not user or tool items', () => {
    expect(isAssistantMessage(greeting('conversation.item.added'))).toBe(true);
    expect(
      isAssistantMessage({
        type: 'conversation.item.added',
        item: { type: 'message', role: 'user', content: [] },
      }),
    ).toBe(false);
    expect(
      isAssistantMessage({
        type: 'response.output_item.added',
        item: { type: 'message', role: 'assistant', content: [] },
      }),
    ).toBe(false);
  });
});

describe('parseServerEvent', () => {
  it('accepts JSON objects with a string type and nothing else', () => {
    expect(parseServerEvent('{"type":"response.done","event_id":"e"}')).toEqual({
      type: 'response.done',
      event_id: 'e',
    });
    expect(parseServerEvent('not json')).toBeUndefined();
    expect(parseServerEvent('[1,2]')).toBeUndefined();
    expect(parseServerEvent('{"type":3}')).toBeUndefined();
  });
});

describe('the small formatters', () => {
  it('shorten collapses whitespace and marks a cut with an ellipsis', () => {
    expect(shorten('a\n   b', 10)).toBe('a b');
    expect(shorten('abcdefghij', 5)).toBe('abcd…');
  });

  it('formatDuration reads well from fractions of a millisecond to seconds', () => {
    expect(formatDuration(0.42)).toBe('0.4 ms');
    expect(formatDuration(12.6)).toBe('13 ms');
    expect(formatDuration(2_340)).toBe('2.3 s');
  });
});

describe('describeClose', () => {
  it('explains policy and busy closes in plain words, with the code and reason', () => {
    expect(describeClose(1008, 'invalid token')).toBe(
      'connection closed (1008 invalid token): the server refused the session: ' +
        'authentication failed; pass the right --token',
    );
    expect(describeClose(1008, 'unknown_character')).toMatch(/check --character/);
    expect(describeClose(1008, 'origin https://evil.example not allowed')).toMatch(
      /this origin is not allowed$/,
    );
    expect(describeClose(1008, '')).toMatch(/^connection closed \(1008\): the server refused/);
    expect(describeClose(1013, '')).toMatch(/^connection closed \(1013\): the server is busy/);
    expect(describeClose(4000, 'custom')).toBe('connection closed (4000 custom)');
  });
});

describe('describeConnectError and describeRejectedUpgrade', () => {
  it('names the URL, the system error and what to check', () => {
    const err = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), {
      code: 'ECONNREFUSED',
    });
    expect(describeConnectError('ws://127.0.0.1:9/v1/realtime', err)).toBe(
      'could not connect to ws://127.0.0.1:9/v1/realtime: connect ECONNREFUSED 127.0.0.1:9 ' +
        '(is the server running? Start it with npm start)',
    );
  });

  it('quotes the message of a JSON error body when the upgrade is refused', () => {
    expect(
      describeRejectedUpgrade(
        'ws://h/v1/realtime',
        401,
        'Unauthorized',
        '{"error":{"message":"missing bearer token"}}',
      ),
    ).toBe(
      'could not connect to ws://h/v1/realtime: the server answered HTTP 401 Unauthorized: ' +
        'missing bearer token (pass the right --token)',
    );
    expect(describeRejectedUpgrade('ws://h/x', 404, 'Not Found', '')).toBe(
      'could not connect to ws://h/x: the server answered HTTP 404 Not Found (check the URL path; the endpoint is usually /v1/realtime)',
    );
  });
});
