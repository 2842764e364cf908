/**
 * The simulator's public types: its options and latency model, the faults
 * it can inject, the requests it records and the running simulator's handle.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { ProfileName } from './profiles.js';
import type { SimScript } from './script.js';

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
  /**
   * How many of the latest requests `requests` (and `GET /sim/requests`)
   * keep: older ones are dropped, so a simulator that runs for hours (the
   * demo, a load test) holds a bounded log. @defaultValue 1000
   */
  keepRequests?: number;
}

/** A one-shot fault for the next chat request; several queue up in order. */
export type SimFault =
  /** None: the request is answered as usual, so the fault queued after it meets the next one (a tool round's follow-up). */
  | { type: 'none' }
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
  /** The requests received, in order (including GET /v1/models): the latest `keepRequests`. */
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

/** One chat request being answered. */
export interface ChatContext {
  req: IncomingMessage;
  res: ServerResponse;
  record: RecordedRequest;
  body: Record<string, unknown>;
  signal: AbortSignal;
  fault: SimFault | undefined;
}

/** The id, time and model every chunk or body of one completion carries. */
export interface Envelope {
  id: string;
  created: number;
  model: string;
}
