import { describe, expect, it } from 'vitest';
import {
  ChatUsageError,
  DEFAULT_CHAT_URL,
  parseChatArgs,
  resolveChatUrl,
} from '../../src/cli/chat-options.js';

describe('parseChatArgs', () => {
  it('connects to the default URL with the character in the query', () => {
    expect(parseChatArgs(['--character', 'narrator'])).toEqual({
      url: `${DEFAULT_CHAT_URL}?character=narrator`,
      character: 'narrator',
      token: undefined,
      noColor: false,
      help: false,
      voice: false,
      voiceOut: undefined,
      wav: undefined,
      mic: false,
    });
  });

  it('takes the voice flags: --voice, --voice-out FILE, --wav FILE and --mic', () => {
    expect(
      parseChatArgs(['--voice', '--voice-out', 'reply.wav', '--wav', 'question.wav']),
    ).toMatchObject({ voice: true, voiceOut: 'reply.wav', wav: 'question.wav', mic: false });
    expect(parseChatArgs(['--mic', '--voice'])).toMatchObject({ mic: true, voice: true });
  });

  it('takes the short flags, a token and --no-color', () => {
    const options = parseChatArgs(['-c', 'weather', '--token', 's3cret', '--no-color']);
    expect(options).toMatchObject({ character: 'weather', token: 's3cret', noColor: true });
  });

  it('returns help without looking at the other flags', () => {
    expect(parseChatArgs(['-h', '--url', 'ftp://nope']).help).toBe(true);
  });

  it.each([
    [['--colour'], /Unknown option '--colour'/],
    [['--character'], /--character <value>' argument missing/],
    [['narrator'], /Unexpected argument 'narrator'/],
    [['--character', ' '], /--character needs a character id/],
    [['--token', ''], /--token needs a value/],
    [['--url', 'ftp://host'], /must be ws:\/\/, wss:\/\/, http:\/\/, https:\/\/ or host:port/],
    [['--wav'], /--wav <value>' argument missing/],
    [['--wav', ' '], /--wav needs a file name, e\.g\. --wav question\.wav/],
    [['--voice-out', ''], /--voice-out needs a file name/],
    [['--wav', 'q.wav', '--mic'], /--wav and --mic both give the user's speech; use one/],
    [['--voice=yes'], /--voice' does not take an argument/],
  ])('refuses %j with a ChatUsageError that says why', (argv, message) => {
    expect(() => parseChatArgs(argv)).toThrow(ChatUsageError);
    expect(() => parseChatArgs(argv)).toThrow(message);
  });
});

describe('resolveChatUrl', () => {
  it.each([
    ['ws://127.0.0.1:8080/v1/realtime', 'ws://127.0.0.1:8080/v1/realtime'],
    ['http://127.0.0.1:8080', 'ws://127.0.0.1:8080/v1/realtime'],
    ['https://troupe.example/', 'wss://troupe.example/v1/realtime'],
    ['localhost:9000', 'ws://localhost:9000/v1/realtime'],
    ['[::1]:9000', 'ws://[::1]:9000/v1/realtime'],
    ['wss://h/custom/path?dialect=openai', 'wss://h/custom/path?dialect=openai'],
  ])('turns %s into %s', (input, expected) => {
    expect(resolveChatUrl(input)).toBe(expected);
  });

  it('adds the character to an existing query', () => {
    expect(resolveChatUrl('ws://h:1/v1/realtime?dialect=openai', 'quiz master')).toBe(
      'ws://h:1/v1/realtime?dialect=openai&character=quiz+master',
    );
  });

  it('refuses credentials in the URL and points at --token', () => {
    expect(() => resolveChatUrl('http://user:pw@h')).toThrow(/use --token/);
  });
});
