import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCharacters } from '../../src/characters/registry.js';
import { testCharacter } from '../../src/testing/index.js';

/** A character that imports zod and Troupe by package name, as one outside the project does. */
const DICE = `import { z } from 'zod';
import { defineCharacter, defineTool } from 'troupe';

export default defineCharacter({
  name: 'Dice',
  instructions: { prompt: 'You roll dice.' },
  tools: [
    defineTool({
      name: 'roll_dice',
      description: 'Roll dice.',
      parameters: z.object({ count: z.number().int().min(1).max(10).default(1) }),
      handler: ({ count }: { count: number }) => ({ total: count * 3 }),
    }),
  ],
});
`;

describe('a characters folder outside the project', () => {
  let dir: string;

  beforeAll(async () => {
    // Under the system's temp folder: no node_modules, no package.json above it.
    dir = await mkdtemp(join(tmpdir(), 'troupe-outside-'));
    await writeFile(join(dir, 'package.json'), '{"type":"module"}\n');
    await writeFile(join(dir, 'dice.ts'), DICE);
    await writeFile(join(dir, 'plain.mjs'), DICE.replace(/: \{ count: number \}/, ''));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("resolves zod and troupe to Troupe's own copies, with no npm install there", async () => {
    const registry = await loadCharacters({ dir, strict: true });
    try {
      expect(registry.errors()).toEqual([]);
      expect(registry.list().map((c) => [c.id, c.tools])).toEqual([
        ['dice', ['roll_dice']],
        ['plain', ['roll_dice']],
      ]);
    } finally {
      await registry.close();
    }
  });

  it('runs its tools through the test kit', async () => {
    const chat = await testCharacter(join(dir, 'dice.ts'), {
      script: [
        {
          when: { round: 0 },
          reply: { parts: [{ toolCall: { name: 'roll_dice', arguments: { count: 2 } } }] },
        },
        { when: { round: 1 }, reply: { parts: [{ text: 'Rolled.' }] } },
      ],
    });
    try {
      const turn = await chat.say('roll two');
      expect(turn.toolCalls[0]).toMatchObject({ outcome: 'ok', output: '{"total":6}' });
    } finally {
      await chat.close();
    }
  });
});
