/**
 * Unmute's frontend shows the user's words while they speak: with
 * pocketsphinx's partial hypotheses on (`STT_PARTIAL_MS`), transcription
 * deltas arrive before the turn ends, and the rest follows at its end. Real
 * engines: Debian's flite speaks, pocketsphinx hears, over the unmute dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OggOpusEncoder } from '../../src/voice/audio/ogg-opus.js';
import { concat, silence, speech } from '../helpers/audio.js';
import { connect, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let t: TestServer;
const clients: TestClient[] = [];

beforeAll(async () => {
  t = await startTestServer({
    env: { STT_PROVIDER: 'pocketsphinx', STT_PARTIAL_MS: '200', STT_WORKERS: '1' },
  });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.close();
});

/** One Ogg/Opus stream of microphone audio, sent page by page as opus-recorder does. */
function oggSender(c: TestClient) {
  const encoder = new OggOpusEncoder({ sampleRate: 24000 });
  const send = (page: Uint8Array) => {
    if (page.length > 0) {
      c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(page).toString('base64') });
    }
  };
  return {
    push(pcm: Int16Array) {
      for (let at = 0; at < pcm.length; at += 1920) send(encoder.push(pcm.subarray(at, at + 1920)));
    },
    end() {
      send(encoder.flush());
      encoder.close();
    },
  };
}

type Chat = Array<{ role: string; content: string }>;

describe("Unmute's frontend and pocketsphinx's partial hypotheses", () => {
  it('gets the user words while they speak, then the rest when the turn ends', async () => {
    const c = await connect(t.wsUrl, { protocols: ['realtime'] });
    clients.push(c);
    c.send({ type: 'session.update', session: { voice: 'plain', allow_recording: false } });
    await c.next('session.updated');
    const mic = oggSender(c);
    // The words, and no silence yet: the turn cannot have ended.
    mic.push(concat(silence(300), await speech('what is the weather like in paris today')));
    const first = await c.next('conversation.item.input_audio_transcription.delta');
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    mic.push(silence(1200));
    mic.end();
    // The turn ends: the frontend gets the history with the user's whole message.
    const history = await c.next('unmute.additional_outputs', (e) =>
      (e.args as { chat_history: Chat }).chat_history.some((m) => m.role === 'user'),
    );
    const chat = (history.args as { chat_history: Chat }).chat_history;
    const transcript = chat.find((m) => m.role === 'user')!.content;
    const deltas = c.events
      .filter((e) => e.type === 'conversation.item.input_audio_transcription.delta')
      .map((e) => String(e.delta));
    expect(deltas[0]).toBe(first.delta);
    // Unmute's frontend joins the deltas as they come: they make up the transcript.
    expect(deltas.join('').trim()).toBe(transcript);
    expect(transcript).toMatch(/weather/);
  });
});
