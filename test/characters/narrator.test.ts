import { afterEach, describe, expect, it } from 'vitest';
import {
  callsTool,
  says,
  testCharacter,
  type CharacterTestSession,
} from '../../src/testing/index.js';

const script = [
  {
    when: { user: 'dragon', round: 0 },
    reply: callsTool('log_story_event', { event: 'The dragon wakes beneath the mountain' }),
  },
  {
    when: { user: 'castle', round: 0 },
    reply: callsTool('log_story_event', { event: 'The castle falls', importance: 'urgent' }),
  },
  {
    when: { toolResult: 'Logged (medium)' },
    reply: says('Deep below, the dragon stirs. What do the villagers do?'),
  },
  {
    when: { toolResult: 'invalid arguments' },
    reply: says('The castle walls crumble. Who escapes the ruins?'),
  },
];

describe('the narrator character', () => {
  let chat: CharacterTestSession | undefined;
  afterEach(async () => chat?.close());

  it('puts the session date in its system prompt', async () => {
    chat = await testCharacter('characters/narrator.ts', {
      script,
      now: new Date('2025-03-14T12:00:00Z'),
    });
    expect(chat.systemPrompt).toMatch(/^You are a warm, vivid storyteller\./);
    expect(chat.systemPrompt).toContain('Today is Fri Mar 14 2025.');
  });

  it('logs a story event with medium importance when the model gives none', async () => {
    chat = await testCharacter('characters/narrator.ts', { script });
    const turn = await chat.say('A dragon sleeps under the mountain…');
    expect(turn.toolCalls).toMatchObject([
      {
        name: 'log_story_event',
        args: { event: 'The dragon wakes beneath the mountain', importance: 'medium' },
        outcome: 'ok',
        output: 'Logged (medium): The dragon wakes beneath the mountain',
      },
    ]);
    expect(chat.log.entries).toContainEqual(
      expect.objectContaining({
        level: 'info',
        msg: 'story event',
        fields: expect.objectContaining({
          event: 'The dragon wakes beneath the mountain',
          importance: 'medium',
          tool: 'log_story_event',
        }),
      }),
    );
    expect(turn.text).toBe('Deep below, the dragon stirs. What do the villagers do?');
  });

  it('tells the model what was wrong when it sends an importance that is not allowed', async () => {
    chat = await testCharacter('characters/narrator.ts', { script });
    const turn = await chat.say('Then the castle is stormed!');
    const [call] = turn.toolCalls;
    expect(call).toMatchObject({ name: 'log_story_event', outcome: 'invalid_args' });
    expect(call?.args).toBeUndefined();
    // The handler never ran, so nothing was logged as a story event.
    expect(chat.log.entries.filter((e) => e.msg === 'story event')).toEqual([]);
    const told = chat.history.find((m) => m.role === 'tool');
    expect(told?.content).toBe(call?.output);
    expect(told?.content).toContain('invalid arguments for log_story_event');
    expect(told?.content).toContain('importance');
    expect(told?.content).toContain('"urgent"');
    expect(turn.text).toBe('The castle walls crumble. Who escapes the ruins?');
  });
});
