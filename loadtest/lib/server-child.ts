/** A Troupe server in a process of its own (started by children.ts), configured by its env. */
import { loadConfig } from '../../src/config/index.js';
import { createLogger, startServer } from '../../src/server/index.js';
import { serveChild } from './child-ipc.js';

await serveChild<{ env: Record<string, string> }>(async ({ env }) => {
  const config = loadConfig(env, []);
  const server = await startServer({ config, logger: createLogger(config.log) });
  return { url: server.wsUrl, stop: () => server.close() };
});
