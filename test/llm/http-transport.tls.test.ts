import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL('fixtures/tls-stream.ts', import.meta.url));
const CA = fileURLToPath(new URL('fixtures/tls-cert.pem', import.meta.url));

/** The fixture's JSON lines, run in a process of its own (NODE_EXTRA_CA_CERTS is read at start). */
async function stream(ca: string | undefined): Promise<unknown[]> {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  if (ca !== undefined) env.NODE_EXTRA_CA_CERTS = ca;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', SCRIPT], { env });
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
}

describe('http transport over TLS', () => {
  it('streams from an https server whose certificate the process trusts', async () => {
    expect(await stream(CA)).toEqual([
      { chunk: { choices: [{ delta: { content: 'secure' }, finish_reason: 'stop' }] } },
    ]);
  });

  it('says why when the certificate is not trusted', async () => {
    expect(await stream(undefined)).toEqual([
      {
        error: {
          message: 'The LLM could not be reached.',
          detail: expect.stringContaining('self-signed certificate') as unknown,
        },
      },
    ]);
  });
});
