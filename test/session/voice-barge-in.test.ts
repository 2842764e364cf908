/**
 * Interrupting a spoken reply: the user talking over it (barge-in), a short
 * noise that must not interrupt, and `response.cancel`. The reply keeps only
 * what was heard, and the model is told exactly that.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { concat, sendAudio, silence, slice, speech } from '../helpers/audio.js';
import type { Received, TestClient } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { lastChat, nextError, userMessage } from '../helpers/session.js';
import {
  barrier,
  openVoiceSession,
  speak,
  spokenText,
  startStoryServer,
} from '../helpers/voice.js';

const STORY =
  'Once upon a time a fox lived by the river. She fished there every morning. ' +
  'One winter the river froze, and the fox had to learn to wait.';
/** What the scripted STT hears next; "hello" when the list is empty. */
const heard: string[] = [];

let t: TestServer;

beforeAll(async () => {
  t = await startStoryServer(STORY, heard);
});
afterAll(() => t?.close());

type Done = {
  id: string;
  status: string;
  status_details: unknown;
  output: Array<{ id: string; status: string; content: Array<{ transcript: string }> }>;
};

/** Asks for the story and waits until `words` of it have been heard. */
async function storyPlaying(c: TestClient, words = 2): Promise<{ responseId: string }> {
  heard.push('Tell me a story.');
  await speak(c, 'tell me a story');
  const created = await c.next('response.created');
  for (let i = 0; i < words; i++) await c.next('response.output_audio_transcript.delta');
  return { responseId: (created.response as { id: string }).id };
}

/** Audio deltas of a response sent after the event at `index`. */
function audioAfter(events: readonly Received[], index: number, responseId: string): Received[] {
  return events
    .slice(index + 1)
    .filter((e) => e.type === 'response.output_audio.delta' && e.response_id === responseId);
}

describe('barge-in', () => {
  it('stops the reply when the user talks over it, and the model hears what was said', async () => {
    const c = await openVoiceSession(t);
    const { responseId } = await storyPlaying(c);
    heard.push('Wait a moment.');
    await speak(c, 'wait a moment', { leadMs: 0 });

    const started = await c.next('input_audio_buffer.speech_started');
    const doneEvent = await c.next('response.done');
    const done = doneEvent.response as Done;
    expect(done.id).toBe(responseId);
    expect(c.events.indexOf(started)).toBeLessThan(c.events.indexOf(doneEvent));
    expect(done.status).toBe('cancelled');
    expect(done.status_details).toEqual({ type: 'cancelled', reason: 'turn_detected' });

    // The reply keeps the words that played: a strict prefix of the story.
    const item = done.output[0]!;
    const kept = item.content[0]!.transcript;
    expect(item.status).toBe('incomplete');
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(STORY.length);
    expect(STORY.startsWith(kept)).toBe(true);
    expect(spokenText(c.events, item.id).trim()).toBe(kept);

    // The new utterance is committed and answered; the model knows where the story stopped.
    const stopped = await c.next('input_audio_buffer.speech_stopped');
    expect(stopped.item_id).toBe(started.item_id);
    const answer = (await c.next('response.done')).response as Done;
    expect(answer.status).toBe('completed');
    expect(answer.output[0]!.content[0]!.transcript).toBe('Okay.');
    expect(lastChat(t.simulator).messages.slice(1)).toEqual([
      { role: 'user', content: 'Tell me a story.' },
      { role: 'assistant', content: kept },
      { role: 'user', content: 'Wait a moment.' },
    ]);

    expect(audioAfter(c.events, c.events.indexOf(doneEvent), responseId)).toEqual([]);
    // The openai dialect has no unmute.* events.
    expect(c.events.some((e) => e.type === 'unmute.interrupted_by_vad')).toBe(false);
    await c.close();
  });

  // A sound counts from its first frame to its last (not the prefix padding,
  // not the VAD's silence window after it).
  it('does not stop the reply for a sound shorter than bargeInMinMs', async () => {
    const c = await openVoiceSession(t);
    const { responseId } = await storyPlaying(c, 1);
    // 150 ms of a word: long enough for the VAD, too short to be a turn.
    const blip = slice(await speech('wait'), 200, 350);
    sendAudio(c, concat(blip, silence(900)));
    await barrier(c);
    const done = (await c.next('response.done', undefined, 8_000)).response as Done;
    expect(done.id).toBe(responseId);
    expect(done.status).toBe('completed');
    expect(done.output[0]!.content[0]!.transcript).toBe(STORY);
    await barrier(c);
    // Only the question that started the story was committed, not the blip.
    expect(c.events.filter((e) => e.type === 'input_audio_buffer.committed')).toHaveLength(1);
    await c.close();
  });
});

describe('response.cancel', () => {
  it('stops a spoken reply at once: no more audio, and history keeps what was heard', async () => {
    const c = await openVoiceSession(t);
    const { responseId } = await storyPlaying(c);
    c.send({ type: 'response.cancel' });
    const doneEvent = await c.next('response.done');
    const done = doneEvent.response as Done;
    expect(done.id).toBe(responseId);
    const item = done.output[0]!;
    const kept = item.content[0]!.transcript;
    expect(item.status).toBe('incomplete');
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(STORY.length);
    expect(STORY.startsWith(kept)).toBe(true);

    // Another turn, long enough for any stray audio of the cancelled reply to show.
    c.send(userMessage('And then?'));
    c.send({ type: 'response.create' });
    const next = (await c.next('response.done')).response as Done;
    expect(next.status).toBe('completed');
    expect(audioAfter(c.events, c.events.indexOf(doneEvent), responseId)).toEqual([]);
    expect(lastChat(t.simulator).messages.slice(1)).toEqual([
      { role: 'user', content: 'Tell me a story.' },
      { role: 'assistant', content: kept },
      { role: 'user', content: 'And then?' },
    ]);
    await c.close();
  });

  // The LLM has usually finished by then: cut speech still makes the reply cancelled.
  it('reports the cancelled reply as cancelled by the client', async () => {
    const c = await openVoiceSession(t);
    await storyPlaying(c);
    c.send({ type: 'response.cancel' });
    const done = (await c.next('response.done')).response as Done;
    expect(done.status).toBe('cancelled');
    expect(done.status_details).toEqual({ type: 'cancelled', reason: 'client_cancelled' });
    await c.close();
  });

  it('is refused when nothing is running', async () => {
    const c = await openVoiceSession(t);
    c.send({ type: 'response.cancel' });
    await nextError(c, 'response_cancel_not_active');
    await c.close();
  });
});
