/**
 * The smallest useful character: no tools at all. Shows authors what a
 * character needs and nothing more; it is also the load test's baseline, so a
 * turn costs one model request and nothing else.
 */
import { defineCharacter } from '../src/index.js';

export default defineCharacter({
  name: 'Plain',
  description: 'A plain, concise assistant with no tools.',
  voice: { flite: 'rms:0.95', espeak: 'en-us', openai: 'alloy' },
  instructions: {
    prompt: 'You are a helpful, concise assistant. Answer in one or two short sentences.',
    language: 'en',
  },
  makeSystemPrompt: (instructions) => instructions.prompt,
  greeting: 'Hello! What can I help you with?',
});
