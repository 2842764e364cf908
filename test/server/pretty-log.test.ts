import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/server/logger.js';
import { createPrettyStream, prettyLine } from '../../src/server/pretty-log.js';

describe('pretty log lines', () => {
  it('put the time, the level and the message first, then the fields', () => {
    const line = JSON.stringify({
      level: 30,
      time: Date.UTC(2026, 0, 2, 15, 30, 12),
      service: 'troupe',
      msg: 'server listening',
      url: 'http://127.0.0.1:8080',
      characters: 5,
      note: 'two words',
    });
    expect(prettyLine(line)).toBe(
      '15:30:12 INFO  server listening url=http://127.0.0.1:8080 characters=5 note="two words"',
    );
  });

  it('show an error as its type and message, with the stack for errors', () => {
    const line = JSON.stringify({
      level: 50,
      time: 0,
      msg: 'tool failed',
      err: { type: 'TypeError', message: 'boom', stack: 'TypeError: boom\n    at x (y.ts:1:2)' },
    });
    expect(prettyLine(line)).toBe(
      '00:00:00 ERROR tool failed err="TypeError: boom"\n    TypeError: boom\n    at x (y.ts:1:2)',
    );
  });

  it('pass a line that is not JSON through unchanged', () => {
    expect(prettyLine('plain text {')).toBe('plain text {');
  });

  it('come out of the logger line by line, whatever the chunks', () => {
    const written: string[] = [];
    const log = createLogger(
      { level: 'info', content: false },
      { write: (s: string) => void written.push(s) },
      { pretty: true },
    );
    log.warn({ llm: 'http://127.0.0.1:9/v1', error: 'bad port' }, 'llm does not answer');
    expect(written).toHaveLength(1);
    expect(written[0]).toMatch(
      /^\d\d:\d\d:\d\d WARN {2}llm does not answer llm=http:\/\/127\.0\.0\.1:9\/v1 error="bad port"\n$/,
    );
    const sink: string[] = [];
    const stream = createPrettyStream({ write: (s: string) => sink.push(s) });
    stream.write('{"level":30,"time":0,"msg":"a"}\n{"level":30,');
    stream.write('"time":0,"msg":"b"}\n');
    expect(sink).toEqual(['00:00:00 INFO  a\n', '00:00:00 INFO  b\n']);
  });
});
