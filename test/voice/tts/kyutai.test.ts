import { afterEach, describe, expect, it } from 'vitest';
import { SpeechProviderError } from '../../../src/errors.js';
import {
  KYUTAI_FRAME_SAMPLES,
  createTtsRecorder,
  startFakeKyutaiTts,
} from '../../../src/testing/fake-tts.js';
import type { FakeKyutaiTts, FakeKyutaiTtsOptions } from '../../../src/testing/fake-tts.js';
import { createKyutaiTts } from '../../../src/voice/tts/kyutai.js';
import type { KyutaiTtsOptions } from '../../../src/voice/tts/kyutai.js';
import type { TtsStream } from '../../../src/voice/types.js';
import { within } from '../../helpers/wait.js';

/** The fake's samples per character (a word lasts its length + 1 characters). */
const PER_CHAR = 240;

const fakes: FakeKyutaiTts[] = [];

async function setup(
  fakeOptions: FakeKyutaiTtsOptions = {},
  ttsOptions: Partial<KyutaiTtsOptions> = {},
  voice?: string,
) {
  const fake = await startFakeKyutaiTts({ samplesPerChar: PER_CHAR, ...fakeOptions });
  fakes.push(fake);
  const tts = createKyutaiTts({ url: fake.url, ...ttsOptions });
  const controller = new AbortController();
  const rec = createTtsRecorder();
  const stream = tts.open({ signal: controller.signal, onEvent: rec.onEvent, voice });
  return { fake, tts, controller, rec, stream };
}

async function speak(stream: TtsStream, ...segments: string[]): Promise<void> {
  for (const segment of segments) stream.push(segment);
  await within(stream.end(), 'the end of the speech');
}

/** Samples the fake makes for these words. */
function lengthOf(...words: string[]): number {
  return words.reduce((n, w) => n + (w.length + 1) * PER_CHAR, 0);
}

afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

