import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unmuteVoiceList } from '../../src/protocol/index.js';
import { connect, say, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { unknownToUnmute } from '../helpers/unmute.js';

/** The voice Unmute's configurator would pick for a character: the instructions it sends back. */
function voiceOf(id: string, name = id) {
  return unmuteVoiceList([{ id, name }])[0]!;
}

/** The session.update Unmute's frontend sends on connect. */
function unmuteUpdate(character: string, instructions: object = voiceOf(character).instructions) {
  return {
    type: 'session.update',
    session: { instructions, voice: character, allow_recording: false },
  };
}

describe('the unmute dialect over a real socket', () => {
  let t: TestServer;
  const clients: TestClient[] = [];

  /** Connects as Unmute's frontend does (subprotocol `realtime`). */
  async function unmuteClient(query = ''): Promise<TestClient> {
    const c = await connect(`${t.wsUrl}${query}`, { protocols: ['realtime'] });
    clients.push(c);
    return c;
  }

  beforeAll(async () => {
    // Speech engines are not under test here: the dialect is.
    t = await startTestServer({ env: { STT_PROVIDER: 'none', TTS_PROVIDER: 'none' } });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await t?.close();
  });

  it("answers Unmute's session.update with session.updated in Unmute's shape under ?dialect=unmute", async () => {
    const c = await unmuteClient('?dialect=unmute&character=plain');
    c.send({
      ...unmuteUpdate('weather'),
      session: { ...unmuteUpdate('weather').session, allow_recording: true },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toEqual({
      instructions: { type: 'constant', text: expect.any(String) },
      voice: 'weather',
      allow_recording: true,
    });
    // The character's own prompt, not the voice list's placeholder text.
    const { text } = (updated.session as { instructions: { text: string } }).instructions;
    expect(text).not.toBe(voiceOf('weather').instructions.text);
    expect(text.length).toBeGreaterThan(0);
    // Unmute has no session.created, and the character change's items are not its business.
    expect(unknownToUnmute(c.events)).toEqual([]);
  });

  it('takes text the user typed as the prompt, and the voice list\'s instructions as "back to the character\'s own"', async () => {
    const c = await unmuteClient('?dialect=unmute&character=plain');
    c.send(
      unmuteUpdate('plain', { type: 'constant', text: 'Talk like a pirate.', language: 'en/fr' }),
    );
    const custom = await c.next('session.updated');
    expect(custom.session).toMatchObject({
      instructions: { text: 'Talk like a pirate.' },
      voice: 'plain',
    });
    c.send(unmuteUpdate('plain'));
    const own = await c.next('session.updated');
    expect((own.session as { instructions: { text: string } }).instructions.text).not.toBe(
      'Talk like a pirate.',
    );
  });

  it('switches a connection without ?dialect= to unmute on a first session.update carrying allow_recording', async () => {
    const c = await unmuteClient('?character=plain');
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ object: 'realtime.session', character: 'plain' });
    c.send(unmuteUpdate('weather'));
    const updated = await c.next('session.updated');
    expect(updated.session).toEqual({
      instructions: { type: 'constant', text: expect.any(String) },
      voice: 'weather',
      allow_recording: false,
    });
    // The switch came before the update was handled: its item events went nowhere.
    const after = c.events.slice(c.events.indexOf(created) + 1);
    expect(after.map((e) => e.type)).not.toContain('conversation.item.deleted');
    expect(JSON.stringify(after)).not.toContain('Ask me about the weather');
    const log = await t.waitForLog('dialect detected');
    expect(log.dialect).toBe('unmute');
  });

  it('stays openai when the first session.update has no allow_recording', async () => {
    const c = await unmuteClient('?character=plain');
    await c.next('session.created');
    c.send({ type: 'session.update', session: { instructions: 'Be brief.' } });
    expect((await c.next('session.updated')).session).toMatchObject({
      object: 'realtime.session',
      instructions: 'Be brief.',
    });
    // Too late to switch: the first update decided.
    c.send({ type: 'session.update', session: { allow_recording: true } });
    expect((await c.next('session.updated')).session).toMatchObject({
      object: 'realtime.session',
    });
  });

  it('switches on bridge.* events sent before the session.update, and only warns about them', async () => {
    const c = await unmuteClient('?character=plain');
    await c.next('session.created');
    // What Unmute's frontend sends when it reconnects after a pause.
    c.send({ type: 'bridge.resume_session', reason: 'ui_connect_resume' });
    c.send({ type: 'bridge.reset_session', reason: 'ui_connect_fresh_session' });
    c.send(unmuteUpdate('plain'));
    const warnings = [await c.next('error'), await c.next('error')];
    for (const w of warnings) {
      expect(w.error).toMatchObject({ type: 'warning', code: 'ignored_event', param: 'type' });
    }
    expect((await c.next('session.updated')).session).toMatchObject({ voice: 'plain' });
  });

  it("filters a text turn down to the events Unmute's frontend knows", async () => {
    const c = await unmuteClient('?dialect=unmute&character=plain');
    c.send(unmuteUpdate('plain'));
    await c.next('session.updated');
    const done = t.waitForLog('response done');
    say(c, 'Hello there');
    await done;
    // Everything the turn sent is on the wire before the answer to this update.
    c.send(unmuteUpdate('plain'));
    await c.next('session.updated');
    expect(unknownToUnmute(c.events)).toEqual([]);
    const created = c.events.find((e) => e.type === 'response.created');
    expect(created?.response).toEqual({
      object: 'realtime.response',
      status: 'in_progress',
      voice: 'plain',
      chat_history: [],
    });
  });

  it('answers unmute.input_audio_buffer.append_pcm with an error and keeps the socket open', async () => {
    const c = await unmuteClient('?dialect=unmute');
    c.send({ type: 'unmute.input_audio_buffer.append_pcm', audio: 'AAAA', format: 'int16' });
    const error = await c.next('error');
    expect(error.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'unsupported_event',
    });
    c.send(unmuteUpdate('plain'));
    await c.next('session.updated');
  });
});
