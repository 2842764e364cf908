import { setMaxListeners } from 'node:events';
import type { z } from 'zod';
import { TroupeError, errorLine } from '../errors.js';
import {
  DEFAULT_MAX_PARALLEL_TOOL_CALLS,
  DEFAULT_MAX_TOOL_OUTPUT_BYTES,
  DEFAULT_TOOL_TIMEOUT_MS,
} from './constants.js';
import type { Toolset } from './library.js';
import {
  MAX_PROGRESS_CHARS,
  type RunnableTool,
  type ToolCall,
  type ToolContext,
  type ToolLogger,
  type ToolOutcome,
  type ToolResult,
} from './types.js';
import { preview, valueAt } from './preview.js';

/** Options of the tool executor. */
export interface ExecutorOptions {
  /** The turn's signal: cancel and barge-in abort cancellable tools. */
  signal: AbortSignal;
  /** The session the calls belong to (handed to handlers as `ctx.session`). */
  session: ToolContext['session'];
  /** Logger for outcomes; handlers get a child of it. */
  log: ToolLogger;
  /** Timeout of tools that do not set their own. @defaultValue 100 */
  defaultTimeoutMs?: number;
  /** Cap on the output the model sees, in UTF-8 bytes. @defaultValue 16384 */
  maxOutputBytes?: number;
  /** Calls of one batch that run; later ones end as `error` without running. @defaultValue 32 */
  maxParallelCalls?: number;
  /**
   * Runs `background: true` tools beside the turn (the session's); unset =
   * they run inline like any tool.
   */
  background?: BackgroundStarter;
}

/** A tool timed out; the handler's signal carries this as its reason. */
export class ToolTimeoutError extends TroupeError {
  override name = 'ToolTimeoutError';
  constructor(tool: string, ms: number) {
    super('E_TOOL_TIMEOUT', `tool ${tool} did not finish within ${ms} ms`);
  }
}

/** The arguments of a call could not be used. */
export class InvalidToolArgumentsError extends TroupeError {
  override name = 'InvalidToolArgumentsError';
  constructor(message: string) {
    super('E_TOOL_ARGS', message);
  }
}

/**
 * Starts every call at once and returns one promise per call, in call order.
 * Each promise resolves (never rejects) with exactly one outcome.
 */
export function executeToolCalls(
  calls: readonly ToolCall[],
  toolset: Toolset,
  options: ExecutorOptions,
): Promise<ToolResult>[] {
  const max = options.maxParallelCalls ?? DEFAULT_MAX_PARALLEL_TOOL_CALLS;
  if (calls.length > max) {
    const run = executeToolCalls(calls.slice(0, max), toolset, options);
    const refused = calls.slice(max).map((call) => {
      options.log.warn(
        { tool: call.name, callId: call.id, max },
        'tool call over the parallel limit',
      );
      return Promise.resolve<ToolResult>({
        callId: call.id,
        name: call.name,
        outcome: 'error',
        output: `Error: ${call.name} was not run: at most ${max} tool calls run per reply. Call it again if it is still needed.`,
        durationMs: 0,
        handlerMs: 0,
        variant: toolset.variant,
      });
    });
    return [...run, ...refused];
  }
  if (calls.length <= 1) return calls.map((call) => executeToolCall(call, toolset, options));
  // One listener on the turn's signal for the whole batch: a model may make
  // dozens of parallel calls, and the turn's signal is not ours to raise limits on.
  const batch = new AbortController();
  setMaxListeners(0, batch.signal);
  const forward = () => batch.abort(options.signal.reason);
  if (options.signal.aborted) forward();
  else options.signal.addEventListener('abort', forward, { once: true });
  const results = calls.map((call) =>
    executeToolCall(call, toolset, { ...options, signal: batch.signal }),
  );
  void Promise.all(results).then(() => options.signal.removeEventListener('abort', forward));
  return results;
}

/** A call whose tool exists and whose arguments passed validation, ready to run. */
export interface PreparedCall {
  call: ToolCall;
  tool: RunnableTool;
  args: Record<string, unknown>;
  variant: string;
}

