import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';
import { createLogger, startServer, type TroupeServer } from '../../src/server/index.js';

/** Starts a server on loopback with these settings; logs go nowhere. */
function start(env: Record<string, string>): Promise<TroupeServer> {
  const config = loadConfig({
    CHARACTERS_DIR: 'characters',
    CHARACTERS_WATCH: 'false',
    CHARACTERS_MCP: 'false',
    PORT: '0',
    HOST: '127.0.0.1',
    ...env,
  });
  return startServer({ config, logger: createLogger({ level: 'silent', content: false }) });
}

describe('server startup errors', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-startup-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('says the port is in use with a ConfigError', async () => {
    const first = await start({});
    try {
      const err = await start({ PORT: String(first.port) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toBe(
        `port ${first.port} on 127.0.0.1 is in use; set PORT to a free one.`,
      );
    } finally {
      await first.close();
    }
  });

  it('names TLS_CERT when the certificate file cannot be read', async () => {
    const key = join(dir, 'key.pem');
    await writeFile(key, 'a key\n');
    const err = await start({ TLS_CERT: join(dir, 'missing.pem'), TLS_KEY: key }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/^TLS_CERT=.*missing\.pem: cannot read it/);
  });

  it('says the TLS files are not a usable certificate and key when they hold something else', async () => {
    const garbage = join(dir, 'garbage.pem');
    await writeFile(garbage, 'not a certificate\n');
    const err = await start({ TLS_CERT: garbage, TLS_KEY: garbage }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/not a usable PEM certificate and key/);
  });

  it('lists the characters when DEFAULT_CHARACTER names none of them', async () => {
    // A folder of its own, so the list is fixed whatever characters/ holds.
    const chars = join(dir, 'characters');
    await mkdir(chars);
    for (const id of ['alpha', 'beta']) {
      await writeFile(
        join(chars, `${id}.mjs`),
        `export default { name: '${id}', instructions: 'You are ${id}.' };\n`,
      );
    }
    const err = await start({ CHARACTERS_DIR: chars, DEFAULT_CHARACTER: 'nobody' }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(
      /^DEFAULT_CHARACTER=nobody: no such character in \S*characters; available: alpha, beta\.$/,
    );
  });
});
