/**
 * The Troupe LLM simulator: a real HTTP server on loopback that speaks the
 * OpenAI-compatible chat-completions API, streams scripted replies the way a
 * chosen vendor does, validates histories like vLLM and injects faults.
 * This file runs the server and its control surface; `routes.ts` answers
 * requests, `chat-reply.ts` and `stream-reply.ts` write replies.
 */
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { ConfigError } from '../../errors.js';
import type { ReplySettings } from './chat-reply.js';
import { sendJson } from './http-io.js';
import { Inflight } from './inflight.js';
import { PROFILES, isProfileName } from './profiles.js';
import type { ProfileName } from './profiles.js';
import { createRouter } from './routes.js';
import { parseSimScript } from './script.js';
import type { SimScript } from './script.js';
import type {
  RecordedRequest,
  SimFault,
  SimLatency,
  Simulator,
  SimulatorOptions,
} from './types.js';

/** Default profile. */
export const DEFAULT_PROFILE: ProfileName = 'openai';
/** Default host: loopback only. */
export const DEFAULT_HOST = '127.0.0.1';
/** Default list of models served by `GET /v1/models`. */
export const DEFAULT_MODELS: readonly string[] = ['sim-model'];
/** Requests kept for `requests` and `GET /sim/requests` by default: the latest this many. */
export const DEFAULT_KEEP_REQUESTS = 1000;

/**
 * Starts a simulator on loopback.
 *
 * @example
 * const sim = await startSimulator({ profile: 'vllm-hermes', script });
 * const client = new OpenAI({ baseURL: sim.url, apiKey: 'x' });
 * // …
 * await sim.close();
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const host = options.host ?? DEFAULT_HOST;
  const settings: ReplySettings = {
    profile: checkProfile(options.profile ?? DEFAULT_PROFILE),
    script: parseSimScript(options.script ?? { rules: [] }, 'passed to the simulator'),
    latency: checkLatency(options.latency ?? {}),
    seed: options.seed ?? 1,
    stamp: options.stamp === true,
    continuousUsage: options.continuousUsage,
  };
  const faults: SimFault[] = [];
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const inflight = new Inflight();
  let closing: Promise<void> | null = null;
  const handleRequest = createRouter({
    models: [...(options.models ?? DEFAULT_MODELS)],
    requests,
    keepRequests: checkKeep(options.keepRequests ?? DEFAULT_KEEP_REQUESTS),
    faults,
    inflight,
    settings,
  });

  const server = createServer(function onRequest(req, res) {
    handleRequest(req, res).catch((err: unknown) => {
      // A bug here must not take the server down; answer 500 if still possible.
      if (!res.headersSent && !res.destroyed) {
        sendJson(res, undefined, 500, {
          error: { message: `simulator error: ${String(err)}`, type: 'server_error', code: 500 },
        });
      } else {
        res.destroy();
      }
    });
  });
  server.on('connection', function trackSocket(socket: Socket) {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('clientError', function onClientError(_err, socket) {
    socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') {
    throw new ConfigError('The simulator could not read the port it listens on.');
  }
  const port = address.port;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  const simulator: Simulator = {
    url: `http://${urlHost}:${port}/v1`,
    port,
    requests,
    setScript(next: SimScript): void {
      settings.script = parseSimScript(next, 'passed to setScript');
    },
    setProfile(next: ProfileName): void {
      settings.profile = checkProfile(next);
    },
    setLatency(next: SimulatorOptions['latency']): void {
      settings.latency = checkLatency(next ?? {});
    },
    injectFault(fault: SimFault): void {
      faults.push(fault);
    },
    clearRequests(): void {
      requests.length = 0;
    },
    whenIdle(): Promise<void> {
      return inflight.whenIdle();
    },
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        inflight.abortAll('server-closed');
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
  return simulator;
}

function checkProfile(name: string): ProfileName {
  if (!isProfileName(name)) {
    throw new ConfigError(
      `Unknown simulator profile "${name}". Use one of: ${Object.keys(PROFILES).join(', ')}.`,
    );
  }
  return name;
}

function checkKeep(keep: number): number {
  if (!Number.isInteger(keep) || keep < 0) {
    throw new ConfigError(`Simulator keepRequests must be a whole number >= 0 (got ${keep}).`);
  }
  return keep;
}

function checkLatency(latency: SimLatency): Required<SimLatency> {
  const out = {
    ttftMs: latency.ttftMs ?? 0,
    tokensPerSec: latency.tokensPerSec ?? 0,
    jitterMs: latency.jitterMs ?? 0,
  };
  for (const [key, value] of Object.entries(out)) {
    if (!Number.isFinite(value) || value < 0) {
      throw new ConfigError(
        `Simulator latency ${key} must be a finite number >= 0 (got ${value}).`,
      );
    }
  }
  return out;
}
