/**
 * MCP tool servers: a character's `mcp` servers (a real SDK server over stdio
 * and over streamable HTTP) are listed at load, filtered, checked, and their
 * tools run under the executor's rules.
 */
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCharacters, formatCheckReport } from '../../src/characters/check.js';
import { loadCharacters, type CharacterRegistry } from '../../src/characters/registry.js';
import type { LoadedCharacter } from '../../src/characters/types.js';
import { mcpPool } from '../../src/mcp/pool.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { executeToolCall } from '../../src/tools/executor.js';
import type { ToolResult } from '../../src/tools/types.js';
import { character, characterDir, nextChange, type CharacterDir } from '../helpers/characters.js';
import { within } from '../helpers/wait.js';
import { MCP_FIXTURE, startHttpMcpServer, type HttpMcpServer } from '../fixtures/mcp/server.js';

const STDIO = `command: process.execPath, args: ['--import', 'tsx', ${JSON.stringify(MCP_FIXTURE)}]`;

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

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

function toolsCharacter(web: HttpMcpServer, allowed = `['add', 'fail', 'picture', 'ping']`) {
  return character({
    name: 'Tools',
    extra: `tools: [defineTool({ name: 'roll', description: 'd', parameters: z.object({}), handler: () => 4 })],
  mcp: [
    { label: 'local', ${STDIO}, allowedTools: ${allowed}, timeoutMs: 60000 },
    { label: 'web', url: ${JSON.stringify(web.url)}, headers: { 'x-token': 'sesame' }, allowedTools: ['echo'], timeoutMs: 60000 },
    { label: 'slow', url: ${JSON.stringify(web.url)}, allowedTools: ['hang'], timeoutMs: 300 },
  ],`,
  });
}

let web: HttpMcpServer;
let chars: CharacterDir;
let registry: CharacterRegistry;
let tools: LoadedCharacter;

beforeAll(async () => {
  web = await startHttpMcpServer();
  chars = await characterDir({ 'tools.ts': toolsCharacter(web) });
  registry = await loadCharacters({ dir: chars.dir, watch: true });
  tools = registry.get('tools')!;
});

afterAll(async () => {
  await registry?.close();
  await chars?.cleanup();
  await web?.close();
});

