/**
 * A streamable-HTTP MCP server that keeps sessions (a real SDK server in this
 * process) sees each of Troupe's sessions ended with DELETE when the
 * connection is let go: on reload, when the character is removed, at shutdown.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCharacters, type CharacterRegistry } from '../../src/characters/registry.js';
import type { LoadedCharacter } from '../../src/characters/types.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { executeToolCall } from '../../src/tools/executor.js';
import type { ToolResult } from '../../src/tools/types.js';
import { character, characterDir, nextChange, type CharacterDir } from '../helpers/characters.js';
import { within } from '../helpers/wait.js';
import { startSessionHttpMcpServer, type SessionHttpMcpServer } from '../fixtures/mcp/server.js';

function call(c: LoadedCharacter, name: string, args: object = {}): Promise<ToolResult> {
  return executeToolCall(
    { id: `call_${name}`, name, arguments: JSON.stringify(args) },
    c.toolset(),
    {
      signal: new AbortController().signal,
      session: { id: 's', character: c.id, state: {} },
      log: createMemoryLogger(),
    },
  );
}

function source(web: SessionHttpMcpServer, allowed: string): string {
  return character({
    extra: `mcp: [{ label: 'web', url: ${JSON.stringify(web.url)}, allowedTools: ${allowed}, timeoutMs: 60000 }],`,
  });
}

let web: SessionHttpMcpServer;
let chars: CharacterDir;
let registry: CharacterRegistry | undefined;

beforeAll(async () => {
  web = await startSessionHttpMcpServer();
  chars = await characterDir({ 'sessions.ts': source(web, `['echo']`) });
});

afterAll(async () => {
  await registry?.close();
  await chars?.cleanup();
  await web?.close();
});

describe('an HTTP MCP server with sessions', () => {
  it('keeps one session for the connection while the character is loaded', async () => {
    registry = await loadCharacters({ dir: chars.dir, watch: true });
    const c = registry.get('sessions')!;
    expect(c.toolNames).toEqual(['echo']);
    expect(await call(c, 'echo', { text: 'hi' })).toMatchObject({ output: 'echo: hi' });
    expect(web.open.size).toBe(1);
    expect(web.deleted).toEqual([]);
  });

  it('ends the old session with DELETE when a reload reconnects', async () => {
    const [first] = web.open;
    const updated = nextChange(registry!, (ch) => ch.id === 'sessions' && ch.type === 'updated');
    await chars.write('sessions.ts', source(web, `['echo', 'ping']`));
    const change = await within(updated, 'the reload of sessions.ts');
    const reloaded = (change as { character: LoadedCharacter }).character;
    await within(web.deletes(1), 'the DELETE of the old session');
    expect(web.deleted).toEqual([first]);
    expect(await call(reloaded, 'ping')).toMatchObject({ output: 'pong' });
    expect(web.open.size).toBe(1);
    expect(web.open.has(first!)).toBe(false);
  });

  it('ends the session with DELETE when the character is removed', async () => {
    const [current] = web.open;
    const removed = nextChange(registry!, (ch) => ch.id === 'sessions' && ch.type === 'removed');
    await chars.remove('sessions.ts');
    await within(removed, 'the removal of sessions.ts');
    await within(web.deletes(2), 'the DELETE at removal');
    expect(web.deleted[1]).toBe(current);
    expect(web.open.size).toBe(0);
  });

  it('ends the session with DELETE at shutdown', async () => {
    await registry!.close();
    await chars.write('sessions.ts', source(web, `['echo']`));
    registry = await loadCharacters({ dir: chars.dir });
    expect(web.open.size).toBe(1);
    const [current] = web.open;
    await registry.close();
    // The registry's close waits for the DELETE.
    expect(web.deleted).toHaveLength(3);
    expect(web.deleted[2]).toBe(current);
    expect(web.open.size).toBe(0);
  });
});
