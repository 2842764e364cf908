/**
 * Manual turn taking (`turn_detection: null`): the client appends audio and
 * commits it; the server neither detects speech nor answers on its own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScriptedStt, type ScriptedStt } from '../../src/testing/index.js';
import { sendAudio, silence, speech } from '../helpers/audio.js';
import type { TestServer } from '../helpers/server.js';
import { metricValue, scrape } from '../helpers/http.js';
import { chatBodies, lastChat, nextError, userMessage } from '../helpers/session.js';
import {
  audioMs,
  barrier,
  fakeVoice,
  openVoiceSession,
  speak,
  spokenText,
  startVoiceServer,
  typesOf,
} from '../helpers/voice.js';

const HEARD = 'This is a manual turn.';
const ANSWER = 'Manual turn answered.';

let t: TestServer;

beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice({ transcripts: () => HEARD }),
    script: { rules: [{ when: { user: 'manual turn' }, reply: { parts: [{ text: ANSWER }] } }] },
  });
});
afterAll(() => t?.close());

/** A spoken session that commits its own turns. */
function manualSession() {
  return openVoiceSession(t, 'character=quiet', {
    output_modalities: ['audio'],
    audio: { input: { turn_detection: null } },
  });
}

describe('turn_detection null', () => {
  it('is echoed by session.updated', async () => {
    const c = await manualSession();
    const updated = c.events.findLast((e) => e.type === 'session.updated')!;
    const session = updated.session as { audio: { input: { turn_detection: unknown } } };
    expect(session.audio.input.turn_detection).toBeNull();
    await c.close();
  });

  it('sends no VAD events, and a commit transcribes the audio without answering it', async () => {
    const c = await manualSession();
    const from = c.events.length;
    await speak(c, 'this is a manual turn');
    await barrier(c);
    expect(
      typesOf(c.events.slice(from)).filter((e) => e.startsWith('input_audio_buffer.')),
    ).toEqual([]);

    c.send({ type: 'input_audio_buffer.commit' });
    const committed = await c.next('input_audio_buffer.committed');
    const completed = await c.next('conversation.item.input_audio_transcription.completed');
    expect(completed.item_id).toBe(committed.item_id);
    expect(completed.transcript).toBe(HEARD);
    // What the GA types require: the audio transcribed, by its duration.
    expect(completed.usage).toEqual({ type: 'duration', seconds: expect.any(Number) });
    expect((completed.usage as { seconds: number }).seconds).toBeGreaterThan(0.1);
    const done = await c.next('conversation.item.done');
    expect(done.item).toMatchObject({
      id: committed.item_id,
      role: 'user',
      content: [{ type: 'input_audio', transcript: HEARD }],
    });
    // A response would have started at once, before any later event is answered.
    await barrier(c);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    expect(chatBodies(t.simulator).filter((b) => b.messages.at(-1)?.content === HEARD)).toEqual([]);

    c.send({ type: 'response.create' });
    const events = await c.untilDone();
    const response = events.at(-1)!.response as { status: string };
    expect(response.status).toBe('completed');
    expect(spokenText(events)).toBe(ANSWER);
    expect(audioMs(events)).toBeGreaterThan(0);
    expect(lastChat(t.simulator).messages.at(-1)).toEqual({ role: 'user', content: HEARD });
    await c.close();
  });

  it('refuses a commit of less than 100 ms of audio', async () => {
    const c = await manualSession();
    c.send({ type: 'input_audio_buffer.commit', event_id: 'commit-nothing' });
    const empty = await nextError(c, 'input_audio_buffer_commit_empty');
    expect(empty.event_id).toBe('commit-nothing');
    expect(empty.message).toMatch(/0 ms/);

    sendAudio(c, (await speech('hi')).subarray(0, 50 * 24));
    c.send({ type: 'input_audio_buffer.commit' });
    const short = await nextError(c, 'input_audio_buffer_commit_empty');
    expect(short.message).toMatch(/50 ms.*100 ms/);
    await barrier(c);
    expect(c.events.some((e) => e.type === 'input_audio_buffer.committed')).toBe(false);
    await c.close();
  });

  it('says, with server VAD, that silence is not kept in the buffer', async () => {
    const c = await openVoiceSession(t, 'character=quiet', { output_modalities: ['audio'] });
    sendAudio(c, silence(300));
    c.send({ type: 'input_audio_buffer.commit', event_id: 'commit-silence' });
    const error = await nextError(c, 'input_audio_buffer_commit_empty');
    expect(error.event_id).toBe('commit-silence');
    expect(error.message).toMatch(
      /holds 0 ms of speech \(turn detection keeps only .*silence is not kept\)/,
    );
    await c.close();
  });

  it('drops the buffer on input_audio_buffer.clear, so the next commit is empty', async () => {
    const c = await manualSession();
    sendAudio(c, silence(500));
    c.send({ type: 'input_audio_buffer.clear' });
    await c.next('input_audio_buffer.cleared');
    c.send({ type: 'input_audio_buffer.commit' });
    await nextError(c, 'input_audio_buffer_commit_empty');

    // The buffer still takes audio after a clear.
    sendAudio(c, silence(300));
    c.send({ type: 'input_audio_buffer.commit' });
    const committed = await c.next('input_audio_buffer.committed');
    const completed = await c.next('conversation.item.input_audio_transcription.completed');
    expect(completed.item_id).toBe(committed.item_id);
    await c.close();
  });
});

