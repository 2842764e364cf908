import { afterEach, describe, expect, it } from 'vitest';
import {
  callsTool,
  says,
  testCharacter,
  type CharacterTestSession,
} from '../../src/testing/index.js';

const script = [
  { when: { user: 'ada', round: 0 }, reply: callsTool('sayHello', { personName: 'Ada' }) },
  { when: { user: 'everyone', round: 0 }, reply: callsTool('sayHello') },
  { when: { toolResult: 'Hello, Ada!' }, reply: says('Hello, Ada! Nice to meet you.') },
  { when: { toolResult: 'Hi there, Ada!' }, reply: says("Hi there, Ada! So glad you're here.") },
  { when: { toolResult: 'world' }, reply: says('Hello, world!') },
];

describe('the hello character', () => {
  let chat: CharacterTestSession | undefined;
  afterEach(async () => chat?.close());

  it('greets by name with variant a, bound late from the tool library', async () => {
    chat = await testCharacter('characters/hello.ts', { script });
    const turn = await chat.say('Please say hello to Ada');
    expect(turn.toolCalls).toMatchObject([
      {
        name: 'sayHello',
        args: { personName: 'Ada' },
        outcome: 'ok',
        variant: 'a',
        output: 'Hello, Ada! Nice to meet you.',
      },
    ]);
    expect(turn.text).toBe('Hello, Ada! Nice to meet you.');
  });

  it('greets differently with variant b', async () => {
    chat = await testCharacter('characters/hello.ts', { script, variant: 'b' });
    const turn = await chat.say('Please say hello to Ada');
    expect(turn.toolCalls[0]).toMatchObject({
      outcome: 'ok',
      variant: 'b',
      output: "Hi there, Ada! So glad you're here.",
    });
    expect(turn.text).toBe("Hi there, Ada! So glad you're here.");
  });

  it('greets the world when no name is given', async () => {
    chat = await testCharacter('characters/hello.ts', { script });
    const turn = await chat.say('Say hello to everyone');
    expect(turn.toolCalls[0]).toMatchObject({
      args: { personName: 'world' },
      output: 'Hello, world! Nice to meet you.',
    });
    expect(turn.text).toBe('Hello, world!');
  });
});
