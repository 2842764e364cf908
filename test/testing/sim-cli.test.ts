import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseSse } from './sim-helpers.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'src/testing/sim-cli.ts');
const EXAMPLE = join(ROOT, 'src/testing/scripts/example.json');

function runCli(args: string[]): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: ROOT });
}

/** Resolves with the first stdout line. */
async function firstLine(child: ChildProcessWithoutNullStreams): Promise<string> {
  let out = '';
  for await (const chunk of child.stdout) {
    out += String(chunk);
    const end = out.indexOf('\n');
    if (end >= 0) return out.slice(0, end);
  }
  throw new Error(`the CLI exited without printing a URL: ${out}`);
}

describe('the sim CLI', () => {
  it('serves the example script on the printed URL and stops on SIGTERM', async () => {
    const child = runCli(['--port', '0', '--profile', 'vllm-hermes', '--script', EXAMPLE]);
    try {
      const url = await firstLine(child);
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      const res = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({
          model: 'm',
          stream: true,
          messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
          tools: [{ type: 'function', function: { name: 'get_current_weather' } }],
        }),
      });
      const { chunks } = parseSse(await res.text());
      const names = chunks.flatMap((c) =>
        (c.choices?.[0]?.delta?.tool_calls ?? []).map((t) => t.function?.name),
      );
      expect(names).toContain('get_current_weather');
    } finally {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      expect(code).toBe(0);
    }
  });

  it('exits 1 naming the file and the field when the script is invalid', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-sim-'));
    const file = join(dir, 'bad.json');
    await writeFile(
      file,
      JSON.stringify({ rules: [{ when: { round: 'one' }, reply: { parts: [] } }] }),
    );
    const child = runCli(['--port', '0', '--script', file]);
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(1);
    expect(stderr).toContain(file);
    expect(stderr).toContain('rules[0].when.round');
  });
});
