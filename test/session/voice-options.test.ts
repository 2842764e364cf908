/**
 * `turn_detection` and audio format options of `session.update`: the ones
 * Troupe offers are honoured and echoed, the others refused clearly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { concat, sendAudio, silence, soundBounds, speech } from '../helpers/audio.js';
import type { TestServer } from '../helpers/server.js';
import { SEMANTIC_VAD_SILENCE_MS } from '../../src/protocol/index.js';
import { nextError } from '../helpers/session.js';
import {
  barrier,
  openVoiceSession,
  speak,
  spokenText,
  startStoryServer,
  waitForEvent,
} from '../helpers/voice.js';

const STORY = 'Once upon a time a fox lived by the river. She fished there every morning.';
/** What the scripted STT hears next; it says "hello" when the list is empty. */
const heard: string[] = [];

let t: TestServer;

beforeAll(async () => {
  t = await startStoryServer(STORY, heard);
});
afterAll(() => t?.close());

/** A spoken session with these turn_detection fields. */
async function withTurnDetection(fields: Record<string, unknown>) {
  const c = await openVoiceSession(t, 'character=quiet', {
    output_modalities: ['audio'],
    audio: { input: { turn_detection: { type: 'server_vad', ...fields } } },
  });
  const updated = c.events.findLast((e) => e.type === 'session.updated')!;
  const session = updated.session as { audio: { input: { turn_detection: unknown } } };
  return { c, turnDetection: session.audio.input.turn_detection };
}

describe('turn_detection options', () => {
  it('echoes the effective server_vad settings, defaults filled in', async () => {
    const { c, turnDetection } = await withTurnDetection({
      silence_duration_ms: 1200,
      create_response: false,
    });
    expect(turnDetection).toEqual({
      type: 'server_vad',
      threshold: 0.5,
      prefix_padding_ms: 300,
      silence_duration_ms: 1200,
      create_response: false,
      interrupt_response: true,
      idle_timeout_ms: null,
    });
    await c.close();
  });

  it('ends a turn only after silence_duration_ms of silence', async () => {
    const { c } = await withTurnDetection({ silence_duration_ms: 1500 });
    heard.push('hello');
    const words = await speech('hello there how are you');
    const lead = 300;
    sendAudio(c, concat(silence(lead), words, silence(1000)));
    await c.next('input_audio_buffer.speech_started');
    await barrier(c);
    // 1 s of silence is not enough…
    expect(c.events.some((e) => e.type === 'input_audio_buffer.speech_stopped')).toBe(false);
    sendAudio(c, silence(600));
    // …1.6 s is, and the end of speech is still where the words ended.
    const stopped = await c.next('input_audio_buffer.speech_stopped');
    const end = lead + soundBounds(words).endMs;
    expect(Math.abs((stopped.audio_end_ms as number) - end)).toBeLessThanOrEqual(60);
    await c.next('response.done');
    await c.close();
  });

  it('counts prefix_padding_ms into audio_start_ms', async () => {
    const { c } = await withTurnDetection({ prefix_padding_ms: 100 });
    heard.push('hello');
    const words = await speech('hello there how are you');
    const lead = 1000;
    sendAudio(c, concat(silence(lead), words, silence(900)));
    const started = await c.next('input_audio_buffer.speech_started');
    const expected = lead + soundBounds(words).startMs - 100;
    expect(Math.abs((started.audio_start_ms as number) - expected)).toBeLessThanOrEqual(40);
    await c.next('response.done');
    await c.close();
  });

  it('with create_response false, transcribes the turn but does not answer it', async () => {
    const { c } = await withTurnDetection({ create_response: false });
    heard.push('tell me a story');
    await speak(c, 'tell me a story');
    const done = await c.next('conversation.item.done');
    expect(done.item).toMatchObject({ role: 'user', status: 'completed' });
    await barrier(c);
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    await c.close();
  });

  it('with interrupt_response false, lets the reply finish and answers the new turn after it', async () => {
    const { c } = await withTurnDetection({ interrupt_response: false });
    heard.push('tell me a story', 'wait a moment');
    await speak(c, 'tell me a story');
    const created = await c.next('response.created');
    await c.next('response.output_audio_transcript.delta');
    await speak(c, 'wait a moment', { leadMs: 0 });
    const started = await c.next('input_audio_buffer.speech_started');
    const first = await c.next('response.done');
    const response = first.response as {
      id: string;
      status: string;
      output: Array<{ id: string }>;
    };
    expect(response.id).toBe((created.response as { id: string }).id);
    expect(response.status).toBe('completed');
    expect(spokenText(c.events, response.output[0]!.id)).toBe(STORY);
    // The user spoke while the reply played: heard, and answered once it ended.
    const startedAt = c.events.indexOf(started);
    expect(startedAt).toBeLessThan(c.events.indexOf(first));
    const second = await c.next('response.done');
    expect((second.response as { status: string }).status).toBe('completed');
    expect(c.events.some((e) => e.type === 'unmute.interrupted_by_vad')).toBe(false);
    await c.close();
  });
});

describe('options Troupe does not offer', () => {
  async function refused(session: Record<string, unknown>, param: string) {
    const c = await openVoiceSession(t);
    c.send({ type: 'session.update', session, event_id: 'upd' });
    const error = await nextError(c, 'invalid_value');
    expect(error.param).toBe(param);
    expect(error.event_id).toBe('upd');
    await barrier(c);
    // Refused whole: no session.updated beyond the one openVoiceSession waited for.
    expect(c.events.filter((e) => e.type === 'session.updated')).toHaveLength(1);
    await c.close();
    return error.message;
  }

  it('refuses an unknown turn detection type, naming the two offered', async () => {
    const message = await refused(
      { audio: { input: { turn_detection: { type: 'magic_vad' } } } },
      'session.audio.input.turn_detection.type',
    );
    expect(message).toMatch(/server_vad.*semantic_vad.*null.*magic_vad/);
  });

  it('runs semantic_vad as the server VAD with the silence window of its eagerness', async () => {
    const c = await openVoiceSession(t);
    c.send({
      type: 'session.update',
      session: { audio: { input: { turn_detection: { type: 'semantic_vad', eagerness: 'low' } } } },
    });
    const updated = await c.next(
      'session.updated',
      (e) => e !== c.events.find((x) => x.type === 'session.updated'),
    );
    const session = updated.session as { audio: { input: { turn_detection: unknown } } };
    expect(session.audio.input.turn_detection).toMatchObject({
      type: 'server_vad',
      silence_duration_ms: SEMANTIC_VAD_SILENCE_MS.low,
    });
    await c.close();
  });

  it('refuses PCM at 16000 Hz, saying to resample', async () => {
    const message = await refused(
      { audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } },
      'session.audio.input.format.rate',
    );
    expect(message).toMatch(/24000.*16000.*resample/);
  });

  it('keeps listening with the old settings after a refused update', async () => {
    const c = await openVoiceSession(t);
    c.send({
      type: 'session.update',
      session: { audio: { input: { turn_detection: { type: 'magic_vad' } } } },
    });
    await nextError(c, 'invalid_value');
    heard.push('hello');
    await speak(c, 'hello there');
    await waitForEvent(c, 'input_audio_buffer.speech_stopped');
    await c.next('response.done');
    await c.close();
  });
});
