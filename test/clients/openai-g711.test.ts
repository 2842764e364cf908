/**
 * A telephony bridge as the `openai` package's `OpenAIRealtimeWS` would be
 * written: G.711 μ-law both ways (`audio/pcmu`, 8 kHz, one byte a sample),
 * its own types checking the `session.update` at compile time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeG711 } from '../../src/voice/audio/g711.js';
import { resample } from '../../src/voice/audio/resample.js';
import { concat, silence, speech } from '../helpers/audio.js';
import { connectOpenAiRealtime } from '../helpers/openai-realtime.js';
import { startTlsTestServer, type TlsTestServer } from '../helpers/tls-server.js';
import { recordingStt, voiceOf } from '../helpers/voice.js';

let t: TlsTestServer;
beforeAll(async () => {
  t = await startTlsTestServer({
    voice: await voiceOf({ stt: recordingStt('Hello there.') }),
    script: { rules: [], fallback: { parts: [{ text: 'Okay.' }] } },
  });
});
afterAll(() => t?.close());

describe('OpenAIRealtimeWS with G.711 μ-law', () => {
  it('sends audio/pcmu speech and gets its transcript and an audio/pcmu reply', async () => {
    const { rt, events, errors, next } = connectOpenAiRealtime(t);

    await next('session.created');
    rt.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        output_modalities: ['audio'],
        audio: {
          input: { format: { type: 'audio/pcmu' } },
          output: { format: { type: 'audio/pcmu' } },
        },
      },
    });
    const updated = await next('session.updated');
    expect(updated).toMatchObject({
      session: {
        audio: {
          input: { format: { type: 'audio/pcmu' } },
          output: { format: { type: 'audio/pcmu' } },
        },
      },
    });

    const pcm24k = concat(silence(300), await speech('hello there how are you'), silence(900));
    const bytes = encodeG711(resample(pcm24k, 24_000, 8_000), 'mulaw');
    for (let at = 0; at < bytes.length; at += 160) {
      const audio = Buffer.from(bytes.subarray(at, at + 160)).toString('base64');
      rt.send({ type: 'input_audio_buffer.append', audio });
    }
    const transcript = await next('conversation.item.input_audio_transcription.completed');
    expect(transcript).toMatchObject({ transcript: 'Hello there.' });
    // The character's greeting may play first: the reply is the response after the transcript.
    const created = await next('response.created');
    await next('response.done');
    const out = events
      .filter(
        (e) => e.type === 'response.output_audio.delta' && e.response_id === created.response.id,
      )
      .reduce((n, e) => n + Buffer.from((e as { delta: string }).delta, 'base64').length, 0);
    // "Okay." is 100 ms of the test engine's tone: 800 bytes at 8 kHz.
    expect(out).toBe(800);
    expect(errors).toEqual([]);
    rt.close({ code: 1000, reason: 'done' });
  });
});
