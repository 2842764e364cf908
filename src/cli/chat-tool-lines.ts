/**
 * The chat renderer's tool lines: a call's line (name and arguments) once its
 * arguments are known, its result line (outcome, time, output), and the
 * progress and end of background calls. Keeps the calls in flight, since a
 * result event needs the call's line out first.
 */
import type { ChatLayout } from './chat-layout.js';
import {
  compact,
  formatDuration,
  shorten,
  str,
  type Output,
  type Paint,
  type ServerEvent,
  type Style,
} from './chat-text.js';

/** Longest tool-argument text shown on a call line. */
export const MAX_ARGUMENTS_PREVIEW_CHARS = 120;
/** Longest tool-output text shown on a result line. */
export const MAX_OUTPUT_PREVIEW_CHARS = 100;

/** The tool calls of one connection, as lines. */
export class ToolLines {
  /** Tool calls by call_id: name, arguments, whether the call line is out. */
  #calls = new Map<string, { name: string; args: string; shown: boolean }>();
  #layout: ChatLayout;
  #paint: Record<Style, Paint>;
  /** Cut arguments and successful outputs to one short line. */
  #cut: boolean;

  constructor(layout: ChatLayout, paint: Record<Style, Paint>, cut: boolean) {
    this.#layout = layout;
    this.#paint = paint;
    this.#cut = cut;
  }

  /** Records (or updates) a call from an item or event; returns its call id. */
  track(item: Record<string, unknown>): string | undefined {
    const callId = str(item.call_id) ?? str(item.id);
    if (callId === undefined) return undefined;
    const known = this.#calls.get(callId);
    const name = str(item.name) ?? known?.name ?? 'tool';
    const args = compact(item.arguments) || (known?.args ?? '');
    this.#calls.set(callId, { name, args, shown: known?.shown ?? false });
    return callId;
  }

  /** The call's line, once: nothing if it is unknown or already out. */
  callLine(callId: string): Output[] {
    const call = this.#calls.get(callId);
    if (call === undefined || call.shown) return [];
    call.shown = true;
    const paint = this.#paint;
    const args = this.#cut ? shorten(call.args, MAX_ARGUMENTS_PREVIEW_CHARS) : call.args;
    return this.#layout.line(
      `  ${paint.cyan('[tool]')} ${paint.cyan(call.name)} ${paint.dim(args || '{}')}`,
    );
  }

  /** `response.output_item.added` / `.done`: tracks calls, shows a function call when done. */
  itemLines(type: string, item: Record<string, unknown>): Output[] {
    if (item.type === 'mcp_call') {
      // A tool the server runs (GA mcp_call): its line shows at mcp_call_arguments.done,
      // and its item is done only after its result.
      if (type === 'response.output_item.added') this.track(item);
      return [];
    }
    if (item.type !== 'function_call') return [];
    const callId = this.track(item);
    // `.done` carries the final arguments: show the call if nothing else did yet.
    return type === 'response.output_item.done' && callId !== undefined
      ? this.callLine(callId)
      : [];
  }

  /** `troupe.tool_call.result`: the call's line if not out yet, then its result. */
  resultLine(event: ServerEvent): Output[] {
    const calls = this.#calls;
    const paint = this.#paint;
    // A server-run tool's call is known by its mcp_call item's id.
    const itemId = str(event.item_id);
    const callId =
      itemId !== undefined && !calls.has(str(event.call_id) ?? '') && calls.has(itemId)
        ? itemId
        : (str(event.call_id) ?? '');
    if (!calls.has(callId)) {
      calls.set(callId, { name: str(event.name) ?? 'tool', args: '', shown: false });
    }
    const result = this.callLine(callId);
    const name = str(event.name) ?? calls.get(callId)?.name ?? 'tool';
    const outcome = str(event.outcome) ?? 'done';
    const colour = outcome === 'ok' ? paint.green : outcome === 'error' ? paint.red : paint.yellow;
    const ms =
      typeof event.duration_ms === 'number' ? ` in ${formatDuration(event.duration_ms)}` : '';
    const full = compact(event.output);
    const output =
      this.#cut && outcome === 'ok'
        ? shorten(full, MAX_OUTPUT_PREVIEW_CHARS)
        : full.replace(/\s+/g, ' ').trim();
    result.push(
      ...this.#layout.line(
        `  ${paint.cyan('[tool]')} ${paint.cyan(name)} → ${colour(outcome)}${ms}` +
          (output ? `: ${paint.dim(output)}` : ''),
      ),
    );
    calls.delete(callId);
    return result;
  }

  /** `troupe.background_tool.progress`: what a background call says meanwhile. */
  progressLine(event: ServerEvent): Output[] {
    const paint = this.#paint;
    const name = str(event.name) ?? 'tool';
    return this.#layout.line(
      `  ${paint.cyan('[tool]')} ${paint.cyan(name)} … ${paint.dim(compact(event.text))}`,
    );
  }

  /** `troupe.background_tool.done`: how a background call ended. */
  backgroundDoneLine(event: ServerEvent): Output[] {
    const paint = this.#paint;
    const name = str(event.name) ?? 'tool';
    const outcome = str(event.outcome) ?? 'done';
    const colour = outcome === 'ok' ? paint.green : paint.yellow;
    const full = compact(event.output);
    const output = this.#cut ? shorten(full, MAX_OUTPUT_PREVIEW_CHARS) : full;
    const ms =
      typeof event.duration_ms === 'number' ? ` in ${formatDuration(event.duration_ms)}` : '';
    return this.#layout.line(
      `  ${paint.cyan('[tool]')} ${paint.cyan(name)} (background) → ${colour(outcome)}${ms}: ${paint.dim(output)}`,
    );
  }
}
