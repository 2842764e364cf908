/**
 * A kitchen helper that takes its unit conversions from an MCP server: the
 * small stdio server in `mcp/units-server.mjs`, which Troupe starts as a
 * child process when the character loads and lists the tools of. The helper
 * scales recipes with a tool of its own. Its MCP calls reach clients as
 * `mcp_call` items whose `server_label` is `units`.
 */
import { z } from 'zod';
import { defineCharacter, defineTool } from '../src/index.js';

const scaleRecipe = defineTool({
  name: 'scale_recipe',
  description:
    'Scale an ingredient amount from the servings a recipe makes to the servings wanted.',
  parameters: z.object({
    amount: z.number().positive().describe('The amount in the recipe'),
    servings: z.number().int().min(1).max(100).describe('Servings the recipe makes'),
    wanted: z.number().int().min(1).max(100).describe('Servings wanted'),
  }),
  handler: ({ amount, servings, wanted }) => ({
    amount: Number(((amount * wanted) / servings).toPrecision(4)),
  }),
});

export default defineCharacter({
  name: 'Kitchen',
  description:
    'Scales recipes and converts kitchen units (the conversions come from an MCP server).',
  voice: { flite: 'rms:0.9', espeak: 'en-gb', openai: 'sage' },
  instructions: {
    prompt:
      'You help people cook. Use scale_recipe to scale an amount to more or fewer servings, ' +
      'and convert to change units (cups, grams, ounces, °F and °C…). Never convert in your head. ' +
      'Answer in one or two short sentences.',
    language: 'en',
  },
  makeSystemPrompt: (instructions) => instructions.prompt,
  tools: [scaleRecipe],
  mcp: [
    {
      label: 'units',
      // `node` is the Node that runs Troupe: the server needs no build step.
      command: process.execPath,
      args: ['mcp/units-server.mjs'],
      allowedTools: ['convert', 'list_units'],
    },
  ],
  greeting: 'Hello! Which recipe are we making?',
});
