/**
 * A test server over TLS with a fresh self-signed certificate for 127.0.0.1,
 * for clients that always dial `wss://` (the `openai` package's
 * `OpenAIRealtimeWS`).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';
import { startTestServer, type TestServer, type TestServerOptions } from './server.js';

/** A TLS test server and the CA its clients must trust. */
export interface TlsTestServer extends TestServer {
  /** The certificate, PEM: pass it as the client's `ca`. */
  ca: string;
}

/**
 * @example
 * const t = await startTlsTestServer();
 * new OpenAIRealtimeWS({ model: 'weather', options: { ca: t.ca } }, new OpenAI({ baseURL: `${t.url}/v1` }));
 */
export async function startTlsTestServer(options: TestServerOptions = {}): Promise<TlsTestServer> {
  const pems = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
    ],
  });
  const dir = await mkdtemp(join(tmpdir(), 'troupe-tls-'));
  await writeFile(join(dir, 'cert.pem'), pems.cert);
  await writeFile(join(dir, 'key.pem'), pems.private);
  let t: TestServer;
  try {
    t = await startTestServer({
      ...options,
      env: { TLS_CERT: join(dir, 'cert.pem'), TLS_KEY: join(dir, 'key.pem'), ...options.env },
    });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const close = t.close;
  return {
    ...t,
    ca: pems.cert,
    async close() {
      await close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
