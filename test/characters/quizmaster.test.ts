import { afterEach, describe, expect, it } from 'vitest';
import {
  callsTool,
  says,
  testCharacter,
  type CharacterTestOptions,
  type CharacterTestSession,
} from '../../src/testing/index.js';

const FILE = 'characters/quizmaster.ts';

const script = [
  { when: { user: 'play', round: 0 }, reply: callsTool('start_quiz', { topic: 'geography' }) },
  { when: { user: 'paris', round: 0 }, reply: callsTool('answer', { answer: 'Paris' }) },
  { when: { user: 'six', round: 0 }, reply: callsTool('answer', { answer: 'six' }) },
  { when: { user: 'score', round: 0 }, reply: callsTool('score') },
  { when: { user: 'mars', round: 0 }, reply: callsTool('answer', { answer: 'Mars' }) },
  // Checked before "correct": "incorrect" contains it, and the first match wins.
  {
    when: { toolResult: 'incorrect' },
    reply: says('Not quite, it has eight. Which planet is known as the Red Planet?'),
  },
  {
    when: { toolResult: 'correct!' },
    reply: says('Correct! How many legs does a spider have?'),
  },
  {
    when: { toolResult: 'quiz on' },
    reply: says('Here we go! What is the capital of France?'),
  },
  { when: { toolResult: 'Score: 1' }, reply: says('You have 1 point from 2 questions.') },
  { when: { toolResult: 'no quiz is running' }, reply: says("Let's start a quiz first!") },
  { when: { toolResult: 'No quiz has been started' }, reply: says('We have not played yet.') },
];

describe('the quizmaster character', () => {
  const chats: CharacterTestSession[] = [];
  afterEach(async () => {
    await Promise.all(chats.splice(0).map((c) => c.close()));
  });
  async function open(
    character: Parameters<typeof testCharacter>[0] = FILE,
    options: Partial<CharacterTestOptions> = {},
  ): Promise<CharacterTestSession> {
    const chat = await testCharacter(character, { script, ...options });
    chats.push(chat);
    return chat;
  }

  it('keeps the score across turns in the session state', async () => {
    const chat = await open();

    const start = await chat.say("Let's play!");
    expect(start.toolCalls).toMatchObject([
      {
        name: 'start_quiz',
        args: { topic: 'geography' },
        outcome: 'ok',
        output: 'Quiz on geography started. Question 1 of 3: What is the capital of France?',
      },
    ]);
    expect(start.text).toBe('Here we go! What is the capital of France?');
    expect(chat.state).toEqual({ quiz: { topic: 'geography', index: 0, score: 0 } });

    const right = await chat.say('Is it Paris?');
    expect(right.toolCalls).toMatchObject([
      {
        name: 'answer',
        args: { answer: 'Paris' },
        outcome: 'ok',
        output: 'Correct! Question 2 of 3: How many legs does a spider have?',
      },
    ]);
    expect(right.text).toBe('Correct! How many legs does a spider have?');
    expect(chat.state).toEqual({ quiz: { topic: 'geography', index: 1, score: 1 } });

    const wrong = await chat.say('Six');
    expect(wrong.toolCalls).toMatchObject([
      {
        name: 'answer',
        args: { answer: 'six' },
        outcome: 'ok',
        output:
          'Incorrect: the answer is 8. Question 3 of 3: Which planet is known as the Red Planet?',
      },
    ]);
    expect(wrong.text).toBe('Not quite, it has eight. Which planet is known as the Red Planet?');
    expect(chat.state).toEqual({ quiz: { topic: 'geography', index: 2, score: 1 } });

    const score = await chat.say("What's my score?");
    expect(score.toolCalls).toMatchObject([
      {
        name: 'score',
        args: {},
        outcome: 'ok',
        output: 'Score: 1 correct of 2 answered (3 questions in all).',
      },
    ]);
    expect(score.text).toBe('You have 1 point from 2 questions.');
    expect(chat.state).toEqual({ quiz: { topic: 'geography', index: 2, score: 1 } });
  });

  it('says the quiz is over after the last question', async () => {
    const chat = await open();
    for (const text of ['play', 'Paris', 'six']) await chat.say(text);
    const last = await chat.say('Mars');
    expect(last.toolCalls[0]).toMatchObject({
      outcome: 'ok',
      output: 'Correct! The quiz is over: 2 of 3 correct.',
    });
    const extra = await chat.say('Mars');
    expect(extra.toolCalls[0]).toMatchObject({
      name: 'answer',
      outcome: 'error',
      output: 'Error: answer failed: the quiz is over; call start_quiz to begin one',
    });
  });

  it('starts every session with no quiz, even with the same loaded character', async () => {
    const first = await open();
    await first.say("Let's play!");
    await first.say('Paris');

    // Same loaded module, so state kept in the module would leak into this session.
    const second = await open(first.character);
    const score = await second.say("What's my score?");
    expect(score.toolCalls[0]).toMatchObject({
      outcome: 'ok',
      output: 'No quiz has been started yet.',
    });
    expect(score.text).toBe('We have not played yet.');
    expect(second.state).toEqual({});
    expect(first.state).toEqual({ quiz: { topic: 'geography', index: 1, score: 1 } });
  });

  it('answers an answer before start_quiz with an error that tells the model what to do', async () => {
    const chat = await open();
    const turn = await chat.say('Paris');
    expect(turn.toolCalls).toMatchObject([
      {
        name: 'answer',
        args: { answer: 'Paris' },
        outcome: 'error',
        output: 'Error: answer failed: no quiz is running; call start_quiz to begin one',
      },
    ]);
    expect(chat.history.find((m) => m.role === 'tool')?.content).toBe(turn.toolCalls[0]?.output);
    expect(turn.text).toBe("Let's start a quiz first!");
    expect(chat.state).toEqual({});
  });
});
