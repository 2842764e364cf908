/**
 * A quiz game. Shows authors how tools keep state across turns: everything
 * lives in `ctx.session.state` (one object per session, never module-level
 * variables, which every session would share), and how a handler reports
 * misuse by throwing an Error whose message tells the model what to do
 * instead (the call ends as `error`; the model gets the message).
 */
import { z } from 'zod';
import { defineCharacter, defineTool, type ToolContext } from '../src/index.js';

/** The questions, in order; an answer is right when it is one of `answers`, ignoring case. */
const QUESTIONS = [
  { question: 'What is the capital of France?', answers: ['Paris'] },
  { question: 'How many legs does a spider have?', answers: ['8', 'eight'] },
  { question: 'Which planet is known as the Red Planet?', answers: ['Mars'] },
] as const;

/** What the quiz keeps in `ctx.session.state.quiz`. */
interface QuizState {
  topic: string;
  /** The question being asked; equals the number answered so far. */
  index: number;
  score: number;
}

function quizOf(ctx: ToolContext): QuizState | undefined {
  return ctx.session.state.quiz as QuizState | undefined;
}

function ask(index: number): string {
  return `Question ${index + 1} of ${QUESTIONS.length}: ${QUESTIONS[index]!.question}`;
}

const startQuiz = defineTool({
  name: 'start_quiz',
  description: 'Start a new quiz (or start over); returns the first question.',
  parameters: z.object({
    topic: z.string().optional().describe('What the quiz is about, as the user put it'),
  }),
  handler: ({ topic = 'general knowledge' }, ctx) => {
    ctx.session.state.quiz = { topic, index: 0, score: 0 } satisfies QuizState;
    return `Quiz on ${topic} started. ${ask(0)}`;
  },
});

const answer = defineTool({
  name: 'answer',
  description: "Check the user's answer to the current question; returns the next question.",
  parameters: z.object({ answer: z.string().describe("The user's answer, as they gave it") }),
  handler: ({ answer }, ctx) => {
    const quiz = quizOf(ctx);
    if (quiz === undefined || quiz.index >= QUESTIONS.length) {
      throw new Error(
        `${quiz ? 'the quiz is over' : 'no quiz is running'}; call start_quiz to begin one`,
      );
    }
    const current = QUESTIONS[quiz.index]!;
    const given = answer.trim().toLowerCase();
    const correct = current.answers.some((a) => a.toLowerCase() === given);
    if (correct) quiz.score++;
    quiz.index++;
    const verdict = correct ? 'Correct!' : `Incorrect: the answer is ${current.answers[0]}.`;
    const next =
      quiz.index < QUESTIONS.length
        ? ask(quiz.index)
        : `The quiz is over: ${quiz.score} of ${QUESTIONS.length} correct.`;
    return `${verdict} ${next}`;
  },
});

const score = defineTool({
  name: 'score',
  description: 'Get the current score and how many questions have been answered.',
  parameters: z.object({}),
  handler: (_args, ctx) => {
    const quiz = quizOf(ctx);
    if (quiz === undefined) return 'No quiz has been started yet.';
    return `Score: ${quiz.score} correct of ${quiz.index} answered (${QUESTIONS.length} questions in all).`;
  },
});

export default defineCharacter({
  name: 'Quizmaster',
  description: 'Runs a short quiz and keeps score across turns.',
  voice: { flite: 'rms', espeak: 'en-us', openai: 'echo' },
  instructions: {
    prompt:
      'You are an enthusiastic quizmaster. Call start_quiz when the user wants to play, ' +
      'pass every answer the user gives to the answer tool exactly as they said it, and ' +
      'call score when they ask how they are doing. Never reveal an answer before it is given.',
    language: 'en',
  },
  makeSystemPrompt: (instructions) => instructions.prompt,
  tools: [startQuiz, answer, score],
  greeting: 'Welcome to the quiz! Say when you are ready to play.',
});
