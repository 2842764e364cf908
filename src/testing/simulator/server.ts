/**
 * The Troupe LLM simulator: a real HTTP server on loopback that speaks the
 * OpenAI-compatible chat-completions API, streams scripted replies the way a
 * chosen vendor does, validates histories like vLLM and injects faults.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatMessage } from '../../llm/chunk.js';
import { ConfigError } from '../../errors.js';
import { badRequestBody, checkChatRequest } from './history-check.js';
import {
  PROFILES,
  createRng,
  finalUsage,
  isProfileName,
  planReply,
  renderMessage,
  renderStream,
  toolModeOf,
} from './profiles.js';
import type { ProfileName, ReplyPlan, Rng, StreamFrame } from './profiles.js';
import { offeredTools } from './improvise.js';
import { contentText, parseSimScript, selectReply } from './script.js';
import type { SimScript } from './script.js';
import { epochNow, stampText } from './stamp.js';

/** Default profile. */
export const DEFAULT_PROFILE: ProfileName = 'openai';
/** Default host: loopback only. */
export const DEFAULT_HOST = '127.0.0.1';
/** Default list of models served by `GET /v1/models`. */
export const DEFAULT_MODELS: readonly string[] = ['sim-model'];
/** Largest request body accepted. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;
/**
 * Pause between the two halves of a split UTF-8 character, so that they
 * reach the client as separate reads instead of being coalesced again.
 */
export const SPLIT_UTF8_PAUSE_MS = 15;

/** Latency model; all zero writes as fast as the socket takes it. */
export interface SimLatency {
  /** Wait before the first chunk. @defaultValue 0 */
  ttftMs?: number;
  /** One chunk every 1000/tokensPerSec ms after the first; 0 = no pacing. @defaultValue 0 */
  tokensPerSec?: number;
  /** Uniform ±jitter added to every wait (seeded). @defaultValue 0 */
  jitterMs?: number;
}

/** Options of {@link startSimulator}. */
export interface SimulatorOptions {
  /** Port to listen on. @defaultValue 0 (the OS picks) */
  port?: number;
  /** Interface to bind. @defaultValue '127.0.0.1' */
  host?: string;
  /** Vendor chunking profile. @defaultValue 'openai' */
  profile?: ProfileName;
  /** Scripted replies. @defaultValue no rules: the fallback reply only */
  script?: SimScript;
  /** Latency model. @defaultValue all 0: as fast as possible */
  latency?: SimLatency;
  /** What `GET /v1/models` lists. @defaultValue ['sim-model'] */
  models?: string[];
  /** Seed of splitting, jitter and ids; the n-th chat request of a seed is always the same. @defaultValue 1 */
  seed?: number;
  /** vLLM-style usage on every chunk. @defaultValue the profile decides (true for vllm-hermes) */
  continuousUsage?: boolean;
  /**
   * End every streamed text fragment with its send time (see `stamp.ts`), so
   * a load-test client can measure what the server in between adds. @defaultValue false
   */
  stamp?: boolean;
}

/** A one-shot fault for the next chat request; several queue up in order. */
export type SimFault =
  /** Answer with this HTTP error (429 carries `retry-after: 0`). */
  | { type: 'http'; status: 429 | 500 | 503; message?: string }
  /** Destroy the socket after n chunks. */
  | { type: 'reset'; afterChunks: number }
  /** Send an SSE error event after n chunks, then end the response. */
  | { type: 'error-event'; afterChunks: number; message?: string }
  /** Send a chunk that is not valid JSON after n chunks, then end the response. */
  | { type: 'malformed-chunk'; afterChunks: number }
  /** Omit every finish_reason (still `[DONE]`). */
  | { type: 'no-finish' }
  /** Corrupt every tool call's arguments (no closing brace, garbage). */
  | { type: 'invalid-args' }
  /** Stop writing after n chunks and hold the socket until the client leaves or close(). */
  | { type: 'stall'; afterChunks: number }
  /** End the response without `[DONE]`, after n chunks (default: all of them). */
  | { type: 'end-without-done'; afterChunks?: number }
  /**
   * Split the first multi-byte UTF-8 character of the response across two
   * socket writes. Script text with é or an emoji; without one, nothing is split.
   */
  | { type: 'split-utf8' };

/** How an answered request ended. */
export type RequestOutcome =
  'pending' | 'complete' | 'client-closed' | 'server-closed' | 'fault' | 'rejected';

