/**
 * The LLM as the server holds it: connected on first use (the server may come
 * up before vLLM does), and probed for `/health` with a cached answer.
 */
import type { LlmConfig } from '../config/index.js';
import { DEFAULT_HEALTH_TIMEOUT_MS } from '../config/index.js';
import { createLlmClient, type LlmClient } from '../llm/client.js';
import type { ToolLogger } from '../tools/types.js';
import { ConfigError, redactSecrets, redactUrl } from '../errors.js';

/** What `/health` says about the LLM. */
export interface LlmHealth {
  ok: boolean;
  base_url: string;
  model: string | null;
  latency_ms: number | null;
  error?: string;
  checked_at: string;
}

/** A lazily connected LLM with a health probe. */
export interface ServerLlm {
  /** The client; connects (and picks the model) on first call, retried after a failure. */
  get(): Promise<LlmClient>;
  /** Reachability of `GET /models`, cached for `cacheMs`. */
  health(): Promise<LlmHealth>;
}

/** Options of {@link createServerLlm}. */
export interface ServerLlmOptions {
  config: LlmConfig;
  /** A ready client (tests, embedding); otherwise one is made from `config`. */
  client?: LlmClient;
  log: ToolLogger;
  /** @defaultValue 5000 */
  cacheMs: number;
}

/**
 * Wraps the configured LLM endpoint for the server.
 *
 * @example
 * const llm = createServerLlm({ config: config.llm, log, cacheMs: 5000 });
 * const client = await llm.get();
 */
export function createServerLlm(options: ServerLlmOptions): ServerLlm {
  const { config, log } = options;
  let client: Promise<LlmClient> | undefined = options.client
    ? Promise.resolve(options.client)
    : undefined;
  /** The client once connected: its model is the one picked. */
  let connected: LlmClient | undefined = options.client;
  let cached: { at: number; value: Promise<LlmHealth> } | undefined;

  function get(): Promise<LlmClient> {
    client ??= createLlmClient({
      baseURL: config.baseURL,
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
      ...(config.model ? { model: config.model } : {}),
      timeoutMs: config.idleTimeoutMs,
      totalTimeoutMs: config.totalTimeoutMs,
      maxLineBytes: config.maxLineBytes,
      slowNoticeMs: config.slowNoticeMs,
      log,
    }).then(
      (made) => (connected = made),
      (err: unknown) => {
        // Not cached: the next turn tries again (the LLM may be starting).
        client = undefined;
        // The log gets what went wrong (credentials removed); clients a short message.
        log.warn({ err: redactSecrets((err as Error).message) }, 'llm connect failed');
        throw new ConfigError(
          'The LLM is unavailable: the server could not connect to it or pick its model; ' +
            'whoever runs the server should check LLM_BASE_URL and LLM_MODEL (the server log says more).',
          { cause: err },
        );
      },
    );
    return client;
  }

  let triedConnect = false;
  /**
   * The model the server uses: the configured one, else the one picked when
   * the client connected. The first probe connects it if no turn has (once:
   * a failure is logged by `get`, and a probe every few seconds would repeat it).
   */
  async function modelInUse(): Promise<string | null> {
    if (connected) return connected.model;
    if (config.model) return config.model;
    if (triedConnect) return null;
    triedConnect = true;
    return get().then(
      (c) => c.model,
      () => null,
    );
  }

  async function probe(): Promise<LlmHealth> {
    const { url: target, headers } = probeRequest(
      connected?.baseURL ?? config.baseURL,
      config.apiKey,
    );
    // Shown without credentials: /health answers anyone.
    const baseURL = redactUrl(connected?.baseURL ?? config.baseURL);
    const started = performance.now();
    const checkedAt = new Date().toISOString();
    try {
      const res = await fetch(target, {
        headers,
        signal: AbortSignal.timeout(DEFAULT_HEALTH_TIMEOUT_MS),
      });
      await res.body?.cancel();
      const latency = Math.round(performance.now() - started);
      if (!res.ok) {
        return {
          ok: false,
          base_url: baseURL,
          model: connected?.model ?? config.model ?? null,
          latency_ms: latency,
          error: `GET /models answered HTTP ${res.status}`,
          checked_at: checkedAt,
        };
      }
      const model = await modelInUse();
      return { ok: true, base_url: baseURL, model, latency_ms: latency, checked_at: checkedAt };
    } catch (err) {
      return {
        ok: false,
        base_url: baseURL,
        model: null,
        latency_ms: null,
        error: describeFetchError(err),
        checked_at: checkedAt,
      };
    }
  }

  return {
    get,
    health() {
      const now = performance.now();
      if (!cached || now - cached.at > options.cacheMs) cached = { at: now, value: probe() };
      return cached.value;
    },
  };
}

/**
 * `GET <base>/models` as fetch takes it: fetch refuses URLs with `user:pass@`,
 * so those go in a Basic authorization header (an API key wins).
 */
function probeRequest(
  baseURL: string,
  apiKey: string | undefined,
): { url: string; headers: Record<string, string> } {
  const url = new URL(`${baseURL.replace(/\/$/, '')}/models`);
  const headers: Record<string, string> = {};
  if (url.username !== '' || url.password !== '') {
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    url.username = '';
    url.password = '';
  }
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  return { url: url.href, headers };
}

function describeFetchError(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return `no answer within ${DEFAULT_HEALTH_TIMEOUT_MS} ms`;
  return redactSecrets(e.cause?.code ?? e.cause?.message ?? e.message ?? String(err));
}
