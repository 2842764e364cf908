/**
 * What MCP connections and calls record, labelled by the server's `label`.
 * prom-client's Counter, Gauge and Histogram fit; `src/metrics` makes them.
 */

/** How an MCP call ended, as `troupe_mcp_calls_total` counts it. */
export type McpCallOutcome = 'ok' | 'error' | 'failed' | 'timeout' | 'cancelled';

/** Every {@link McpCallOutcome}, for metrics that start at zero. */
export const MCP_CALL_OUTCOMES: readonly McpCallOutcome[] = [
  'ok',
  'error',
  'failed',
  'timeout',
  'cancelled',
];

/** The MCP metrics of one server (a Prometheus registry). */
export interface McpMetrics {
  /** Calls by server and outcome (ok; error: the server's isError; failed: no answer; timeout; cancelled). */
  calls: { inc(labels: { server: string; outcome: McpCallOutcome }, value?: number): void };
  /** Time from sending a call to its answer (or its end), by server. */
  callSeconds: { observe(labels: { server: string }, seconds: number): void };
  /** Whether the server is connected (1) or not (0). */
  connected: { set(labels: { server: string }, value: number): void };
  /** Connection attempts (the MCP handshake) by server and outcome (ok, failed). */
  connects: { inc(labels: { server: string; outcome: 'ok' | 'failed' }): void };
  /** Connections made again after the previous one was lost (not reloads). */
  reconnects: { inc(labels: { server: string }): void };
  /** Connections lost: the stdio process exited, the HTTP session ended, a request broke. */
  disconnects: { inc(labels: { server: string }): void };
  /** Tools the characters offer from the server (after allowedTools), as of the last load. */
  tools: { set(labels: { server: string }, value: number): void };
}