/** Where background calls go: the session starts them and reports their end later. */
export interface BackgroundStarter {
  /**
   * Starts a background call; returns what the model is told now, or an
   * error text when the call cannot start (then the call ends as `error`).
   */
  start(prepared: PreparedCall): { ok: true; output: string } | { ok: false; output: string };
  /** The client has the call's "started" result (progress and an end it held may go out now). */
  announced?(callId: string): void;
  /** The response that started calls has ended: nothing of them waits any longer. */
  responseEnded?(): void;
}

/** Runs one call: parse, validate, run under timeout and signal, encode and cap the output. */
export async function executeToolCall(
  call: ToolCall,
  toolset: Toolset,
  options: ExecutorOptions,
): Promise<ToolResult> {
  const started = performance.now();
  const prepared = prepareToolCall(call, toolset, options, started);
  if ('outcome' in prepared) return prepared;
  const { tool, args } = prepared;
  const background = options.background;
  if (tool.background && background) {
    const begun = background.start(prepared);
    return finishCall(
      call,
      toolset.variant,
      options,
      started,
      0,
      begun.ok ? 'ok' : 'error',
      begun.output,
      {
        args,
        ...(begun.ok ? { background: 'started' as const } : {}),
      },
    );
  }
  // Without a session to run it beside the turn (the author kit's plain
  // runs, prompt mode tools alike), a background tool runs inline.
  return runPreparedCall(prepared, options, started);
}

/**
 * Looks the tool up and validates the arguments: a {@link PreparedCall}, or
 * the call's result when it cannot run (`unknown_tool`, `invalid_args`).
 */
export function prepareToolCall(
  call: ToolCall,
  toolset: Toolset,
  options: Pick<ExecutorOptions, 'log' | 'maxOutputBytes'>,
  started = performance.now(),
): PreparedCall | ToolResult {
  const variant = toolset.variant;
  const tool = toolset.tools.get(call.name);
  if (!tool) {
    const names = [...toolset.tools.keys()];
    return finishCall(
      call,
      variant,
      options,
      started,
      0,
      'unknown_tool',
      `Error: there is no tool named ${JSON.stringify(call.name)}. ` +
        (names.length ? `Available tools: ${names.join(', ')}.` : 'No tools are available.'),
    );
  }

  const parsed = parseToolArguments(call.arguments);
  if (!parsed.ok) {
    return finishCall(
      call,
      variant,
      options,
      started,
      0,
      'invalid_args',
      `Error: the arguments for ${call.name} were not ${parsed.reason}. ` +
        `Call it again with a JSON object matching its parameters.`,
      { error: new InvalidToolArgumentsError(parsed.reason) },
    );
  }
  const checked = tool.schema.safeParse(parsed.value);
  if (!checked.success) {
    const detail = describeIssues(checked.error.issues, parsed.value);
    return finishCall(
      call,
      variant,
      options,
      started,
      0,
      'invalid_args',
      `Error: invalid arguments for ${call.name}: ${detail}. Call it again with corrected arguments.`,
      { error: new InvalidToolArgumentsError(detail) },
    );
  }
  return { call, tool, args: checked.data as Record<string, unknown>, variant };
}

/** Extra inputs of a run: a background call's progress reporter and timeout. */
export interface RunExtras {
  /** Receives `ctx.progress(text)`; unset = progress is logged at debug level. */
  progress?: (text: string) => void;
  /** Overrides the tool's and the options' timeout. */
  timeoutMs?: number;
}