/** A scripted engine whose transcripts wait until the test lets each go. */
function heldStt(lines: string[]): { stt: ScriptedStt; release: () => void } {
  const inner = createScriptedStt({ transcripts: ({ index }) => lines[index % lines.length]! });
  const gates: Array<() => void> = [];
  let released = 0;
  const stt: ScriptedStt = {
    ...inner,
    utterances: inner.utterances,
    open(options) {
      const stream = inner.open(options);
      return {
        ...stream,
        async commit() {
          const text = await stream.commit();
          if (released === 0) await new Promise<void>((go) => gates.push(go));
          else released--;
          return text;
        },
      };
    },
  };
  const release = (): void => {
    const go = gates.shift();
    if (go) go();
    else released++;
  };
  return { stt, release };
}

describe('a response.create sent right after the commit', () => {
  const FIRST = 'What is the first question?';
  const SECOND = 'And the second one?';
  let s: TestServer;
  let held: ReturnType<typeof heldStt>;

  beforeAll(async () => {
    held = heldStt([FIRST, SECOND]);
    s = await startVoiceServer({
      voice: await fakeVoice({ stt: held.stt }),
      script: {
        rules: [
          { when: { user: 'second one' }, reply: { parts: [{ text: 'Second answered.' }] } },
          { when: { user: 'first question' }, reply: { parts: [{ text: 'First answered.' }] } },
        ],
      },
    });
  });
  afterAll(() => s?.close());

  it('answers the words it committed, once they are transcribed, not the turn before', async () => {
    const c = await openVoiceSession(s, 'character=quiet', {
      output_modalities: ['text'],
      audio: { input: { turn_detection: null } },
    });
    for (const [line, answer] of [
      [FIRST, 'First answered.'],
      [SECOND, 'Second answered.'],
    ] as const) {
      const from = c.events.length;
      await speak(c, line);
      // A push-to-talk client: the commit and the request in one go, as a GA app sends them.
      c.send({ type: 'input_audio_buffer.commit' });
      c.send({ type: 'response.create' });
      const committed = await c.next('input_audio_buffer.committed');
      await barrier(c);
      held.release();
      const events = await c.untilDone();
      const done = events.at(-1)!.response as {
        status: string;
        output: Array<{ content: Array<{ text: string }> }>;
      };
      expect(done.status).toBe('completed');
      expect(done.output[0]!.content[0]!.text).toBe(answer);
      expect(lastChat(s.simulator).messages.at(-1)).toEqual({ role: 'user', content: line });
      // The transcript is in the conversation before the response reads it.
      const types = typesOf(c.events.slice(from));
      expect(types.indexOf('conversation.item.done')).toBeLessThan(
        types.indexOf('response.created'),
      );
      expect(
        c.events.slice(from).find((e) => e.type === 'conversation.item.done')!.item,
      ).toMatchObject({
        id: committed.item_id,
      });
    }
    await c.close();
  });

  it('is cancelled while it waits for the words, and the words stay', async () => {
    const c = await openVoiceSession(s, 'character=quiet', {
      output_modalities: ['text'],
      audio: { input: { turn_detection: null } },
    });
    const requests = chatBodies(s.simulator).length;
    await speak(c, FIRST);
    c.send({ type: 'input_audio_buffer.commit' });
    c.send({ type: 'response.create' });
    const committed = await c.next('input_audio_buffer.committed');
    await barrier(c);
    c.send({ type: 'response.cancel' });
    await barrier(c);
    held.release();
    const events = await c.untilDone();
    const done = events.at(-1)!.response as { status: string };
    expect(done.status).toBe('cancelled');
    expect(chatBodies(s.simulator).length).toBe(requests);
    const item = c.events.find((e) => e.type === 'conversation.item.done')!.item;
    expect(item).toMatchObject({ id: committed.item_id, status: 'completed' });
    await c.close();
  });
});

describe('a response.create after speech without words', () => {
  let s: TestServer;

  beforeAll(async () => {
    s = await startVoiceServer({ voice: await fakeVoice({ transcripts: () => '' }) });
  });
  afterAll(() => s?.close());

  /** A push-to-talk session that said something without words, committed. */
  async function mumbled() {
    const c = await openVoiceSession(s, 'character=quiet', {
      output_modalities: ['text'],
      audio: { input: { turn_detection: null } },
    });
    await speak(c, 'mumble');
    c.send({ type: 'input_audio_buffer.commit' });
    return c;
  }

  it('is answered empty, saying nothing was heard, without asking the model', async () => {
    const c = await mumbled();
    const requests = chatBodies(s.simulator).length;
    c.send({ type: 'response.create' });
    const committed = await c.next('input_audio_buffer.committed');
    const deleted = await c.next('conversation.item.deleted');
    expect(deleted.item_id).toBe(committed.item_id);
    const created = await c.next('response.created');
    const done = (await c.next('response.done')).response as Record<string, unknown>;
    expect(done).toMatchObject({
      id: (created.response as { id: string }).id,
      status: 'completed',
      output: [],
      metadata: { troupe: 'nothing_heard' },
    });
    expect(chatBodies(s.simulator).length).toBe(requests);
    const metrics = await scrape(s.url);
    expect(
      metricValue(metrics, 'troupe_stt_utterances_without_words_total'),
    ).toBeGreaterThanOrEqual(1);
    await c.close();
  });

  it('is answered the same when the transcript came before the response.create', async () => {
    const c = await mumbled();
    const requests = chatBodies(s.simulator).length;
    await c.next('conversation.item.deleted');
    c.send({ type: 'response.create' });
    const done = (await c.next('response.done')).response as Record<string, unknown>;
    expect(done).toMatchObject({ output: [], metadata: { troupe: 'nothing_heard' } });
    expect(chatBodies(s.simulator).length).toBe(requests);
    // Once something joins the conversation, a response answers it.
    c.send(userMessage('Hello there!'));
    c.send({ type: 'response.create' });
    const answered = (await c.next('response.done')).response as { output: unknown[] };
    expect(answered.output).toHaveLength(1);
    await c.close();
  });
});
