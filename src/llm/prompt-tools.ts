import type { ToolDescription, ToolResult } from '../tools/types.js';

/** The marker a model writes, in prompt-based tool mode, to call a tool. */
export const TOOL_CALL_MARKER = 'TOOL_CALL:';
/** The marker of tool results fed back to the model in prompt-based tool mode. */
export const TOOL_RESULT_MARKER = 'TOOL_RESULT:';
/** A tool-call payload longer than this is given up on as malformed. */
const MAX_PROMPT_CALL_CHARS = 64 * 1024;

/**
 * The system-prompt section that teaches a model without native tool calling
 * to call tools by writing `TOOL_CALL: {...}` lines.
 */
export function promptToolsInstructions(tools: readonly ToolDescription[]): string {
  const list = tools
    .map(
      (t) =>
        `- ${t.name}: ${t.description}\n  parameters (JSON Schema): ${JSON.stringify(t.parameters)}`,
    )
    .join('\n');
  return [
    '# Tools',
    'You can call these tools:',
    list,
    '',
    'To call a tool, write a line of its own, exactly like this, and nothing else on it:',
    `${TOOL_CALL_MARKER} {"tool_name": "<name>", "parameters": {<arguments as JSON>}}`,
    'You may call several tools, one line each. Then stop and wait: the results come back in',
    `a message whose lines start with ${TOOL_RESULT_MARKER}. Use them to answer the user.`,
    'Never show these lines to the user in any other way.',
  ].join('\n');
}

/** A tool call read from the text, or a line that looked like one but could not be read. */
export type PromptCall =
  { ok: true; name: string; arguments: string } | { ok: false; raw: string; reason: string };

/** What one piece of streamed text yields: text to show and calls found. */
export interface FilterOutput {
  text: string;
  calls: PromptCall[];
}

/**
 * Finds `TOOL_CALL: {...}` in streamed text — also when the marker or the JSON
 * is split across chunks — and withholds it from the text output. Text that
 * might be the start of a marker is held back only until it is clearly not.
 *
 * @example
 * const f = new PromptToolCallFilter();
 * f.push('Let me check.\nTOOL_CA'); // { text: 'Let me check.\n', calls: [] }
 * f.push('LL: {"tool_name":"x","parameters":{}}\n'); // { text: '', calls: [{ ok: true, name: 'x', … }] }
 */
export class PromptToolCallFilter {
  #carry = '';
  #inCall = false;
  #json = '';
  #depth = 0;
  #inString = false;
  #escape = false;
  #afterCall = false;
  /** The rest of a marker line that holds no JSON, swallowed up to its newline. */
  #badLine: string | undefined;

  /** Feeds a text delta. */
  push(delta: string): FilterOutput {
    const out: FilterOutput = { text: '', calls: [] };
    let s = this.#carry + delta;
    this.#carry = '';
    while (s !== '') {
      if (this.#inCall) {
        const used = this.#scanJson(s, out);
        s = s.slice(used);
        continue;
      }
      if (this.#badLine !== undefined) {
        // Reported once the whole line is in: it may come over several chunks.
        const nl = s.indexOf('\n');
        this.#badLine += nl < 0 ? s : s.slice(0, nl);
        if (nl < 0) break;
        this.#reportBadLine(out);
        this.#afterCall = true;
        s = s.slice(nl);
        continue;
      }
      if (this.#afterCall) {
        // Swallow the rest of the call's line (spaces and its newline).
        const m = /^[ \t]*\r?\n?/.exec(s)!;
        s = s.slice(m[0].length);
        if (m[0].endsWith('\n') || s !== '') this.#afterCall = false;
        continue;
      }
      const at = s.indexOf(TOOL_CALL_MARKER);
      if (at >= 0) {
        // Text before the marker goes out as is: spaces before it may already
        // have gone out with an earlier chunk, and trimming only those in this
        // chunk would glue "Sure. TOOL_CALL: {…} Done." into "Sure.Done.".
        out.text += s.slice(0, at);
        s = s.slice(at + TOOL_CALL_MARKER.length);
        this.#startCall();
        continue;
      }
      const keep = partialMarkerSuffix(s);
      out.text += s.slice(0, s.length - keep);
      this.#carry = s.slice(s.length - keep);
      s = '';
    }
    return out;
  }