/** Runs a prepared call's handler under its timeout and signal; one outcome, never rejects. */
export async function runPreparedCall(
  prepared: PreparedCall,
  options: ExecutorOptions,
  started = performance.now(),
  extras: RunExtras = {},
): Promise<ToolResult> {
  const { call, tool, args, variant } = prepared;
  let handlerMs = 0;
  const finish = (
    outcome: ToolOutcome,
    output: string,
    extra: { args?: Record<string, unknown>; error?: unknown } = {},
  ): ToolResult => finishCall(call, variant, options, started, handlerMs, outcome, output, extra);

  const cancellable = tool.cancellable ?? true;
  if (cancellable && options.signal.aborted) {
    return finish('cancelled', `Error: ${call.name} was cancelled before it ran.`, { args });
  }

  const timeoutMs =
    extras.timeoutMs ?? tool.timeoutMs ?? options.defaultTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  const controller = new AbortController();
  const log = childLog(options.log, { tool: call.name, callId: call.id, variant });
  const report = extras.progress;
  const ctx: ToolContext = {
    signal: controller.signal,
    callId: call.id,
    session: options.session,
    log,
    variant,
    progress: (text) => {
      const line = String(text).slice(0, MAX_PROGRESS_CHARS);
      if (report && !controller.signal.aborted) report(line);
      else log.debug({ progress: line }, 'tool progress');
    },
  };

  type Settled =
    | { kind: 'value'; value: unknown }
    | { kind: 'throw'; error: unknown }
    | { kind: 'timeout' }
    | { kind: 'cancelled' };
  // Time the handler held the event loop in its own call: no timer can cut that short.
  let blockedMs = 0;
  // A result that comes past the deadline (the loop held, so the timer could not fire) is late all the same.
  let late = false;
  let timer: NodeJS.Timeout | undefined;
  let onTurnAbort: (() => void) | undefined;
  const handlerStarted = performance.now();
  const settled = await new Promise<Settled>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new ToolTimeoutError(call.name, timeoutMs));
      resolve({ kind: 'timeout' });
    }, timeoutMs);
    if (cancellable) {
      onTurnAbort = () => {
        controller.abort(options.signal.reason);
        resolve({ kind: 'cancelled' });
      };
      options.signal.addEventListener('abort', onTurnAbort, { once: true });
    }
    // A handler may throw synchronously, return a value, or return a promise;
    // a late settlement after a timeout is ignored (resolve is idempotent).
    // One that held the event loop past its timeout ends as a timeout all the same.
    Promise.resolve()
      .then(() => {
        const called = performance.now();
        try {
          return tool.handler(args, ctx);
        } finally {
          blockedMs = performance.now() - called;
        }
      })
      .then(
        (value) => resolve(overran() ? { kind: 'timeout' } : { kind: 'value', value }),
        (error: unknown) => resolve(overran() ? { kind: 'timeout' } : { kind: 'throw', error }),
      );
    const overran = (): boolean =>
      (late = performance.now() - handlerStarted > timeoutMs && !controller.signal.aborted);
  });
  handlerMs = performance.now() - handlerStarted;
  clearTimeout(timer);
  if (onTurnAbort) options.signal.removeEventListener('abort', onTurnAbort);

  if (late) {
    controller.abort(new ToolTimeoutError(call.name, timeoutMs));
    const fields = {
      blockedMs: Math.round(blockedMs),
      handlerMs: Math.round(handlerMs),
      timeoutMs,
    };
    if (blockedMs > timeoutMs) {
      log.warn(
        fields,
        'tool handler held the event loop past its timeout: every session waited; move CPU-bound work to a worker thread',
      );
    } else {
      log.warn(
        fields,
        'tool handler finished past its timeout while the event loop was held (by it, or by other work): its result is dropped',
      );
    }
  }
  switch (settled.kind) {
    case 'timeout':
      return finish('timeout', `Error: ${call.name} did not finish within ${timeoutMs} ms.`, {
        args,
        error: controller.signal.reason,
      });
    case 'cancelled':
      return finish('cancelled', `Error: ${call.name} was cancelled.`, { args });
    case 'throw':
      return finish('error', `Error: ${call.name} failed: ${errorLine(settled.error)}`, {
        args,
        error: settled.error,
      });
    case 'value': {
      const encoded = encodeOutput(settled.value);
      if (!encoded.ok) {
        return finish(
          'error',
          `Error: ${call.name} returned a value that cannot be sent as JSON (${encoded.reason}).`,
          { args, error: encoded.error },
        );
      }
      return finish('ok', encoded.text, { args });
    }
  }
}

