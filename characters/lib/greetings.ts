/**
 * Two implementations of the hello character's `sayHello` tool, one per A/B
 * variant. The character only describes the tool; a session gets the
 * implementation of the variant it runs (config or client), and every tool
 * metric carries that variant.
 */
import { z } from 'zod';
import { defineToolLibrary } from '../../src/index.js';

/** The arguments both implementations expect (checked against the character's description). */
export const sayHelloArgs = z.object({
  personName: z.string().describe('Who to greet').default('world'),
});

type Args = z.output<typeof sayHelloArgs>;

/** Variant `a` (the default): the classic greeting. */
export const greetingsA = defineToolLibrary('a', {
  sayHello: {
    parameters: sayHelloArgs,
    handler: (args) => `Hello, ${(args as Args).personName}! Nice to meet you.`,
  },
});

/** Variant `b`: a warmer greeting, to compare against `a`. */
export const greetingsB = defineToolLibrary('b', {
  sayHello: {
    parameters: sayHelloArgs,
    handler: (args) => `Hi there, ${(args as Args).personName}! So glad you're here.`,
  },
});