/** One request as the simulator saw it. */
export interface RecordedRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  /** Parsed JSON body, `null` when empty or not JSON. */
  body: unknown;
  headers: IncomingHttpHeaders;
  /** Epoch milliseconds, sub-ms precision (performance.timeOrigin + performance.now()). */
  receivedAt: number;
  /** HTTP status answered; 0 until the head is written (or if it never was). */
  status: number;
  /** SSE data chunks written (not counting `[DONE]` or an error event). */
  chunksWritten: number;
  /** How the exchange ended. */
  outcome: RequestOutcome;
  /** The fault this request consumed, if any. */
  fault?: SimFault;
}

/** A running simulator. */
export interface Simulator {
  /** Base URL ending in /v1, e.g. http://127.0.0.1:PORT/v1. */
  url: string;
  port: number;
  /** Every request received, in order (including GET /v1/models). */
  requests: RecordedRequest[];
  setScript(script: SimScript): void;
  setProfile(profile: ProfileName): void;
  setLatency(latency: SimulatorOptions['latency']): void;
  /** One-shot: applies to the next chat request only; several queue up in order. */
  injectFault(fault: SimFault): void;
  clearRequests(): void;
  /** Resolves once no chat response is being written (streams ended or aborted). */
  whenIdle(): Promise<void>;
  /** Closes the server and every open socket. */
  close(): Promise<void>;
}