/** A call's result: the output capped, the outcome logged (failures after the turn moves on). */
function finishCall(
  call: ToolCall,
  variant: string,
  options: Pick<ExecutorOptions, 'log' | 'maxOutputBytes'>,
  started: number,
  handlerMs: number,
  outcome: ToolOutcome,
  output: string,
  extra: { args?: Record<string, unknown>; error?: unknown; background?: 'started' } = {},
): ToolResult {
  const result: ToolResult = {
    callId: call.id,
    name: call.name,
    outcome,
    output: capOutput(output, options.maxOutputBytes ?? DEFAULT_MAX_TOOL_OUTPUT_BYTES),
    durationMs: performance.now() - started,
    handlerMs,
    variant,
    ...extra,
  };
  if (outcome === 'ok') {
    options.log.debug(
      { tool: call.name, callId: call.id, outcome, variant, durationMs: result.durationMs },
      extra.background ? 'background tool call started' : 'tool call done',
    );
  } else if (outcome === 'cancelled') {
    // A cancel, a barge-in or a close stopped it: the caller logs that once.
    options.log.debug({ tool: call.name, callId: call.id, variant }, 'tool call cancelled');
  } else {
    // After the turn moves on: the first error a process serialises (its
    // stack, through source maps) costs tens of ms, and must not delay the
    // next LLM request.
    const fields = { tool: call.name, callId: call.id, outcome, variant, err: extra.error };
    setImmediate(() => options.log.warn(fields, 'tool call failed'));
  }
  return result;
}

/**
 * Parses a call's raw argument text. Empty, whitespace or `null` arguments mean
 * "no arguments" (servers send all three for no-parameter tools).
 */
export function parseToolArguments(
  raw: string,
): { ok: true; value: Record<string, unknown> } | { ok: false; reason: string } {
  const text = raw.trim();
  if (text === '' || text === 'null') return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: `valid JSON (${(err as Error).message})` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      ok: false,
      reason: `a JSON object (got ${Array.isArray(value) ? 'an array' : typeof value})`,
    };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

/** Says which arguments are wrong, what was sent and what is allowed. */
export function describeIssues(issues: readonly z.core.$ZodIssue[], input: unknown): string {
  const parts = issues.slice(0, 5).map((issue) => {
    const path = issue.path.length ? issue.path.map(String).join('.') : '(arguments)';
    const got = valueAt(input, issue.path);
    if (got === undefined && issue.code === 'invalid_type') {
      return `${path}: required (expected ${issue.expected})`;
    }
    let message = issue.message
      .replace(/^Invalid (input|option): /, '')
      .replace(/^expected int, received number$/, 'expected an integer');
    // A missing enum or literal field is reported by zod as a bad value; say it is missing.
    if (got === undefined && issue.code === 'invalid_value')
      return `${path}: required (${message})`;
    if (issue.code === 'unrecognized_keys') message = `unexpected ${issue.keys.join(', ')}`;
    return got === undefined ? `${path}: ${message}` : `${path}: ${message}, got ${preview(got)}`;
  });
  if (issues.length > 5) parts.push(`and ${issues.length - 5} more`);
  return parts.join('; ');
}

/** Strings pass through; everything else is JSON-encoded. */
export function encodeOutput(
  value: unknown,
): { ok: true; text: string } | { ok: false; reason: string; error: unknown } {
  if (typeof value === 'string') return { ok: true, text: value };
  try {
    return { ok: true, text: JSON.stringify(value) ?? 'null' };
  } catch (error) {
    return { ok: false, reason: errorLine(error), error };
  }
}

/** Cuts output to `maxBytes` of UTF-8 on a character boundary and says so. */
export function capOutput(text: string, maxBytes: number): string {
  // Fast path: a UTF-16 length within a third of the cap is always within it in UTF-8.
  if (text.length * 3 <= maxBytes) return text;
  const bytes = Buffer.byteLength(text);
  if (bytes <= maxBytes) return text;
  let cut = Buffer.from(text).subarray(0, maxBytes).toString('utf8');
  if (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1);
  return `${cut}\n[output truncated: ${Buffer.byteLength(cut)} of ${bytes} bytes shown]`;
}

function childLog(log: ToolLogger, fields: object): ToolLogger {
  const withChild = log as ToolLogger & { child?: (f: object) => ToolLogger };
  return typeof withChild.child === 'function' ? withChild.child(fields) : log;
}