describe('a character with MCP servers', () => {
  it('offers the allowed tools of each server after its own, with their input schemas as parameters', () => {
    expect(registry.errors()).toEqual([]);
    expect(registry.warnings()).toEqual([]);
    // In the server's order.
    expect(tools.toolNames).toEqual(['roll', 'add', 'ping', 'fail', 'picture', 'echo', 'hang']);
    expect(tools.mcpServers).toEqual([
      { label: 'local', tools: ['add', 'ping', 'fail', 'picture'] },
      { label: 'web', tools: ['echo'] },
      { label: 'slow', tools: ['hang'] },
    ]);
    const add = tools.toolset().descriptions.find((d) => d.name === 'add');
    expect(add).toEqual({
      name: 'add',
      description: 'Adds two numbers.',
      parameters: expect.objectContaining({
        type: 'object',
        properties: { a: { type: 'number' }, b: { type: 'number' } },
        required: ['a', 'b'],
      }),
    });
    expect(tools.toolset().tools.get('echo')).toMatchObject({
      serverLabel: 'web',
      timeoutMs: 60000,
    });
    expect(tools.toolset().tools.get('roll')?.serverLabel).toBeUndefined();
    // The HTTP server got the character's headers.
    expect(web.lastHeaders['x-token']).toBe('sesame');
  });

  it('runs calls over stdio and HTTP: text, structured content, images, isError', async () => {
    expect(await call(tools, 'add', { a: 2, b: 3 })).toMatchObject({ outcome: 'ok', output: '5' });
    expect(await call(tools, 'echo', { text: 'hi' })).toMatchObject({
      outcome: 'ok',
      output: 'echo: hi',
    });
    expect(await call(tools, 'picture')).toMatchObject({
      outcome: 'ok',
      output: 'here is a pixel\n[image: image/png, 68 bytes]',
    });
    expect(await call(tools, 'fail')).toMatchObject({
      outcome: 'error',
      output: 'Error: fail failed: the disk is full try again later',
    });
  });

  it('validates arguments against the server schema before calling it', async () => {
    const result = await call(tools, 'add', { a: 'two', b: 3 });
    expect(result.outcome).toBe('invalid_args');
    expect(result.output).toMatch(/^Error: invalid arguments for add: a: expected number/);
  });

  it('ends a call that hangs at the server timeout, with one outcome', async () => {
    const result = await call(tools, 'hang');
    expect(result).toMatchObject({
      outcome: 'timeout',
      output: 'Error: hang did not finish within 300 ms.',
    });
    // The connection survives a timeout.
    expect(await call(tools, 'echo', { text: 'again' })).toMatchObject({ output: 'echo: again' });
  });

  it('lists the tools again on reload and keeps one connection per server', async () => {
    const size = mcpPool.size;
    const updated = nextChange(registry, (c) => c.id === 'tools' && c.type === 'updated');
    await chars.write('tools.ts', toolsCharacter(web, `['ping']`));
    const change = await within(updated, 'the reload of tools.ts');
    const reloaded = (change as { character: LoadedCharacter }).character;
    expect(reloaded.toolNames).toEqual(['roll', 'ping', 'echo', 'hang']);
    expect(mcpPool.size).toBe(size);
    expect(await call(reloaded, 'ping')).toMatchObject({ outcome: 'ok', output: 'pong' });
    tools = reloaded;
  });

  it('closes the connection of a server a reload drops', async () => {
    const size = mcpPool.size;
    const updated = nextChange(registry, (c) => c.id === 'tools' && c.type === 'updated');
    await chars.write('tools.ts', toolsCharacter(web).replace(/\{ label: 'slow'[^\n]*\n/, ''));
    const change = await within(updated, 'the reload of tools.ts without slow');
    tools = (change as { character: LoadedCharacter }).character;
    expect(tools.toolNames).toEqual(['roll', 'add', 'ping', 'fail', 'picture', 'echo']);
    expect(mcpPool.size).toBe(size - 1);
  });
});

describe('MCP server problems', () => {
  let dir: CharacterDir;
  let down: number;
  beforeAll(async () => {
    down = await closedPort();
    dir = await characterDir({
      'down.ts': character({
        name: 'Down',
        extra: `tools: [defineTool({ name: 'roll', description: 'd', parameters: z.object({}), handler: () => 4 })],
  mcp: [{ label: 'gone', url: 'http://127.0.0.1:${down}/mcp' }],`,
      }),
      'clash.ts': character({
        name: 'Clash',
        extra: `tools: [defineTool({ name: 'echo', description: 'mine', parameters: z.object({}), handler: () => 'me' })],
  mcp: [{ label: 'web', url: ${JSON.stringify(web.url)}, allowedTools: ['echo', 'ping', 'bad.name', 'nope'] }],`,
      }),
      'bad.ts': `export default { name: 'Bad', instructions: 'x', mcp: [
        { label: 'two words', url: 'ftp://example.com', command: 'node', alowedTools: ['a'], timeoutMs: -1 },
        { label: 'x', args: ['a.mjs'] },
        { label: 'x', url: 'http://127.0.0.1:1/mcp', env: { A: 'b' } },
      ] };`,
    });
  });
  afterAll(async () => dir.cleanup());

  it('loads the character without the tools of an unreachable server, with a warning', async () => {
    const log = createMemoryLogger();
    const reg = await loadCharacters({ dir: dir.dir, log });
    try {
      expect(reg.get('down')?.toolNames).toEqual(['roll']);
      expect(reg.get('down')?.mcpServers).toEqual([
        {
          label: 'gone',
          tools: [],
          error: expect.stringContaining('cannot connect to MCP server "gone"'),
        },
      ]);
      const warnings = reg.warnings().map((w) => w.message);
      expect(warnings).toContainEqual(
        expect.stringMatching(
          /down\.ts: mcp\[0\]: cannot connect to MCP server "gone" \(http:\/\/127\.0\.0\.1:\d+\/mcp\): .*; the character loads without this server's tools/,
        ),
      );
      expect(
        log.entries.some((l) => l.msg === 'character warning' && l.fields.kind === 'mcp'),
      ).toBe(true);
    } finally {
      await reg.close();
    }
  });

  it('leaves out clashing, unusable and missing tools with a clear problem each', async () => {
    const reg = await loadCharacters({ dir: dir.dir });
    try {
      expect(reg.get('clash')?.toolNames).toEqual(['echo', 'ping']);
      expect(await call(reg.get('clash')!, 'echo')).toMatchObject({ output: 'me' });
      const text = reg
        .warnings()
        .filter((w) => w.file.endsWith('clash.ts'))
        .map((w) => w.message)
        .join('\n');
      expect(text).toMatch(
        /mcp\[0\]: MCP server "web": tool "echo" clashes with a tool of the same name from the character/,
      );
      expect(text).toMatch(/tool "bad\.name" is left out, its name is not one models accept/);
      expect(text).toMatch(
        /mcp\[0\]\.allowedTools\[3\]: MCP server "web" has no tool "nope"; it lists "add", "echo"/,
      );
    } finally {
      await reg.close();
    }
  });

  it('rejects a malformed mcp entry at load, naming the file and field', async () => {
    const reg = await loadCharacters({ dir: dir.dir });
    try {
      const errors = reg.errors().map((e) => e.message);
      expect(reg.get('bad')).toBeUndefined();
      expect(errors).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/bad\.ts: mcp\[0\]\.label: is not a valid label.*got "two words"/),
          expect.stringMatching(/bad\.ts: mcp\[0\]\.url: expected an http:\/\/ or https:\/\/ URL/),
          expect.stringMatching(
            /bad\.ts: mcp\[0\]\.alowedTools: unknown field; did you mean "allowedTools"\?/,
          ),
          expect.stringMatching(/bad\.ts: mcp\[0\]\.timeoutMs: expected a positive number/),
          expect.stringMatching(/bad\.ts: mcp\[1\]: missing url or command/),
          expect.stringMatching(
            /bad\.ts: mcp\[2\]\.env: only applies to a command \(stdio\) server/,
          ),
          expect.stringMatching(/bad\.ts: mcp\[2\]\.label: duplicate MCP server label "x"/),
        ]),
      );
    } finally {
      await reg.close();
    }
  });

  it('is an error in troupe check', async () => {
    const report = await checkCharacters(dir.dir);
    const text = formatCheckReport(report);
    expect(text).toMatch(/^down\s+Down\s+roll\s+error: mcp$/m);
    expect(text).toMatch(/^clash\s+Clash\s+echo, ping\s+error: mcp$/m);
    expect(text).toMatch(/error \[mcp\] .*down\.ts: mcp\[0\]: cannot connect to MCP server "gone"/);
    expect(report.errors.length).toBeGreaterThan(3);
  });

  it('reconnects on the next call after the server comes back', async () => {
    const port = await closedPort();
    const flaky = await startHttpMcpServer(port);
    const d = await characterDir({
      'flaky.ts': character({
        extra: `mcp: [{ label: 'flaky', url: ${JSON.stringify(flaky.url)}, timeoutMs: 60000 }],`,
      }),
    });
    const reg = await loadCharacters({ dir: d.dir });
    try {
      const c = reg.get('flaky')!;
      expect(await call(c, 'ping')).toMatchObject({ outcome: 'ok' });
      await flaky.close();
      const failed = await call(c, 'ping');
      expect(failed.outcome).toBe('error');
      const back = await startHttpMcpServer(port);
      try {
        expect(await call(c, 'ping')).toMatchObject({ outcome: 'ok', output: 'pong' });
        expect(back.methods).toContain('initialize');
      } finally {
        await back.close();
      }
    } finally {
      await reg.close();
      await d.cleanup();
    }
  });
});

describe('connections', () => {
  it('close when the registry closes (shutdown)', async () => {
    await registry.close();
    expect(mcpPool.size).toBe(0);
    expect((await call(tools, 'ping')).output).toMatch(/MCP server "local" is closed/);
  });
});
