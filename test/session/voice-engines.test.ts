/**
 * The offline defaults end to end: Debian's pocketsphinx hears flite speech,
 * espeak-ng (WASM) speaks the answer, through a real server and socket.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { concat, sendAudio, silence, speech } from '../helpers/audio.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openSession } from '../helpers/session.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ env: { STT_PROVIDER: 'pocketsphinx', TTS_PROVIDER: 'espeak' } });
});
afterAll(() => t?.close());

describe('the embedded engines', () => {
  it('hear a spoken question and speak the answer', async () => {
    const c = await openSession(t, 'character=weather');
    c.send({ type: 'session.update', session: { output_modalities: ['audio'] } });
    await c.next('session.updated');
    sendAudio(c, concat(silence(300), await speech("what's the weather in glasgow"), silence(900)));
    const completed = await c.next(
      'conversation.item.input_audio_transcription.completed',
      undefined,
      10_000,
    );
    expect(String(completed.transcript)).toMatch(/weather/);
    const events = await c.untilDone();
    const audio = events.filter((e) => e.type === 'response.output_audio.delta');
    expect(audio.length).toBeGreaterThan(0);
    const done = events.at(-1)!.response as { status: string; troupe: { first_audio_ms: number } };
    expect(done.status).toBe('completed');
    console.log(
      `transcript: "${String(completed.transcript)}", first audio ${done.troupe.first_audio_ms} ms after the end of speech`,
    );
    await c.close();
  });
});
