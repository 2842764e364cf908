/**
 * A session run in a process of its own, as a test's fresh server would: it
 * restores a snapshot (stdin), handles client events, and prints what it sent.
 *
 * stdin: `{ snapshot, events }`; env: `SIM_URL` (the LLM), `CHARACTERS_DIR`.
 * stdout: `{ events, snapshot }` once the last response is done.
 */
import { text } from 'node:stream/consumers';
import pino from 'pino';
import { loadCharacters } from '../../src/characters/registry.js';
import { loadConfig } from '../../src/config/index.js';
import { createLlmClient } from '../../src/llm/client.js';
import type { ClientEvent, ServerEvent } from '../../src/session/events.js';
import { restoreSession, type SessionState } from '../../src/session/session.js';

const input = JSON.parse(await text(process.stdin)) as {
  snapshot: SessionState;
  events: ClientEvent[];
};
const log = pino({ level: 'silent' });
const config = loadConfig({ CHARACTERS_DIR: process.env.CHARACTERS_DIR ?? 'characters' });
const registry = await loadCharacters({
  dir: config.characters.dir,
  watch: false,
  mcp: false,
  log,
});
const llm = createLlmClient({ baseURL: process.env.SIM_URL!, log });
const sent: ServerEvent[] = [];
const session = await restoreSession(input.snapshot, {
  characters: { get: (id) => registry.get(id), ids: () => registry.list().map((c) => c.id) },
  llm: () => llm,
  settings: config.sessions,
  send: (event) => sent.push(event),
  log,
});
session.start();
for (const event of input.events) {
  await session.handle(event);
  await session.idle();
}
const snapshot = session.snapshot();
session.close();
await registry.close();
process.stdout.write(JSON.stringify({ events: sent, snapshot }));