describe('Kyutai streaming TTS', () => {
  it('sends the text word by word and gives out the audio frames with word timings', async () => {
    const { fake, tts, rec, stream } = await setup();
    expect(tts.sampleRate).toBe(24_000);
    await speak(stream, 'Hello there.', '  How are   you? ');
    expect(fake.received).toEqual(['Hello', ' there.', ' How', ' are', ' you?']);
    const total = lengthOf('Hello', 'there.', 'How', 'are', 'you?');
    // Whole frames: the last one padded with silence.
    expect(rec.pcm().length).toBe(Math.ceil(total / KYUTAI_FRAME_SAMPLES) * KYUTAI_FRAME_SAMPLES);
    expect(rec.words()).toEqual([
      { text: 'Hello', startSample: 0 },
      { text: 'there.', startSample: lengthOf('Hello') },
      { text: 'How', startSample: lengthOf('Hello', 'there.') },
      { text: 'are', startSample: lengthOf('Hello', 'there.', 'How') },
      { text: 'you?', startSample: lengthOf('Hello', 'there.', 'How', 'are') },
    ]);
    expect(rec.error()).toBeUndefined();
  });

  it('asks for words and sends each one as it is pushed, before the clause is complete', async () => {
    const { fake, tts, rec, stream } = await setup();
    expect(tts.segmentUnit).toBe('word');
    stream.push('Hello');
    stream.push('there,');
    // Both words are on their way before the sentence (or even the clause) ends.
    await within(
      (async () => {
        while (fake.received.length < 2) await new Promise((r) => setTimeout(r, 5));
      })(),
      'the first two words at the server',
    );
    expect(fake.received).toEqual(['Hello', ' there,']);
    await speak(stream, 'friend.');
    expect(rec.segments().map((s) => s.text)).toEqual(['Hello', 'there,', 'friend.']);
    expect(rec.error()).toBeUndefined();
  });

  it('places each segment’s text where the server says its first word starts', async () => {
    const { rec, stream } = await setup();
    await speak(stream, 'Hello there.', 'How are you?');
    expect(rec.segments()).toEqual([
      { text: 'Hello there.', startSample: 0 },
      { text: 'How are you?', startSample: lengthOf('Hello', 'there.') },
    ]);
    // And each word right after the chunk its speech starts in.
    let heard = 0;
    for (const event of rec.events) {
      if (event.type === 'audio') heard += event.pcm.length;
      if (event.type === 'word') expect(event.startSample).toBeLessThan(heard);
    }
  });

  it('asks for the voice, PCM msgpack and Unmute’s cfg_alpha, with the public key by default', async () => {
    const { fake, stream } = await setup({}, {}, 'expresso/ex03-ex01_happy_001_channel1_334s.wav');
    await speak(stream, 'Hi.');
    const query = fake.queries[0]!;
    expect(query.get('voice')).toBe('expresso/ex03-ex01_happy_001_channel1_334s.wav');
    expect(query.get('format')).toBe('PcmMessagePack');
    expect(query.get('cfg_alpha')).toBe('1.5');
  });

  it('waits for Ready before sending any text', async () => {
    const { fake, rec, stream } = await setup({ readyDelayMs: 50 });
    await speak(stream, 'Sent before Ready.');
    expect(fake.received).toEqual(['Sent', ' before', ' Ready.']);
    expect(rec.texts()).toEqual(['Sent before Ready.']);
  });

  it('reports a refused connection with its status and the server’s words', async () => {
    const { rec, stream } = await setup({ failWith: { status: 503, message: 'no free slot' } });
    await speak(stream, 'Hello.');
    const error = rec.error();
    expect(error).toBeInstanceOf(SpeechProviderError);
    expect(error?.message).toMatch(/503/);
    expect(error?.message).toMatch(/no free slot/);
    expect((error as SpeechProviderError).retryable).toBe(true);
    expect(rec.events.map((e) => e.type)).toEqual(['error']);
  });

  it('says to check the key when the server refuses it', async () => {
    const { rec, stream } = await setup({ apiKey: 'secret' }, { apiKey: 'wrong' });
    await speak(stream, 'Hello.');
    expect(rec.error()?.message).toMatch(/401/);
    expect(rec.error()?.message).toMatch(/kyutai-api-key/);
  });

  it('reports an Error message from the server and gives out nothing after it', async () => {
    const { rec, stream } = await setup({ failWith: { message: 'model crashed', afterWords: 2 } });
    await speak(stream, 'One two three four.');
    expect(rec.error()?.message).toMatch(/model crashed/);
    expect(rec.events.at(-1)?.type).toBe('error');
  });

  it('reports an Error sent instead of Ready (server at capacity)', async () => {
    const { rec, stream } = await setup({ failWith: { message: 'at capacity', afterWords: 0 } });
    await speak(stream, 'Hello.');
    expect(rec.error()?.message).toMatch(/at capacity/);
  });

  it('reports a connection dropped before the end', async () => {
    const { rec, stream } = await setup({ failWith: { drop: true, afterWords: 2 } });
    await speak(stream, 'One two three four.');
    expect(rec.error()?.message).toMatch(/closed the stream early|Could not talk/);
  });

  it('reports an unreachable server clearly', async () => {
    const fake = await startFakeKyutaiTts();
    await fake.close();
    const rec = createTtsRecorder();
    const stream = createKyutaiTts({ url: fake.url }).open({
      signal: new AbortController().signal,
      onEvent: rec.onEvent,
    });
    await speak(stream, 'Anyone?');
    expect(rec.error()?.message).toMatch(/ECONNREFUSED/);
  });

  it('stops at once when the signal fires mid-stream, and no event follows', async () => {
    const { fake, tts, controller, rec } = await setup({ samplesPerChar: 4_000 });
    let eventsAtAbort = -1;
    const stream = tts.open({
      signal: controller.signal,
      onEvent: (e) => {
        rec.onEvent(e);
        if (e.type === 'audio' && eventsAtAbort < 0) {
          eventsAtAbort = rec.events.length;
          controller.abort();
        }
      },
    });
    stream.push('Many long words that nobody will hear to the very end of them.');
    await within(stream.end(), 'end() after the abort');
    // A whole other answer through the same server: any late event of the
    // aborted stream would have arrived meanwhile.
    const other = createTtsRecorder();
    await speak(
      tts.open({ signal: new AbortController().signal, onEvent: other.onEvent }),
      'Next.',
    );
    expect(other.texts()).toEqual(['Next.']);
    expect(rec.events).toHaveLength(eventsAtAbort);
    expect(fake.received.length).toBeGreaterThan(0);
  });

  it('ends at once, without waiting for the server, when nothing was said', async () => {
    const { rec, stream } = await setup();
    stream.push(' ');
    await within(stream.end(), 'end() of an empty stream');
    expect(rec.events).toEqual([]);
  });

  it('is healthy when /api/build_info answers, and says why not otherwise', async () => {
    const { fake, tts } = await setup();
    expect(await tts.health()).toMatchObject({ ok: true });
    await fake.close();
    const health = await tts.health();
    expect(health.ok).toBe(false);
    expect(health.detail).toMatch(/build_info/);
  });
});