  /** Ends the stream: withheld text comes out; an unfinished call is reported as malformed. */
  end(): FilterOutput {
    const out: FilterOutput = { text: this.#carry, calls: [] };
    this.#carry = '';
    if (this.#badLine !== undefined) this.#reportBadLine(out);
    if (this.#inCall) {
      this.#inCall = false;
      out.calls.push({
        ok: false,
        raw: this.#json.trim(),
        reason: 'the JSON ended before it was complete',
      });
    }
    return out;
  }

  #reportBadLine(out: FilterOutput): void {
    out.calls.push({
      ok: false,
      raw: this.#badLine!.trim(),
      reason: 'no JSON object after the marker',
    });
    this.#badLine = undefined;
  }

  #startCall(): void {
    this.#inCall = true;
    this.#json = '';
    this.#depth = 0;
    this.#inString = false;
    this.#escape = false;
  }

  /** Consumes JSON text of a call; returns how many chars of `s` it used. */
  #scanJson(s: string, out: FilterOutput): number {
    for (let i = 0; i < s.length; i++) {
      const c = s[i]!;
      if (this.#depth === 0) {
        // Models also put the JSON on the line after the marker.
        if (c === ' ' || c === '\t' || c === '\n' || c === '\r') continue;
        if (c !== '{') {
          // Not JSON after the marker: the rest of the line is the payload,
          // reported (and hidden) once its newline or the stream end arrives.
          this.#inCall = false;
          this.#badLine = '';
          return i;
        }
      }
      this.#json += c;
      if (this.#inString) {
        if (this.#escape) this.#escape = false;
        else if (c === '\\') this.#escape = true;
        else if (c === '"') this.#inString = false;
      } else if (c === '"') this.#inString = true;
      else if (c === '{') this.#depth++;
      else if (c === '}' && --this.#depth === 0) {
        this.#inCall = false;
        this.#afterCall = true;
        out.calls.push(readPromptCall(this.#json));
        return i + 1;
      }
      if (this.#json.length > MAX_PROMPT_CALL_CHARS) {
        this.#inCall = false;
        out.calls.push({
          ok: false,
          raw: this.#json.slice(0, 200),
          reason: 'the call is too long',
        });
        return i + 1;
      }
    }
    return s.length;
  }
}

function readPromptCall(json: string): PromptCall {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    return { ok: false, raw: json, reason: `not valid JSON (${(err as Error).message})` };
  }
  const v = value as Record<string, unknown>;
  const name = v.tool_name ?? v.name;
  if (typeof name !== 'string' || name === '') {
    return { ok: false, raw: json, reason: 'no "tool_name" string' };
  }
  const params = v.parameters ?? v.arguments ?? {};
  const args = typeof params === 'string' ? params : JSON.stringify(params);
  return { ok: true, name, arguments: args };
}

/** Length of the longest end of `s` that could begin the marker. */
function partialMarkerSuffix(s: string): number {
  const max = Math.min(TOOL_CALL_MARKER.length - 1, s.length);
  for (let k = max; k > 0; k--) {
    if (TOOL_CALL_MARKER.startsWith(s.slice(s.length - k))) return k;
  }
  return 0;
}

/** The user message that feeds results back in prompt-based tool mode. */
export function promptToolResultsMessage(
  results: readonly Pick<ToolResult, 'name' | 'outcome' | 'output'>[],
): string {
  return results
    .map(
      (r) =>
        `${TOOL_RESULT_MARKER} ${JSON.stringify({ tool_name: r.name, outcome: r.outcome, output: r.output })}`,
    )
    .join('\n');
}
