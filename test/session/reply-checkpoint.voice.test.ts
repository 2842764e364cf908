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
import { character } from '../helpers/characters.js';
import type { TestClient } from '../helpers/realtime-client.js';
import type { TestServer } from '../helpers/server.js';
import { userMessage } from '../helpers/session.js';
import { fakeVoice, openVoiceSession, startVoiceServer } from '../helpers/voice.js';
import { within } from '../helpers/wait.js';

/** Four seconds of speech at the fake engine's 20 ms a character. */
const TALE = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ') + '.';

type Reply = NonNullable<SessionState['conversation']>['reply'];

/** A character whose tool says a filler line at once and answers 30 ms later. */
const FORECASTER = character({
  name: 'Forecaster',
  extra: `tools: [
    defineTool({
      name: 'get_forecast',
      description: 'The forecast.',
      parameters: z.object({}),
      filler: { text: 'Let me see.', afterMs: 0 },
      handler: () => new Promise((resolve) => setTimeout(() => resolve('Mild all week.'), 30)),
    }),
  ],`,
});

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
    characters: { 'forecaster.ts': FORECASTER },
    script: {
      rules: [
        {
          when: { user: 'forecast', round: 0 },
          reply: { parts: [{ toolCall: { name: 'get_forecast', arguments: {} } }] },
        },
        {
          when: { user: 'outlook', round: 0 },
          reply: {
            parts: [
              { text: 'One moment. ' },
              { toolCall: { name: 'get_forecast', arguments: {} } },
            ],
          },
        },
        { when: { user: 'tale' }, reply: { parts: [{ text: TALE }] } },
      ],
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

  it('after a round of tools: the call, its result, and what has played since; not the filler', async () => {
    const c = await askForecaster('The forecast, then a tale.');
    // Written once the round of tools has its result, before any word of the reply
    // (and perhaps as the call started, failed as interrupted: not this one).
    const atTools = await within(
      replyWhere((r) => r.messages.length === 2 && r.messages[1]!.content === 'Mild all week.'),
      'the round of tools',
    );
    expect(atTools.messages).toMatchObject([
      { role: 'assistant', tool_calls: [{ function: { name: 'get_forecast' } }] },
      { role: 'tool', content: 'Mild all week.' },
    ]);
    // Then, as the tale plays, the words heard so far follow them.
    const heard = await within(
      replyWhere((r) => r.messages.length === 3),
      'a checkpoint with words of the tale',
    );
    const tale = heard.items.at(-1);
    const transcript = (tale as { content: Array<{ transcript: string }> }).content[0]!.transcript;
    expect(TALE.startsWith(transcript) && transcript.length < TALE.length).toBe(true);
    expect(heard.messages).toEqual([
      ...atTools.messages,
      { role: 'assistant', content: transcript },
    ]);
    // The filler was heard (an item of its own) but is not the model's words.
    expect(heard.items.map((i) => i.type)).toEqual(['mcp_call', 'message', 'message']);
    expect(heard.items[1]).toMatchObject({ content: [{ transcript: 'Let me see.' }] });
    const done = (await c.next('response.done')).response as { status: string };
    expect(done.status).toBe('completed');
    await c.close();
  });
});

describe('a spoken reply that speaks in more than one round', () => {
  it('holds each round as heard: the first as it played, the one playing cut', async () => {
    const c = await askForecaster('The outlook, then a tale.');
    const heard = await within(
      replyWhere((r) => r.messages.length === 3),
      'a checkpoint with words of the second round',
    );
    const [first, , tale] = heard.items.filter((i) => i.type === 'message');
    const said = (item: typeof first) =>
      (item as { content: Array<{ transcript: string }> }).content[0]!.transcript;
    expect(said(first)).toMatch(/^One moment\.?$/);
    // It has played whole: done, not cut, though the reply plays on.
    expect(first).toMatchObject({ status: 'completed' });
    expect(TALE.startsWith(said(tale)) && said(tale).length < TALE.length).toBe(true);
    expect(heard.messages).toMatchObject([
      {
        role: 'assistant',
        content: said(first),
        tool_calls: [{ function: { name: 'get_forecast' } }],
      },
      { role: 'tool', content: 'Mild all week.' },
      { role: 'assistant', content: said(tale) },
    ]);
    const done = (await c.next('response.done')).response as { status: string };
    expect(done.status).toBe('completed');
    await c.close();
  });
});

/** A spoken session with the forecaster, asked for a reply to `line`; the replies seen so far forgotten. */
async function askForecaster(line: string): Promise<TestClient> {
  replies.length = 0;
  const c = await openVoiceSession(t, 'character=forecaster');
  c.send(userMessage(line));
  c.send({ type: 'response.create' });
  return c;
}

/** The first reply under way written (from now on) that satisfies `match`. */
function replyWhere(match: (reply: NonNullable<Reply>) => boolean): Promise<NonNullable<Reply>> {
  return new Promise((resolve) => {
    const check = (): void => {
      const reply = replies.find(match);
      if (!reply) return;
      told = undefined;
      resolve(reply);
    };
    told = check;
    check();
  });
}
