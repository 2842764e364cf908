/**
 * Plans a scripted reply before any profile renders it: which parts the
 * request's tool mode allows, the arguments as a string, text split into
 * token-like pieces and arguments into fragments, call ids chosen.
 */
import { PROFILES } from './profiles.js';
import type { ProfileName } from './profiles.js';
import type { Rng } from './rng.js';
import type { SimReply } from './script.js';
import { TOOLS_DISABLED_TEXT } from './script.js';

/**
 * Splits text into token-like pieces, losslessly: words with their trailing
 * whitespace, long words cut every 4 code points (never inside a UTF-16
 * surrogate pair, so every piece is valid UTF-8).
 */
export function splitText(text: string): string[] {
  const pieces: string[] = [];
  for (const match of text.matchAll(/\S+\s*|\s+/gu)) {
    const word = match[0];
    const points = Array.from(word);
    if (points.length <= 8) {
      pieces.push(word);
      continue;
    }
    for (let i = 0; i < points.length; i += 4) pieces.push(points.slice(i, i + 4).join(''));
  }
  return pieces;
}

/** Splits a string into fragments of 1–8 code points at seeded random places. */
export function splitFragments(s: string, rng: Rng): string[] {
  const points = Array.from(s);
  const out: string[] = [];
  let i = 0;
  while (i < points.length) {
    const n = 1 + Math.floor(rng() * 8);
    out.push(points.slice(i, i + n).join(''));
    i += n;
  }
  return out;
}

/** Breaks JSON arguments the way a truncated model output does: no closing brace, garbage. */
export function corruptArguments(args: string): string {
  const trimmed = args.trimEnd();
  if (!trimmed.endsWith('}')) return '{"location": "Par';
  const body = trimmed.slice(0, -1).trimEnd();
  return body.endsWith('{') ? `${body}"location": "Par` : `${body}, "location": "Par`;
}

function escapeNonAscii(json: string): string {
  return json.replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** How the request lets the model call tools. */
export type ToolMode = 'tools' | 'functions' | 'none';

/** Derives the tool mode from a request body. */
export function toolModeOf(body: Record<string, unknown>): ToolMode {
  const hasTools = Array.isArray(body.tools) && body.tools.length > 0;
  const hasFunctions = Array.isArray(body.functions) && body.functions.length > 0;
  if (hasTools) return body.tool_choice === 'none' ? 'none' : 'tools';
  if (hasFunctions) return body.function_call === 'none' ? 'none' : 'functions';
  return 'none';
}

/** A tool call ready to render. */
export interface PlannedCall {
  id: string;
  name: string;
  /** The complete arguments string as sent. */
  arguments: string;
  /** `arguments` split for streaming; empty when `arguments` is `""`. */
  fragments: string[];
}

/** One step of a planned reply. */
export type PlanStep =
  | { kind: 'text'; pieces: string[] }
  | { kind: 'reasoning'; pieces: string[] }
  | { kind: 'call'; call: PlannedCall };

/** A reply split into pieces with ids chosen: what every profile renders. */
export interface ReplyPlan {
  steps: PlanStep[];
  mode: ToolMode;
  /** Override or computed: `stop`, `tool_calls`, `function_call` or the profile's choice. */
  finishReason: string;
  /** Text tokens + reasoning tokens + argument fragments. */
  completionTokens: number;
  /** The script's usage override, if any. */
  usageOverride: SimReply['usage'];
}

/** Options of {@link planReply}. */
export interface PlanOptions {
  profile: ProfileName;
  mode: ToolMode;
  rng: Rng;
  /** The `invalid-args` fault: break every call's arguments. @defaultValue false */
  corruptArguments?: boolean;
}

/**
 * Turns a scripted reply into a plan: drops tool calls the request does not
 * allow, stringifies arguments, splits text and arguments, picks ids.
 *
 * @example planReply({ parts: [{ text: 'Hi' }] }, { profile: 'openai', mode: 'none', rng })
 */
export function planReply(reply: SimReply, options: PlanOptions): ReplyPlan {
  const profile = PROFILES[options.profile];
  const { rng } = options;
  const mode = reply.ignoreToolChoice && options.mode === 'none' ? 'tools' : options.mode;
  let parts = reply.parts;
  if (mode === 'none') {
    parts = parts.filter((p) => !('toolCall' in p));
    if (!parts.some((p) => 'text' in p && p.text !== '')) {
      parts = [...parts, { text: TOOLS_DISABLED_TEXT }];
    }
  } else if (mode === 'functions') {
    // The legacy format carries one call; later calls are ignored.
    let seen = false;
    parts = parts.filter((p) => {
      if (!('toolCall' in p)) return true;
      if (seen) return false;
      seen = true;
      return true;
    });
  }

  const steps: PlanStep[] = [];
  let completionTokens = 0;
  let calls = 0;
  for (const part of parts) {
    if ('text' in part) {
      const pieces = splitText(part.text);
      if (pieces.length > 0) steps.push({ kind: 'text', pieces });
      completionTokens += pieces.length;
    } else if ('reasoning' in part) {
      const pieces = splitText(part.reasoning);
      if (pieces.length > 0) steps.push({ kind: 'reasoning', pieces });
      completionTokens += pieces.length;
    } else {
      const spec = part.toolCall;
      let args: string;
      if (typeof spec.arguments === 'string') {
        args = spec.arguments === '' ? profile.emptyArguments : spec.arguments;
      } else {
        args = JSON.stringify(spec.arguments);
        if (profile.escapeNonAscii) args = escapeNonAscii(args);
      }
      if (options.corruptArguments === true) args = corruptArguments(args);
      const id = spec.id ?? profile.newCallId(rng);
      const fragments = splitFragments(args, rng);
      steps.push({ kind: 'call', call: { id, name: spec.name, arguments: args, fragments } });
      completionTokens += fragments.length;
      calls++;
    }
  }
  let finishReason = 'stop';
  if (calls > 0) finishReason = mode === 'functions' ? 'function_call' : profile.toolCallsFinish;
  return {
    steps,
    mode,
    finishReason: reply.finishReason ?? finishReason,
    completionTokens,
    usageOverride: reply.usage,
  };
}
