import { afterEach, describe, expect, it } from 'vitest';
import { loadCharacters, type CharacterRegistry } from '../../src/characters/registry.js';
import { CharacterCheckError, ConfigError } from '../../src/errors.js';
import { createMetrics } from '../../src/metrics/index.js';
import { executeToolCall } from '../../src/tools/executor.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { character, characterDir, nextChange, type CharacterDir } from '../helpers/characters.js';

const sample = { now: new Date(0), sessionId: 's', variant: 'default', metadata: {} };

let chars: CharacterDir | undefined;
let registry: CharacterRegistry | undefined;
afterEach(async () => {
  await registry?.close();
  registry = undefined;
  await chars?.cleanup();
  chars = undefined;
});

describe('loading a directory', () => {
  it('lists the characters by id with name, voice, description and tool names', async () => {
    chars = await characterDir({
      'b.ts': character({
        name: 'Bee',
        extra: `description: 'buzzes', voice: { espeak: 'en-us' },
        tools: [defineTool({ name: 'buzz', description: 'd', parameters: z.object({}), handler: () => 'bz' })],`,
      }),
      'a.mjs': `export default { name: 'Ay', instructions: 'x' };`,
      '_helper.ts': `export const x = 1;`,
      'a.test.ts': `throw new Error('tests are not characters');`,
      'notes.md': '# not a character',
      'lib/util.ts': `throw new Error('subfolders are not characters');`,
    });
    registry = await loadCharacters({ dir: chars.dir });
    expect(registry.list()).toEqual([
      expect.objectContaining({
        id: 'a',
        name: 'Ay',
        tools: [],
        variants: ['default'],
        version: 1,
      }),
      expect.objectContaining({
        id: 'b',
        name: 'Bee',
        description: 'buzzes',
        voice: { espeak: 'en-us' },
        tools: ['buzz'],
      }),
    ]);
    expect(registry.errors()).toEqual([]);
    expect(registry.get('b')?.toolset().tools.get('buzz')).toBeDefined();
  });

  it('skips bad files in lenient mode, logs and counts each error by type', async () => {
    chars = await characterDir({
      'good.ts': character(),
      'broken.ts': `export default {\n  name: ;\n};`,
      'wrong.ts': `export default { name: 1, instructions: 'x', toolMode: 'auto' };`,
    });
    const metrics = createMetrics({ processMetrics: false });
    const log = createMemoryLogger();
    registry = await loadCharacters({ dir: chars.dir, log, metrics: metrics.characters });
    expect(registry.list().map((c) => c.id)).toEqual(['good']);
    expect(registry.errors().map((e) => [e.kind, e.path])).toEqual([
      ['import', ''],
      ['shape', 'name'],
      ['shape', 'toolMode'],
    ]);
    expect(registry.errorCounts()).toMatchObject({ import: 1, shape: 2, tool_name: 0 });
    const text = await metrics.registry.metrics();
    expect(text).toContain('troupe_character_load_errors_total{type="import"} 1');
    expect(text).toContain('troupe_character_load_errors_total{type="shape"} 2');
    expect(text).toContain('troupe_character_load_errors_total{type="binding"} 0');
    expect(text).toContain('troupe_characters_loaded 1');
    const logged = log.entries.filter((e) => e.msg === 'character error');
    expect(logged.map((e) => [e.level, e.fields.kind])).toEqual([
      ['error', 'import'],
      ['error', 'shape'],
      ['error', 'shape'],
    ]);
  });

  it('fails on any error in strict mode, listing them all', async () => {
    chars = await characterDir({
      'good.ts': character(),
      'wrong.ts': `export default { name: '', instructions: 'x' };`,
    });
    const failure = await loadCharacters({ dir: chars.dir, strict: true }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(CharacterCheckError);
    const err = failure as CharacterCheckError;
    expect(err.errors.map((e) => e.path)).toEqual(['name']);
    expect(err.message).toMatch(
      /^1 character error:\n {2}.*wrong\.ts: name: expected a non-empty string/,
    );
  });

  it('rejects every file of a duplicate id and loads neither', async () => {
    chars = await characterDir({ 'twin.ts': character(), 'twin.mjs': character() });
    registry = await loadCharacters({ dir: chars.dir });
    expect(registry.list()).toEqual([]);
    expect(registry.errors().map((e) => e.kind)).toEqual(['duplicate_id', 'duplicate_id']);
    expect(registry.errors()[0]!.detail).toMatch(
      /duplicate character id "twin" \(also .*twin\.ts\)/,
    );
  });

  it('refuses a directory that does not exist', async () => {
    await expect(loadCharacters({ dir: '.tmp/no-such-dir' })).rejects.toThrow(ConfigError);
  });

  it('only ever looks up ids in what it loaded', async () => {
    chars = await characterDir({ 'a.ts': character() });
    registry = await loadCharacters({ dir: chars.dir });
    for (const id of ['../a', 'a.ts', '__proto__', 'constructor', '/etc/passwd', '']) {
      expect(registry.get(id)).toBeUndefined();
    }
  });

  it('keeps one character from breaking another when its tools throw', async () => {
    chars = await characterDir({
      'flaky.ts': character({
        extra: `tools: [defineTool({ name: 'boom', description: 'd', parameters: z.object({}), handler: () => { throw new Error('kaput'); } })],`,
      }),
      'steady.ts': character({ name: 'Steady' }),
    });
    registry = await loadCharacters({ dir: chars.dir });
    const flaky = registry.get('flaky')!.toolset();
    const result = await executeToolCall({ id: 'c1', name: 'boom', arguments: '{}' }, flaky, {
      signal: new AbortController().signal,
      session: { id: 's', character: 'flaky', state: {} },
      log: createMemoryLogger(),
    });
    expect(result.outcome).toBe('error');
    expect(await registry.get('steady')!.systemPrompt(sample)).toBe('You are a test character.');
  });
});

describe('hot reload', () => {
  it('gives new sessions the new version while running ones keep theirs', async () => {
    chars = await characterDir({ 'a.ts': character({ prompt: 'Version one.' }) });
    registry = await loadCharacters({ dir: chars.dir, watch: true });
    const running = registry.get('a')!;
    const changed = nextChange(registry);
    await chars.write('a.ts', character({ prompt: 'Version two.' }));
    const change = await changed;
    expect(change).toMatchObject({ type: 'updated', id: 'a' });
    const fresh = registry.get('a')!;
    expect(fresh.version).toBe(2);
    expect(await fresh.systemPrompt(sample)).toBe('Version two.');
    expect(await running.systemPrompt(sample)).toBe('Version one.');
  });

  it('keeps the old version and logs the error when the new one is broken', async () => {
    chars = await characterDir({ 'a.ts': character({ prompt: 'Good.' }) });
    const metrics = createMetrics({ processMetrics: false });
    const log = createMemoryLogger();
    registry = await loadCharacters({
      dir: chars.dir,
      watch: true,
      log,
      metrics: metrics.characters,
    });
    const failed = nextChange(registry);
    await chars.write(
      'a.ts',
      `export default { name: 'A', instructions: 'x', maxToolRounds: -1 };`,
    );
    expect(await failed).toMatchObject({ type: 'failed', id: 'a' });
    expect(await registry.get('a')!.systemPrompt(sample)).toBe('Good.');
    expect(registry.errors().map((e) => e.path)).toEqual(['maxToolRounds']);
    expect(log.entries.some((e) => e.level === 'error' && e.fields.path === 'maxToolRounds')).toBe(
      true,
    );
    expect(await metrics.registry.metrics()).toContain(
      'troupe_character_reloads_total{outcome="failed"} 1',
    );

    const fixed = nextChange(registry);
    await chars.write('a.ts', character({ prompt: 'Fixed.' }));
    expect(await fixed).toMatchObject({ type: 'updated', character: { version: 2 } });
    expect(registry.errors()).toEqual([]);
  });

  it('reloads the characters that import a changed helper, with the helper fresh', async () => {
    chars = await characterDir({
      'lib/mood.ts': `export const mood = 'calm';`,
      'a.ts': `import { mood } from './lib/mood.js';
export default { name: 'A', instructions: 'x', makeSystemPrompt: () => 'I am ' + mood };`,
    });
    registry = await loadCharacters({ dir: chars.dir, watch: true });
    expect(await registry.get('a')!.systemPrompt(sample)).toBe('I am calm');
    const changed = nextChange(registry);
    await chars.write('lib/mood.ts', `export const mood = 'excited';`);
    expect(await changed).toMatchObject({ type: 'updated', id: 'a' });
    expect(await registry.get('a')!.systemPrompt(sample)).toBe('I am excited');
  });

  it('adds new files and removes deleted ones', async () => {
    chars = await characterDir({ 'a.ts': character() });
    registry = await loadCharacters({ dir: chars.dir, watch: true });
    const added = nextChange(registry, (c) => c.id === 'b');
    await chars.write('b.ts', character({ name: 'Bee' }));
    expect(await added).toMatchObject({ type: 'added', character: { name: 'Bee', version: 1 } });
    const removed = nextChange(registry, (c) => c.id === 'a');
    await chars.remove('a.ts');
    expect(await removed).toEqual({ type: 'removed', id: 'a' });
    expect(registry.list().map((c) => c.id)).toEqual(['b']);
  });

  it('reloads on demand without a watcher', async () => {
    chars = await characterDir({ 'a.ts': character({ prompt: 'One.' }) });
    registry = await loadCharacters({ dir: chars.dir });
    await chars.write('a.ts', character({ prompt: 'Two.' }));
    const seen: string[] = [];
    const stop = registry.subscribe((c) => seen.push(`${c.type}:${c.id}`));
    await registry.reload();
    stop();
    await registry.reload();
    expect(seen).toEqual(['updated:a']);
    expect(await registry.get('a')!.systemPrompt(sample)).toBe('Two.');
  });
});
