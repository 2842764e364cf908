import type { z } from 'zod';

/** How a tool call ended. Exactly one per call, recorded in history, metrics and logs. */
export type ToolOutcome =
  'ok' | 'invalid_args' | 'error' | 'timeout' | 'cancelled' | 'unknown_tool';

/** All outcomes, for metrics that want every label present from the start. */
export const TOOL_OUTCOMES: readonly ToolOutcome[] = [
  'ok',
  'invalid_args',
  'error',
  'timeout',
  'cancelled',
  'unknown_tool',
];

/** Minimal logger shape (pino-compatible) handed to tool handlers. */
export interface ToolLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/** What a handler receives besides its arguments. */
export interface ToolContext {
  /** Aborts on timeout, turn cancel or barge-in; pass it on to anything async. */
  signal: AbortSignal;
  /** The id of this call as the model sent it. */
  callId: string;
  /** The session the call belongs to. */
  session: { id: string; character: string; state: Record<string, unknown> };
  /** A child logger carrying session, character and tool fields. */
  log: ToolLogger;
  /** The tool-library variant serving this session (A/B), `default` when none. */
  variant: string;
  /**
   * Reports progress of a background tool (`troupe.background_tool.progress`
   * to the client; spoken in voice when the tool sets `speakProgress`). Text
   * past {@link MAX_PROGRESS_CHARS} is cut. An inline tool's progress is only logged.
   */
  progress: (text: string) => void;
}

/** Longest progress text a background tool may report at once. */
export const MAX_PROGRESS_CHARS = 500;

/** A handler: validated arguments in, anything JSON-serialisable (or a string) out. */
export type ToolHandler<Args = Record<string, unknown>> = (args: Args, ctx: ToolContext) => unknown;

/** The description of a tool as the model sees it (OpenAI function format). */
export interface ToolDescription {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

/** Per-tool behaviour beyond its description. */
export interface ToolBehaviour {
  /**
   * Time the handler gets before the call ends as `timeout`.
   * @defaultValue 100 (a background tool: 30000, `DEFAULT_BACKGROUND_TOOL_TIMEOUT_MS`)
   */
  timeoutMs?: number;
  /**
   * Whether a turn cancel (or barge-in) aborts this tool. A tool that is not
   * cancellable finishes and its result is recorded. @defaultValue true (a
   * background tool: false; only closing the session stops it)
   */
  cancellable?: boolean;
  /**
   * Runs the tool in the background: the model is told at once that the work
   * has started and the turn goes on; the result enters the conversation when
   * the handler finishes, and the character tells the user at the next pause.
   * @defaultValue false
   */
  background?: boolean;
  /** Speak a background tool's `ctx.progress(text)` in voice sessions (when nothing else is said). @defaultValue false */
  speakProgress?: boolean;
  /** Text a voice session may speak if the tool has not finished after `filler.afterMs`. */
  filler?: { text: string; afterMs: number };
}

/**
 * A tool ready to run: its description, the validator of its arguments and
 * its handler. Both authoring styles (zod `defineTool`, OpenAI JSON + one
 * `handleToolCall`) become this.
 */
export interface RunnableTool extends ToolBehaviour {
  description: ToolDescription;
  /** Validates and applies defaults; built from zod or from the JSON Schema. */
  schema: z.ZodType;
  handler: ToolHandler;
  /** The MCP server the tool comes from: `server_label` of its `mcp_call` items. @defaultValue the character's id */
  serverLabel?: string;
}

/** A tool call as the model made it, assembled from the stream. */
export interface ToolCall {
  id: string;
  name: string;
  /** The raw argument text the model produced (may be invalid JSON). */
  arguments: string;
}

/** The result of running one tool call. */
export interface ToolResult {
  callId: string;
  name: string;
  outcome: ToolOutcome;
  /** What the model is told (already capped). */
  output: string;
  /** Validated arguments when validation passed. */
  args?: Record<string, unknown>;
  durationMs: number;
  /** Time spent inside the handler itself (0 when it never ran). */
  handlerMs: number;
  variant: string;
  /** For non-ok outcomes: the detail that goes to logs only (stack, zod issues). */
  error?: unknown;
  /**
   * `started`: a background call that began; `output` is what the model is
   * told now and `outcome` is not the call's outcome (that comes later, in a
   * result with `background: 'done'`).
   */
  background?: 'started' | 'done';
}

/** How a tool call runs, the `mode` label of `troupe_tool_calls_total`. */
export type ToolCallMode = 'inline' | 'background' | 'client';
