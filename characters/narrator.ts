/**
 * A storyteller with one zod tool. Shows authors: `defineTool` with a zod
 * schema whose enum has a default (the handler gets it filled in), logging
 * from a handler through `ctx.log` (fixed message, data in fields), and a
 * prompt generator that prints the session's date.
 */
import { z } from 'zod';
import { defineCharacter, defineTool } from '../src/index.js';

const logStoryEvent = defineTool({
  name: 'log_story_event',
  description:
    'Log an important story event for the developer to see. Call it whenever something ' +
    'happens that changes the course of the story.',
  parameters: z.object({
    event: z.string().describe('What happened, in one sentence'),
    importance: z
      .enum(['low', 'medium', 'high'])
      .default('medium')
      .describe('How much the event matters to the plot'),
  }),
  handler: ({ event, importance }, ctx) => {
    ctx.log.info({ event, importance }, 'story event');
    return `Logged (${importance}): ${event}`;
  },
});

export default defineCharacter({
  name: 'Narrator',
  description: 'A storyteller who spins a tale with you and logs its turning points.',
  voice: { flite: 'rms:0.9', espeak: 'en-us', openai: 'fable' },
  instructions: {
    prompt:
      'You are a warm, vivid storyteller. Build a story together with the user, a few ' +
      'sentences at a time, and end each reply with a question about what happens next. ' +
      'When something important happens in the story, call log_story_event.',
    language: 'en',
  },
  makeSystemPrompt: (instructions, ctx) =>
    `${instructions.prompt}\nToday is ${ctx.now.toDateString()}.`,
  tools: [logStoryEvent],
  greeting: 'Once upon a time… where shall our story begin?',
});
