/**
 * What a voice turn and a barge-in add to `GET /metrics`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, scrape } from '../helpers/http.js';
import type { TestServer } from '../helpers/server.js';
import { barrier, openVoiceSession, speak, startStoryServer } from '../helpers/voice.js';

const STORY =
  'Once upon a time a fox lived by the river. She fished there every morning. ' +
  'One winter the river froze, and the fox had to learn to wait.';
const heard: string[] = [];

let t: TestServer;

beforeAll(async () => {
  t = await startStoryServer(STORY, heard);
});
afterAll(() => t?.close());

describe('voice metrics', () => {
  it('count a voice turn: latencies, and audio seconds both ways', async () => {
    const c = await openVoiceSession(t);
    heard.push('Hello.');
    const sent = await speak(c, 'hello there');
    await c.next('response.done');
    // Every append has been handled (and counted).
    await barrier(c);
    const text = await scrape(t.url);
    const labels = { stt: 'scripted', tts: 'tone' };
    expect(metricValue(text, 'troupe_voice_response_latency_seconds_count', labels)).toBe(1);
    expect(metricValue(text, 'troupe_stt_latency_seconds_count', { provider: 'scripted' })).toBe(1);
    expect(metricValue(text, 'troupe_tts_first_audio_seconds_count', { provider: 'tone' })).toBe(1);
    // Every sample sent is counted in; the tone reply ("Okay." at 20 ms a character) out.
    const audioIn = metricValue(text, 'troupe_audio_seconds_total', {
      direction: 'in',
      provider: 'scripted',
    });
    expect(audioIn).toBeCloseTo(sent.length / 24000, 2);
    const audioOut = metricValue(text, 'troupe_audio_seconds_total', {
      direction: 'out',
      provider: 'tone',
    });
    expect(audioOut).toBeCloseTo(0.1, 2);
    expect(metricValue(text, 'troupe_barge_ins_total')).toBeUndefined();
    await c.close();
  });

  it('count a barge-in by character', async () => {
    const c = await openVoiceSession(t);
    heard.push('Tell me a story.', 'Wait.');
    await speak(c, 'tell me a story');
    await c.next('response.output_audio_transcript.delta');
    await speak(c, 'wait a moment', { leadMs: 0 });
    const done = await c.next('response.done');
    expect((done.response as { status: string }).status).toBe('cancelled');
    const text = await scrape(t.url);
    expect(metricValue(text, 'troupe_barge_ins_total', { character: 'quiet' })).toBe(1);
    await c.next('response.done');
    await c.close();
  });
});