interface ChatContext {
  req: IncomingMessage;
  res: ServerResponse;
  record: RecordedRequest;
  body: Record<string, unknown>;
  signal: AbortSignal;
  fault: SimFault | undefined;
}

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
  const models = [...(options.models ?? DEFAULT_MODELS)];
  const seed = options.seed ?? 1;
  let profile = checkProfile(options.profile ?? DEFAULT_PROFILE);
  let script = parseSimScript(options.script ?? { rules: [] }, 'passed to the simulator');
  let latency = checkLatency(options.latency ?? {});
  const faults: SimFault[] = [];
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const inflight = new Set<AbortController>();
  let idleWaiters: Array<() => void> = [];
  let chatCount = 0;
  let closing: Promise<void> | null = null;

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

  async function handleRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const record: RecordedRequest = {
      method: req.method ?? 'GET',
      path,
      body: null,
      headers: req.headers,
      receivedAt: performance.timeOrigin + performance.now(),
      status: 0,
      chunksWritten: 0,
      outcome: 'pending',
    };
    requests.push(record);
    res.on('error', () => undefined);

    const raw = await readBody(req);
    if (raw.kind === 'aborted') {
      record.outcome = 'client-closed';
      return;
    }
    if (raw.kind === 'too-large') {
      record.outcome = 'rejected';
      sendJson(res, record, 413, {
        error: {
          message: `The request body is larger than ${MAX_BODY_BYTES} bytes.`,
          type: 'invalid_request_error',
          code: 413,
        },
      });
      return;
    }
    let badJson = false;
    if (raw.text.length > 0) {
      try {
        record.body = JSON.parse(raw.text) as unknown;
      } catch {
        badJson = true;
      }
    }

    if (record.method === 'GET' && (path === '/v1/models' || path === '/v1/models/')) {
      const created = Math.floor(Date.now() / 1000);
      sendJson(res, record, 200, {
        object: 'list',
        data: models.map((id) => ({ id, object: 'model', created, owned_by: 'troupe-sim' })),
      });
      return;
    }
    if (path === '/sim/requests') {
      // For clients in another process (benchmarks, the load test): when each
      // request arrived, on this process's clock (epoch ms, sub-ms precision).
      if (record.method === 'DELETE') {
        requests.length = 0;
        sendJson(res, record, 200, { cleared: true });
        return;
      }
      const seen = requests
        .filter((r) => r.path !== '/sim/requests')
        .map(({ method, path: p, receivedAt, status, outcome, chunksWritten }) => ({
          method,
          path: p,
          receivedAt,
          status,
          outcome,
          chunksWritten,
        }));
      sendJson(res, record, 200, { requests: seen });
      return;
    }
    if (record.method !== 'POST' || path !== '/v1/chat/completions') {
      sendJson(res, record, 404, {
        error: {
          message: `No route for ${record.method} ${path}; the simulator serves GET /v1/models, POST /v1/chat/completions and GET/DELETE /sim/requests.`,
          type: 'invalid_request_error',
          code: 404,
        },
      });
      return;
    }

    const fault = faults.shift();
    if (fault !== undefined) record.fault = fault;
    if (fault?.type === 'http') {
      record.outcome = 'fault';
      const type =
        fault.status === 429
          ? 'rate_limit_error'
          : fault.status === 503
            ? 'overloaded'
            : 'server_error';
      const message =
        fault.message ??
        (fault.status === 429 ? 'Rate limit reached (simulated).' : 'Internal error (simulated).');
      sendJson(
        res,
        record,
        fault.status,
        { error: { message, type, code: fault.status } },
        fault.status === 429 ? { 'retry-after': '0' } : {},
      );
      return;
    }
    if (badJson) {
      record.outcome = 'rejected';
      sendJson(res, record, 400, badRequestBody('The request body is not valid JSON.'));
      return;
    }
    const problem = checkChatRequest(record.body);
    if (problem !== null) {
      record.outcome = 'rejected';
      sendJson(res, record, 400, badRequestBody(problem));
      return;
    }

    const controller = new AbortController();
    inflight.add(controller);
    const onClose = (): void => {
      if (!res.writableFinished) controller.abort('client-closed');
    };
    res.once('close', onClose);
    try {
      const ctx: ChatContext = {
        req,
        res,
        record,
        body: record.body as Record<string, unknown>,
        signal: controller.signal,
        fault,
      };
      await answerChat(ctx);
    } finally {
      res.off('close', onClose);
      if (record.outcome === 'pending') {
        record.outcome = controller.signal.aborted
          ? (controller.signal.reason as RequestOutcome)
          : 'complete';
      }
      inflight.delete(controller);
      if (inflight.size === 0) {
        const waiters = idleWaiters;
        idleWaiters = [];
        for (const wake of waiters) wake();
      }
    }
  }

  async function answerChat(ctx: ChatContext): Promise<void> {
    const { body, fault } = ctx;
    const n = chatCount++;
    // One generator per request, derived from the seed and the request's
    // position, so a given sequence of requests always gets the same bytes.
    const rng = createRng(Math.imul(seed, 0x9e3779b1) ^ Math.imul(n + 1, 0x85ebca6b));
    const messages = body.messages as ChatMessage[];
    const mode = toolModeOf(body);
    const reply = selectReply(script, messages, mode !== 'none', offeredTools(body)).reply;
    const plan = planReply(reply, {
      profile,
      mode,
      rng,
      corruptArguments: fault?.type === 'invalid-args',
    });
    const promptTokens = estimatePromptTokens(messages);
    const info = PROFILES[profile];
    const envelope = {
      id: info.newCompletionId(rng),
      created: Math.floor(Date.now() / 1000),
      model: body.model as string,
    };
    if (body.stream === true) {
      const streamOptions = (body.stream_options ?? {}) as Record<string, unknown>;
      const continuous =
        typeof streamOptions.continuous_usage_stats === 'boolean'
          ? streamOptions.continuous_usage_stats
          : (options.continuousUsage ?? info.continuousUsage);
      const frames = renderStream(plan, {
        profile,
        promptTokens,
        includeUsage: streamOptions.include_usage === true,
        continuousUsage: continuous,
        omitFinish: fault?.type === 'no-finish',
        rng,
      });
      await streamFrames(ctx, frames, envelope, rng);
    } else {
      await answerWhole(ctx, plan, promptTokens, envelope, rng);
    }
  }

  async function streamFrames(
    ctx: ChatContext,
    frames: StreamFrame[],
    envelope: { id: string; created: number; model: string },
    rng: Rng,
  ): Promise<void> {
    const { res, record, signal, fault } = ctx;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-request-id': envelope.id,
    });
    record.status = 200;
    // Headers go out at once, as real servers do; latency applies to chunks.
    res.flushHeaders();

    const total = frames.length;
    let faultAt = -1;
    if (
      fault?.type === 'reset' ||
      fault?.type === 'error-event' ||
      fault?.type === 'malformed-chunk' ||
      fault?.type === 'stall' ||
      fault?.type === 'end-without-done'
    ) {
      faultAt = Math.max(0, Math.min(fault.afterChunks ?? total, total));
    }
    let splitPending = fault?.type === 'split-utf8';
    const pacing = schedule(latency, rng);
    let lastWritten: Promise<void> = Promise.resolve();

    for (let i = 0; i <= total; i++) {
      if (signal.aborted) return;
      if (i === faultAt && fault !== undefined) {
        await lastWritten;
        await applyStreamFault(ctx, fault);
        return;
      }
      if (i === total) break;
      const target = pacing(i);
      if (target !== null) {
        // Timers run on a millisecond clock and may fire a little early:
        // sleep again until the target really is reached.
        for (let wait = target - performance.now(); wait > 0; wait = target - performance.now()) {
          try {
            await sleep(Math.max(1, wait), undefined, { signal });
          } catch {
            return; // aborted: the timer is already cleared
          }
        }
      }
      const sentAt = epochNow();
      const frame =
        options.stamp === true ? stampFrame(frames[i] as StreamFrame, sentAt) : frames[i];
      const text = `data: ${JSON.stringify({
        id: envelope.id,
        object: 'chat.completion.chunk',
        created: envelope.created,
        model: envelope.model,
        ...frame,
        x_sim_sent_at: sentAt,
      })}\n\n`;
      let ok: boolean;
      if (splitPending && Buffer.byteLength(text) !== text.length) {
        splitPending = false;
        ok = await writeSplitUtf8(res, Buffer.from(text), signal);
      } else if (i === faultAt - 1) {
        // The fault acts on the socket; let this chunk reach it first.
        const written = writeAndFlush(res, text);
        ok = written.ok;
        lastWritten = written.flushed;
      } else {
        ok = res.write(text);
      }
      record.chunksWritten++;
      if (!ok) await waitForDrain(res, signal);
    }
    if (signal.aborted) return;
    res.end('data: [DONE]\n\n');
  }

  async function applyStreamFault(ctx: ChatContext, fault: SimFault): Promise<void> {
    const { res, record, signal } = ctx;
    record.outcome = 'fault';
    switch (fault.type) {
      case 'reset':
        res.socket?.destroy();
        return;
      case 'error-event': {
        const error = {
          error: {
            message: fault.message ?? 'The model server failed mid-stream (simulated).',
            type: 'server_error',
            code: 500,
          },
        };
        res.end(`data: ${JSON.stringify(error)}\n\n`);
        return;
      }
      case 'malformed-chunk':
        res.end('data: {"choices":[{"index":0,"delta":{"content":"trunc\n\n');
        return;
      case 'stall':
        // Hold the socket open, writing nothing, until the client leaves or close().
        await new Promise<void>((resolve) => {
          if (signal.aborted) resolve();
          else signal.addEventListener('abort', () => resolve(), { once: true });
        });
        return;
      case 'end-without-done':
        res.end();
        return;
      default:
        return;
    }
  }

  async function answerWhole(
    ctx: ChatContext,
    plan: ReplyPlan,
    promptTokens: number,
    envelope: { id: string; created: number; model: string },
    rng: Rng,
  ): Promise<void> {
    const { res, record, signal, fault } = ctx;
    // The whole reply takes as long as streaming it would.
    const tps = latency.tokensPerSec;
    const jitter = latency.jitterMs > 0 ? (rng() * 2 - 1) * latency.jitterMs : 0;
    const wait = latency.ttftMs + (tps > 0 ? (plan.completionTokens * 1000) / tps : 0) + jitter;
    if (wait > 0) {
      try {
        await sleep(wait, undefined, { signal });
      } catch {
        return;
      }
    }
    if (fault?.type === 'reset') {
      record.outcome = 'fault';
      res.socket?.destroy();
      return;
    }
    if (fault?.type === 'stall') {
      record.outcome = 'fault';
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
      return;
    }
    if (fault?.type === 'malformed-chunk') {
      record.outcome = 'fault';
      res.writeHead(200, { 'content-type': 'application/json' });
      record.status = 200;
      res.end('{"choices":[{"index":0,"message":');
      return;
    }
    if (fault?.type === 'error-event') {
      record.outcome = 'fault';
      sendJson(res, record, 500, {
        error: {
          message: fault.message ?? 'The model server failed (simulated).',
          type: 'server_error',
          code: 500,
        },
      });
      return;
    }
    const body = {
      id: envelope.id,
      object: 'chat.completion',
      created: envelope.created,
      model: envelope.model,
      choices: [
        {
          index: 0,
          message: renderMessage(plan, profile),
          logprobs: null,
          finish_reason: fault?.type === 'no-finish' ? null : plan.finishReason,
        },
      ],
      usage: finalUsage(plan, promptTokens),
      x_sim_sent_at: performance.timeOrigin + performance.now(),
    };
    const bytes = Buffer.from(JSON.stringify(body));
    if (fault?.type === 'end-without-done') {
      // A body cut in half: the client's JSON parse must fail.
      record.outcome = 'fault';
      res.writeHead(200, { 'content-type': 'application/json' });
      record.status = 200;
      res.end(bytes.subarray(0, Math.floor(bytes.length / 2)));
      return;
    }
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': String(bytes.length),
    });
    record.status = 200;
    if (fault?.type === 'split-utf8') {
      await writeSplitUtf8(res, bytes, signal);
      if (!signal.aborted) res.end();
      return;
    }
    res.end(bytes);
  }

  const simulator: Simulator = {
    url: `http://${urlHost}:${port}/v1`,
    port,
    requests,
    setScript(next: SimScript): void {
      script = parseSimScript(next, 'passed to setScript');
    },
    setProfile(next: ProfileName): void {
      profile = checkProfile(next);
    },
    setLatency(next: SimulatorOptions['latency']): void {
      latency = checkLatency(next ?? {});
    },
    injectFault(fault: SimFault): void {
      faults.push(fault);
    },
    clearRequests(): void {
      requests.length = 0;
    },
    whenIdle(): Promise<void> {
      if (inflight.size === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        for (const controller of inflight) controller.abort('server-closed');
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

/**
 * When chunk i is due (a `performance.now()` time), from a fixed timeline —
 * start + ttft + i·interval, each with its own jitter — so timer rounding
 * does not add up over a stream. `null`: no pacing, write at once.
 */
function schedule(latency: Required<SimLatency>, rng: Rng): (i: number) => number | null {
  const start = performance.now();
  const interval = latency.tokensPerSec > 0 ? 1000 / latency.tokensPerSec : 0;
  const paced = latency.ttftMs > 0 || interval > 0 || latency.jitterMs > 0;
  return function dueAt(i: number): number | null {
    if (!paced) return null;
    const jitter = latency.jitterMs > 0 ? (rng() * 2 - 1) * latency.jitterMs : 0;
    const target = start + latency.ttftMs + i * interval + jitter;
    // Sub-millisecond waits would each round up to a whole timer tick.
    return target - performance.now() >= 1 ? target : null;
  };
}

/** The frame with its text fragment, if any, stamped with its send time. */
function stampFrame(frame: StreamFrame, sentAt: number): StreamFrame {
  const choice = frame.choices[0];
  const content = choice?.delta.content;
  if (choice === undefined || typeof content !== 'string' || content === '') return frame;
  return {
    ...frame,
    choices: [{ ...choice, delta: { ...choice.delta, content: stampText(content, sentAt) } }],
  };
}

function estimatePromptTokens(messages: readonly ChatMessage[]): number {
  let chars = 0;
  for (const m of messages) {
    chars += contentText(m.content).length;
    if (m.role === 'assistant') {
      for (const call of m.tool_calls ?? []) {
        chars += call.function.name.length + call.function.arguments.length;
      }
      if (m.function_call) chars += m.function_call.name.length + m.function_call.arguments.length;
    }
  }
  return Math.max(1, Math.ceil(chars / 4));
}

type BodyResult = { kind: 'ok'; text: string } | { kind: 'too-large' } | { kind: 'aborted' };

function readBody(req: IncomingMessage): Promise<BodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the limit, keep draining (so a 413 can be answered) but keep nothing.
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > MAX_BODY_BYTES) resolve({ kind: 'too-large' });
      else resolve({ kind: 'ok', text: Buffer.concat(chunks).toString('utf8') });
    });
    // 'close' before 'end': the client went away mid-body.
    req.on('close', () => resolve({ kind: 'aborted' }));
  });
}

