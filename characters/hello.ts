/**
 * A friendly assistant with one tool. The tool is only described here; its
 * implementation is bound late from a tool library, with two variants (A/B).
 */
import { defineCharacter, defineTool } from '../src/index.js';
import { greetingsA, greetingsB, sayHelloArgs } from './lib/greetings.js';

const sayHello = defineTool({
  name: 'sayHello',
  description: 'Greet a person by name. Use it whenever the user asks you to say hello to someone.',
  parameters: sayHelloArgs,
});

export default defineCharacter({
  name: 'Hello',
  description: 'A friendly assistant that greets people (A/B tool variants).',
  voice: { flite: 'rms', espeak: 'en-us', openai: 'alloy' },
  instructions: {
    prompt:
      'You are a friendly, upbeat assistant. When asked to greet someone, call sayHello ' +
      'with their name and then repeat its greeting. Keep replies short.',
    language: 'en',
  },
  makeSystemPrompt: (instructions, ctx) => {
    const name = typeof ctx.metadata.userName === 'string' ? ctx.metadata.userName : undefined;
    return name ? `${instructions.prompt}\nThe user's name is ${name}.` : instructions.prompt!;
  },
  tools: [sayHello],
  toolLibraries: [greetingsA, greetingsB],
  greeting: 'Hi! Who would you like me to greet?',
});
