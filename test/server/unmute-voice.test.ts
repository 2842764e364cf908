/**
 * Unmute's frontend, as its code behaves, against Troupe: it connects with
 * subprotocol `realtime`, sends its session.update (voice, instructions,
 * allow_recording), streams Ogg/Opus pages of microphone audio, and plays
 * the Ogg/Opus pages it gets back while showing `response.text.delta`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unmuteVoiceList } from '../../src/protocol/index.js';
import { OggOpusDecoder, OggOpusEncoder } from '../../src/voice/audio/ogg-opus.js';
import { concat, silence, speech } from '../helpers/audio.js';
import { connect, type Received, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { unknownToUnmute } from '../helpers/unmute.js';
import { fakeVoice } from '../helpers/voice.js';

let t: TestServer;
const clients: TestClient[] = [];

beforeAll(async () => {
  t = await startTestServer({
    voice: await fakeVoice({ transcripts: () => "What's the weather in Glasgow?" }),
  });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.close();
});

/** Sends audio as opus-recorder does: one append per Ogg page (two 20 ms frames). */
function sendOgg(c: TestClient, pcm: Int16Array): void {
  const encoder = new OggOpusEncoder({ sampleRate: 24000 });
  const step = 1920;
  const pages: Uint8Array[] = [];
  for (let at = 0; at < pcm.length; at += step)
    pages.push(encoder.push(pcm.subarray(at, at + step)));
  pages.push(encoder.flush());
  encoder.close();
  for (const page of pages) {
    if (page.length > 0) {
      c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(page).toString('base64') });
    }
  }
}

describe("Unmute's frontend", () => {
  it('talks to a character by voice with Ogg/Opus both ways', async () => {
    const c = await connect(t.wsUrl, { protocols: ['realtime'] });
    clients.push(c);
    const voice = unmuteVoiceList([{ id: 'weather', name: 'Weather' }])[0]!;
    c.send({
      type: 'session.update',
      session: { instructions: voice.instructions, voice: 'weather', allow_recording: false },
    });
    await c.next('session.updated');
    sendOgg(c, concat(silence(300), await speech("what's the weather in glasgow"), silence(900)));
    await c.next('input_audio_buffer.speech_started');
    await c.next('input_audio_buffer.speech_stopped');
    const heard = await c.next('conversation.item.input_audio_transcription.delta');
    expect(heard.delta).toBe("What's the weather in Glasgow?");
    await c.next('response.created');
    await c.next('response.audio.done', undefined, 10_000);
    const history = await c.next('unmute.additional_outputs', (e) =>
      JSON.stringify(e).includes('fahrenheit'),
    );
    const chat = (history.args as { chat_history: Array<{ role: string }> }).chat_history;
    expect(chat[0]!.role).toBe('system');
    expect(chat.at(-1)).toEqual({ role: 'assistant', content: 'Sure — in celsius or fahrenheit?' });

    const events = c.events;
    // As the frontend shows them: a space before each delta (its backend's words have none).
    const deltas = events
      .filter((e) => e.type === 'response.text.delta')
      .map((e) => String(e.delta));
    expect(deltas.every((d) => d === d.trim() && d !== '')).toBe(true);
    expect(deltas.map((d) => ` ${d}`).join('')).toContain(' celsius or fahrenheit?');
    const dev = events.filter((e) => e.type === 'unmute.additional_outputs').at(-1)!;
    expect((dev.args as { debug_dict: object }).debug_dict).toMatchObject({
      timing: { to_first_token: expect.any(Number), tts_audio: expect.any(Number) },
      troupe: { character: 'weather', status: 'completed' },
    });
    expect(events.some((e) => e.type === 'unmute.response.text.delta.ready')).toBe(true);
    // The pages decode as one Ogg/Opus stream, as the frontend's decoder worker reads them.
    const decoder = new OggOpusDecoder({ sampleRate: 24000 });
    let samples = 0;
    for (const e of events.filter((x: Received) => x.type === 'response.audio.delta')) {
      samples += decoder.push(new Uint8Array(Buffer.from(String(e.delta), 'base64'))).length;
    }
    decoder.close();
    expect(samples / 24000).toBeGreaterThan(0.3);
    // Nothing the frontend would not know, once the dialect is known (the
    // session.created and greeting items before it are the openai dialect's).
    const from = events.findIndex((e) => e.type === 'session.updated');
    expect(unknownToUnmute(events.slice(from))).toEqual([]);
  });
});
