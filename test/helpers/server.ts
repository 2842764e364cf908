/**
 * Starts a real Troupe server on loopback (port chosen by the OS) against the
 * LLM simulator, with logs captured in memory.
 */
import { Writable } from 'node:stream';
import { bound, DEFAULT_WAIT_MS } from './wait.js';
import { loadConfig } from '../../src/config/index.js';
import { createLogger, startServer, type TroupeServer } from '../../src/server/index.js';
import type { ResumeStore } from '../../src/server/resume-store.js';
import type { ServerVoice } from '../../src/server/voice.js';
import {
  DEMO_SCRIPT,
  startSimulator,
  type SimScript,
  type Simulator,
  type SimulatorOptions,
} from '../../src/testing/index.js';

/** A server and its simulator. */
export interface TestServer {
  /** http://127.0.0.1:PORT */
  url: string;
  /** ws://127.0.0.1:PORT/v1/realtime */
  wsUrl: string;
  server: TroupeServer;
  simulator: Simulator;
  /** Log lines written so far, parsed. */
  logs(): Array<Record<string, unknown>>;
  /**
   * The first log line (already written or still to come) with message `msg`
   * and fields matching `where`; rejects after `bound(timeoutMs)` (default 2 min).
   */
  waitForLog(
    msg: string,
    where?: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Options of {@link startTestServer}. */
export interface TestServerOptions {
  /** @defaultValue DEMO_SCRIPT */
  script?: SimScript;
  /** Extra settings as environment variables (PORT, HOST, LLM_BASE_URL are set). */
  env?: Record<string, string>;
  simulator?: Omit<SimulatorOptions, 'script'>;
  /**
   * Speech engines to hand the server (fakes). Without it the server makes
   * them from `env`, where STT_PROVIDER and TTS_PROVIDER default to `none`:
   * a text-only server unless a test asks for speech.
   */
  voice?: ServerVoice;
  /** The resume store (two servers sharing one act as two instances sharing Redis). */
  resumeStore?: ResumeStore;
}

/**
 * @example
 * const t = await startTestServer();
 * const client = await connect(`${t.wsUrl}?character=weather`);
 */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const simulator = await startSimulator({
    profile: 'vllm-hermes',
    ...options.simulator,
    script: options.script ?? DEMO_SCRIPT,
  });
  const config = loadConfig({
    CHARACTERS_DIR: 'characters',
    CHARACTERS_WATCH: 'false',
    // Starting an stdio MCP server (the kitchen character's) costs a test server
    // start about a second on a busy machine; tests of MCP turn it on.
    CHARACTERS_MCP: 'false',
    LOG_LEVEL: 'debug',
    SHUTDOWN_GRACE_MS: '5000',
    // A tool's 100 ms default is a latency goal, not what a test checks: on a
    // busy machine a quick handler can miss it. Tests of timeouts set their own.
    TOOL_TIMEOUT_MS: '60000',
    // Overload refusal reads the event loop's lag, which a busy machine (or a
    // test's own flood) drives up: tests of it set their own threshold.
    OVERLOAD_LAG_MS: '0',
    // Its busy share too: a test process runs the server, the simulator and the clients.
    OVERLOAD_BUSY: '0',
    STT_PROVIDER: 'none',
    TTS_PROVIDER: 'none',
    ...options.env,
    PORT: '0',
    HOST: '127.0.0.1',
    LLM_BASE_URL: options.env?.LLM_BASE_URL ?? simulator.url,
  });
  const lines: string[] = [];
  const listeners = new Set<() => void>();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      for (const l of listeners) l();
      done();
    },
  });
  const logs = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  let server: TroupeServer;
  try {
    server = await startServer({
      config,
      logger: createLogger(config.log, sink),
      ...(options.voice ? { voice: options.voice } : {}),
      ...(options.resumeStore ? { resumeStore: options.resumeStore } : {}),
    });
  } catch (err) {
    await simulator.close();
    throw err;
  }
  return {
    url: server.url,
    wsUrl: server.wsUrl,
    server,
    simulator,
    logs,
    waitForLog(msg, where = () => true, timeoutMs = DEFAULT_WAIT_MS) {
      const limit = bound(timeoutMs);
      const find = () => logs().find((l) => l.msg === msg && where(l));
      return new Promise((resolve, reject) => {
        const found = find();
        if (found) return resolve(found);
        const check = () => {
          const line = find();
          if (!line) return;
          listeners.delete(check);
          clearTimeout(timer);
          resolve(line);
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`no log line "${msg}" within ${limit} ms`));
        }, limit);
        listeners.add(check);
      });
    },
    async close() {
      await server.close();
      await simulator.close();
    },
  };
}
