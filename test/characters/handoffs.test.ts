/**
 * `handoffs` at load: checked against the characters there are, in both
 * character styles, shown by `troupe check`, kept true on hot reload.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { checkCharacters, formatCheckReport } from '../../src/characters/check.js';
import { loadCharacters, type CharacterRegistry } from '../../src/characters/registry.js';
import { CharacterCheckError } from '../../src/errors.js';
import { SessionHandoffs } from '../../src/session/handoff.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { character, characterDir, nextChange, type CharacterDir } from '../helpers/characters.js';

let chars: CharacterDir | undefined;
let registry: CharacterRegistry | undefined;
afterEach(async () => {
  await registry?.close();
  registry = undefined;
  await chars?.cleanup();
  chars = undefined;
});

/** The transfer tools a session of `id` is offered now. */
function transfers(r: CharacterRegistry, id: string): string[] {
  const c = r.get(id)!;
  const set = new SessionHandoffs({ characters: r }).toolset(c, c.toolset());
  return set.descriptions.map((d) => d.name).filter((n) => n.startsWith('transfer_to_'));
}

describe('handoffs at load', () => {
  it('resolves ids against the directory, in the zod and the plain-object style', async () => {
    chars = await characterDir({
      'desk.ts': character({ name: 'Desk', extra: "handoffs: ['weather', 'quiz']," }),
      'weather.ts': character({ name: 'Weather' }),
      'quiz.mjs': `export default { name: 'Quiz', instructions: 'Ask.', handoffs: ['desk'] };`,
    });
    registry = await loadCharacters({ dir: chars.dir, strict: true });
    expect(registry.get('desk')?.handoffs).toEqual(['weather', 'quiz']);
    expect(registry.list().find((c) => c.id === 'quiz')?.handoffs).toEqual(['desk']);
    expect(transfers(registry, 'desk')).toEqual(['transfer_to_weather', 'transfer_to_quiz']);
  });

  it('refuses an unknown id naming the file, the field, the nearest id and the known ones', async () => {
    chars = await characterDir({
      'desk.ts': character({ extra: "handoffs: ['wether']," }),
      'weather.ts': character(),
    });
    const failed = loadCharacters({ dir: chars.dir, strict: true });
    await expect(failed).rejects.toThrow(CharacterCheckError);
    const err = (await failed.catch((e: unknown) => e)) as CharacterCheckError;
    expect(err.errors).toHaveLength(1);
    expect(err.errors[0]).toMatchObject({ kind: 'handoff', path: 'handoffs[0]' });
    expect(err.errors[0]!.message).toMatch(
      /desk\.ts: handoffs\[0\]: no character "wether"; did you mean "weather"\? \(the characters are "weather"\)/,
    );
    // Lenient: the character is skipped, the others serve.
    registry = await loadCharacters({ dir: chars.dir });
    expect(registry.get('desk')).toBeUndefined();
    expect(registry.get('weather')).toBeDefined();
  });

  it('refuses a handoff to itself, a repeated id, a bad id and a tool in the way', async () => {
    chars = await characterDir({
      'self.ts': character({ extra: "handoffs: ['self']," }),
      'twice.ts': character({ extra: "handoffs: ['self', 'self']," }),
      'bad.ts': character({ extra: "handoffs: ['no such']," }),
      'long.ts': character({ extra: `handoffs: ['${'x'.repeat(53)}'],` }),
      'clash.ts': character({
        extra: `handoffs: ['twice'], tools: [defineTool({ name: 'transfer_to_twice', description: 'd', parameters: z.object({}), handler: () => 1 })],`,
      }),
    });
    registry = await loadCharacters({ dir: chars.dir });
    const messages = registry.errors().map((e) => e.message);
    expect(messages).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/self\.ts: handoffs\[0\]: "self" is this character itself/),
        expect.stringMatching(/twice\.ts: handoffs\[1\]: lists "self" twice/),
        expect.stringMatching(/bad\.ts: handoffs\[0\]: is not a character id/),
        expect.stringMatching(/long\.ts: handoffs\[0\]: is too long to hand off to.* may have 52/),
        expect.stringMatching(/clash\.ts: handoffs\[0\]: .*tools\[0\] has that name/),
      ]),
    );
    expect(registry.errors().every((e) => e.kind === 'handoff')).toBe(true);
  });

  it('reports a typo, itself, a tool in the way and a repeated id together', async () => {
    chars = await characterDir({
      'shopkeeper.ts': character({ name: 'Shopkeeper' }),
      'gremlin.ts': character({ name: 'Gremlin' }),
      'bad_handoff.ts': character({
        extra: `handoffs: ['shopkeper', 'bad_handoff', 'gremlin', 'gremlin'],
          tools: [defineTool({ name: 'transfer_to_gremlin', description: 'd', parameters: z.object({}), handler: () => 1 })],`,
      }),
    });
    const report = await checkCharacters(chars.dir);
    expect(report.errors.map((e) => [e.kind, e.path])).toEqual([
      ['handoff', 'handoffs[0]'],
      ['handoff', 'handoffs[1]'],
      ['handoff', 'handoffs[2]'],
      ['handoff', 'handoffs[3]'],
    ]);
    expect(report.errors.map((e) => e.detail)).toEqual([
      expect.stringMatching(/^no character "shopkeper"; did you mean "shopkeeper"\?/),
      expect.stringMatching(/^"bad_handoff" is this character itself/),
      expect.stringMatching(/"transfer_to_gremlin", but tools\[0\] has that name/),
      expect.stringMatching(/^lists "gremlin" twice \(handoffs\[2\] has it too\)/),
    ]);
  });

  it('shows transfers and handoff errors in troupe check', async () => {
    chars = await characterDir({
      'desk.ts': character({ name: 'Desk', extra: "handoffs: ['weather']," }),
      'weather.ts': character({ name: 'Weather' }),
      'lost.ts': character({ name: 'Lost', extra: "handoffs: ['nobody']," }),
    });
    const text = formatCheckReport(await checkCharacters(chars.dir));
    expect(text).toMatch(/desk\s+Desk\s+transfer_to_weather\s+ok/);
    expect(text).toMatch(/lost\s+-\s+-\s+error: handoff/);
    expect(text).toContain('error [handoff]');
    expect(text).toContain('lost.ts: handoffs[0]: no character "nobody"');
  });

  it('withdraws the transfer to a character removed on reload, and refuses a reload naming one', async () => {
    chars = await characterDir({
      'desk.ts': character({ prompt: 'One.', extra: "handoffs: ['weather']," }),
      'weather.ts': character(),
    });
    const log = createMemoryLogger();
    registry = await loadCharacters({ dir: chars.dir, watch: true, log });
    expect(transfers(registry, 'desk')).toEqual(['transfer_to_weather']);

    const removed = nextChange(registry, (c) => c.type === 'removed');
    await chars.remove('weather.ts');
    await removed;
    expect(transfers(registry, 'desk')).toEqual([]);
    expect(
      log.entries.some(
        (e) => e.level === 'warn' && (e.fields.missing as string[] | undefined)?.[0] === 'weather',
      ),
    ).toBe(true);

    // A new version that still names it is refused; the running one stays.
    const failed = nextChange(registry, (c) => c.type === 'failed');
    await chars.write('desk.ts', character({ prompt: 'Two.', extra: "handoffs: ['weather']," }));
    expect(await failed).toMatchObject({ id: 'desk' });
    expect(registry.get('desk')?.version).toBe(1);
    expect(registry.errors()[0]?.message).toContain('no character "weather"');

    // Brought back: offered again.
    const added = nextChange(registry, (c) => c.type === 'added');
    await chars.write('weather.ts', character());
    await added;
    expect(transfers(registry, 'desk')).toEqual(['transfer_to_weather']);
  });
});
