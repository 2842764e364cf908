/**
 * A spoken reply under way, as the resume store is written while it plays:
 * what has played of it, cut there, for a resume after its process is
 * killed; the model's message holds the same words.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMemoryResumeStore,
  type RecordUpdate,
  type ResumeStore,
} from '../../src/server/resume-store.js';
import type { SessionState } from '../../src/session/session.js';
import type { TestServer } from '../helpers/server.js';
import { userMessage } from '../helpers/session.js';
import { fakeVoice, openVoiceSession, startVoiceServer } from '../helpers/voice.js';
import { within } from '../helpers/wait.js';

/** Four seconds of speech at the fake engine's 20 ms a character. */
const TALE = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ') + '.';

type Reply = NonNullable<SessionState['conversation']>['reply'];

/** A store written as Redis is, that tells each reply under way it is given. */
function watchingStore(onReply: (reply: NonNullable<Reply>) => void): ResumeStore {
  const inner = createMemoryResumeStore({ readsLive: false });
  return {
    ...inner,
    save(key: string, update: RecordUpdate, ttlS: number) {
      const record = JSON.parse(update.head) as { state: SessionState };
      const reply = record.state.conversation?.reply;
      if (reply) onReply(reply);
      return inner.save(key, update, ttlS);
    },
  };
}

let t: TestServer;
const replies: Array<NonNullable<Reply>> = [];
let told: (() => void) | undefined;

beforeAll(async () => {
  t = await startVoiceServer({
    voice: await fakeVoice(),
    resumeStore: watchingStore((reply) => {
      replies.push(reply);
      told?.();
    }),
    env: { RESUME_REPLY_SAVE_MS: '50' },
    script: {
      rules: [{ when: { user: 'tale' }, reply: { parts: [{ text: TALE }] } }],
      fallback: { parts: [{ text: 'Okay.' }] },
    },
  });
});
afterAll(() => t?.close());

describe('a spoken reply under way in the resume store', () => {
  it('holds what has played of it, as the item and as the message', async () => {
    const c = await openVoiceSession(t);
    c.send(userMessage('Tell me a tale.'));
    c.send({ type: 'response.create' });
    const first = await c.next('response.output_audio_transcript.delta');
    // A checkpoint with some of the words that played, written while the rest plays.
    const heard = await within(
      new Promise<NonNullable<Reply>>((resolve) => {
        const check = (): void => {
          const reply = replies.at(-1);
          const item = reply?.items[0];
          const part = item?.type === 'message' ? item.content[0] : undefined;
          if (part?.type === 'output_audio' && part.transcript) resolve(reply!);
        };
        told = check;
        check();
      }),
      'a checkpoint with words that played',
    );
    told = undefined;
    const item = heard.items[0]!;
    expect(item).toMatchObject({ id: first.item_id, type: 'message', status: 'incomplete' });
    const transcript = (item as { content: Array<{ transcript: string }> }).content[0]!.transcript;
    expect(TALE.startsWith(transcript)).toBe(true);
    expect(transcript.length).toBeLessThan(TALE.length);
    expect(heard.messages).toEqual([{ role: 'assistant', content: transcript }]);
    const done = (await c.next('response.done')).response as { status: string };
    expect(done.status).toBe('completed');
    await c.close();
  });
});
