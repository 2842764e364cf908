/**
 * `server_vad` `idle_timeout_ms` (GA): input audio without speech for that
 * long after a response → `input_audio_buffer.timeout_triggered`, the silent
 * buffer committed as a user item, and a response. Timed by the audio sent
 * (silence frames), so the test waits for events, never for the clock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendAudio, silence } from '../helpers/audio.js';
import type { TestServer } from '../helpers/server.js';
import { lastChat } from '../helpers/session.js';
import { barrier, fakeVoice, openVoiceSession, speak, startVoiceServer } from '../helpers/voice.js';

const IDLE_MS = 5_000;

let t: TestServer;
beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice({ transcripts: () => 'Are you there?' }),
    script: {
      rules: [{ when: { user: '...' }, reply: { parts: [{ text: 'Still with me?' }] } }],
      fallback: { parts: [{ text: 'I am here.' }] },
    },
  });
});
afterAll(() => t?.close());

const withIdle = (idle: number | null) => ({
  output_modalities: ['audio'],
  audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: idle } } },
});

describe('idle_timeout_ms', () => {
  it('after a response and that much silence: timeout_triggered, a committed item, a response', async () => {
    const c = await openVoiceSession(t, 'character=quiet', withIdle(IDLE_MS));
    const updated = c.events.find((e) => e.type === 'session.updated')!;
    expect(
      (updated.session as { audio: { input: { turn_detection: Record<string, unknown> } } }).audio
        .input.turn_detection,
    ).toMatchObject({ type: 'server_vad', idle_timeout_ms: IDLE_MS });
    await speak(c, 'are you there');
    await c.untilDone();
    sendAudio(c, silence(IDLE_MS + 1_000));
    const timeout = await c.next('input_audio_buffer.timeout_triggered');
    expect(Object.keys(timeout).sort()).toEqual(
      ['audio_end_ms', 'audio_start_ms', 'event_id', 'item_id', 'type'].sort(),
    );
    const span = (timeout.audio_end_ms as number) - (timeout.audio_start_ms as number);
    expect(span).toBeGreaterThanOrEqual(IDLE_MS);
    expect(span).toBeLessThan(IDLE_MS + 100);
    const committed = await c.next('input_audio_buffer.committed');
    expect(committed.item_id).toBe(timeout.item_id);
    const item = await c.next(
      'conversation.item.done',
      (e) => (e.item as { id: string }).id === timeout.item_id,
    );
    expect(item.item).toMatchObject({ role: 'user', type: 'message' });
    const events = await c.untilDone();
    expect((events.at(-1)!.response as { status: string }).status).toBe('completed');
    // The model reads the silence as Unmute's marker.
    expect(lastChat(t.simulator).messages.at(-1)).toEqual({ role: 'user', content: '...' });
    // Once per silence: the rest of the audio does not trigger it again.
    await barrier(c);
    expect(c.events.filter((e) => e.type === 'input_audio_buffer.timeout_triggered')).toHaveLength(
      1,
    );
    await c.close();
  });

  it('is not triggered before any response, nor when null', async () => {
    const c = await openVoiceSession(t, 'character=quiet', withIdle(IDLE_MS));
    sendAudio(c, silence(IDLE_MS + 1_000));
    await barrier(c);
    const off = await openVoiceSession(t, 'character=quiet', withIdle(null));
    await speak(off, 'are you there');
    await off.untilDone();
    sendAudio(off, silence(IDLE_MS + 1_000));
    await barrier(off);
    for (const client of [c, off]) {
      expect(client.events.some((e) => e.type === 'input_audio_buffer.timeout_triggered')).toBe(
        false,
      );
    }
    await c.close();
    await off.close();
  });
});
