/**
 * What the suites that drive `createSession` directly start with: the LLM
 * simulator on a script, the seed characters (not watched, no MCP servers),
 * an LLM client on the simulator, and a session's options made of them.
 */
import pino from 'pino';
import { loadCharacters, type CharacterRegistry } from '../../src/characters/registry.js';
import { loadConfig } from '../../src/config/index.js';
import { createLlmClient, type LlmClient } from '../../src/llm/client.js';
import type { SessionSettings } from '../../src/session/response-runner.js';
import type { ServerEvent } from '../../src/session/events.js';
import type { SessionOptions } from '../../src/session/session.js';
import { startSimulator, type SimScript, type Simulator } from '../../src/testing/index.js';

/** The parts, and what closes them. */
export interface SessionParts {
  sim: Simulator;
  registry: CharacterRegistry;
  llm: LlmClient;
  /** A session's options on these parts: it sends to `send`; `settings` over the defaults. */
  options(
    send: (event: ServerEvent) => void,
    settings?: Partial<SessionSettings>,
  ): Omit<SessionOptions, 'id' | 'character'>;
  close(): Promise<void>;
}

const log = pino({ level: 'silent' });
const config = loadConfig({ CHARACTERS_DIR: 'characters' });

/**
 * Starts the parts on `script` (a vLLM-like simulator), with the characters
 * of `dir` (the seed characters by default).
 *
 * @example
 * let parts: SessionParts;
 * beforeAll(async () => (parts = await startSessionParts(script)));
 * afterAll(() => parts?.close());
 */
export async function startSessionParts(
  script: SimScript,
  dir = 'characters',
): Promise<SessionParts> {
  const sim = await startSimulator({ profile: 'vllm-hermes', script });
  const registry = await loadCharacters({ dir, watch: false, mcp: false, log });
  const llm = await createLlmClient({ baseURL: sim.url, log });
  return {
    sim,
    registry,
    llm,
    options: (send, settings = {}) => ({
      characters: { get: (id) => registry.get(id), ids: () => registry.list().map((c) => c.id) },
      llm: () => Promise.resolve(llm),
      settings: { ...config.sessions, ...settings },
      send,
      log,
    }),
    async close() {
      await registry.close();
      await sim.close();
    },
  };
}