function sendJson(
  res: ServerResponse,
  record: RecordedRequest | undefined,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(bytes.length),
    ...headers,
  });
  if (record !== undefined) record.status = status;
  res.end(bytes);
}

function waitForDrain(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      res.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.on('drain', done);
    signal.addEventListener('abort', done);
  });
}

/** Writes a chunk; `flushed` resolves once it has been handed to the socket. */
function writeAndFlush(res: ServerResponse, text: string): { ok: boolean; flushed: Promise<void> } {
  let ok = true;
  const flushed = new Promise<void>((resolve) => {
    ok = res.write(text, () => resolve());
  });
  return { ok, flushed };
}

/** Writes bytes in two writes that cut the first multi-byte character in half. */
async function writeSplitUtf8(
  res: ServerResponse,
  bytes: Buffer,
  signal: AbortSignal,
): Promise<boolean> {
  // A lead byte of a multi-byte sequence is 11xxxxxx.
  const lead = bytes.findIndex((b) => b >= 0xc0);
  if (lead < 0) return res.write(bytes);
  await new Promise<void>((resolve) => res.write(bytes.subarray(0, lead + 1), () => resolve()));
  try {
    await sleep(SPLIT_UTF8_PAUSE_MS, undefined, { signal });
  } catch {
    return true;
  }
  return res.write(bytes.subarray(lead + 1));
}
