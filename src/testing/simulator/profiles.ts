/**
 * Vendor chunking profiles: how each family of OpenAI-compatible servers
 * really streams a reply (see docs/llm-streams.md). A reply is first
 * planned (split into tokens and argument fragments, ids chosen) and then
 * rendered by a profile into chunk bodies; the server adds the envelope
 * (`id`, `object`, `created`, `model`, `x_sim_sent_at`) at write time.
 */
import type { DeltaLike, ToolCallDeltaLike, UsageLike } from '../../llm/chunk.js';
import type { SimReply } from './script.js';
import { TOOLS_DISABLED_TEXT } from './script.js';

/**
 * The vendor profiles the simulator can imitate (quirk numbers refer to
 * docs/llm-streams.md):
 *
 * - `openai` — the reference format: role chunk `content:""` (or `content:null`
 *   with the first call), `{index,id,type,function:{name,arguments:""}}` then
 *   `{index,function:{arguments}}` fragments; no-parameter calls send `"{}"`.
 * - `vllm-hermes` — `chatcmpl-tool-<hex>` ids; continuations repeat the name
 *   (vLLM #13078, #14951), carry `id:null` or no id (vLLM #42167), no `type`;
 *   the last fragment and the finish reason share a chunk (quirk 12); usage on
 *   every chunk (quirk 21); `reasoning_content`; no-parameter calls send `""`
 *   (vLLM #28806); non-ASCII in arguments escaped as `\uXXXX` (quirk 20).
 * - `ollama` — each call whole in one chunk (quirk 11), `index` always 0 with
 *   distinct ids (Ollama #15457), `finish_reason:"stop"` with calls (quirk 15),
 *   the role on every chunk, `reasoning`.
 * - `groq` — whole calls with proper index and id, `x_groq.usage` on the last chunk.
 * - `mistral` — whole calls (quirk 11) with `content:""` beside them, 9-character
 *   ids, no `type` (quirk 10).
 * - `gemini-compat` — no `index` at all (openai-python #2806), the same full id
 *   on every chunk of a call (LiteLLM #20480), whole arguments in one chunk,
 *   `finish_reason:"stop"` with calls.
 * - `lmstudio` — `name:""` first and the real name next, `name:""` on
 *   continuations (LM Studio #649), `type` only with the last fragment (vLLM
 *   #16340), numeric ids.
 * - `litellm` — indexes 1, 3, 5… (LiteLLM #11407, #5231), the same id on every
 *   chunk (LiteLLM #20480), a trailing `arguments:""` delta (vercel/ai #3953),
 *   no finish_reason at all (quirk 17).
 * - `legacy-functions` — for a `functions` request, one `function_call`
 *   streamed without id and `finish_reason:"function_call"`; for a `tools`
 *   request, like `openai`. (Every profile answers a `functions`-only request
 *   in the legacy format, as OpenAI does.)
 */
export type ProfileName =
  | 'openai'
  | 'vllm-hermes'
  | 'ollama'
  | 'groq'
  | 'mistral'
  | 'gemini-compat'
  | 'lmstudio'
  | 'litellm'
  | 'legacy-functions';

/** All profile names, in documentation order. */
export const PROFILE_NAMES: readonly ProfileName[] = [
  'openai',
  'vllm-hermes',
  'ollama',
  'groq',
  'mistral',
  'gemini-compat',
  'lmstudio',
  'litellm',
  'legacy-functions',
];

/** Whether a string names a profile. */
export function isProfileName(name: string): name is ProfileName {
  return (PROFILE_NAMES as readonly string[]).includes(name);
}

/** A seeded random source in [0, 1). */
export type Rng = () => number;

/** mulberry32: tiny, fast and good enough for splitting and ids. */
export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  return function next(): number {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
const HEX = '0123456789abcdef';
const DIGITS = '0123456789';

function randomString(rng: Rng, alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[Math.floor(rng() * alphabet.length)];
  return out;
}

function uuidLike(rng: Rng): string {
  const h = (n: number): string => randomString(rng, HEX, n);
  return `${h(8)}-${h(4)}-${h(4)}-${h(4)}-${h(12)}`;
}

/** What distinguishes one profile besides how it renders tool calls. */
export interface ProfileInfo {
  name: ProfileName;
  /** Where streamed reasoning goes; `null`: hidden (counted in usage, never sent). */
  reasoningField: 'reasoning_content' | 'reasoning' | null;
  /** Usage on every chunk unless the simulator option says otherwise. */
  continuousUsage: boolean;
  /** What a no-parameter call (script arguments `""`) sends. */
  emptyArguments: string;
  /** Finish reason of a reply with tool calls. */
  toolCallsFinish: 'tool_calls' | 'stop';
  /** Escape non-ASCII as `\uXXXX` when stringifying object arguments (Python's json.dumps). */
  escapeNonAscii: boolean;
  newCallId(rng: Rng): string;
  newCompletionId(rng: Rng): string;
}

const openaiIds = {
  newCallId: (rng: Rng) => `call_${randomString(rng, ALNUM, 24)}`,
  newCompletionId: (rng: Rng) => `chatcmpl-${randomString(rng, ALNUM, 29)}`,
};

/** Per-profile facts; rendering of tool calls is in {@link callFrames}. */
export const PROFILES: Readonly<Record<ProfileName, ProfileInfo>> = {
  // The reference format; reasoning is hidden as OpenAI hides it.
  openai: {
    name: 'openai',
    reasoningField: null,
    continuousUsage: false,
    emptyArguments: '{}',
    toolCallsFinish: 'tool_calls',
    escapeNonAscii: false,
    ...openaiIds,
  },
  'vllm-hermes': {
    name: 'vllm-hermes',
    reasoningField: 'reasoning_content',
    continuousUsage: true,
    // vLLM #28806 / #9693: a no-parameter call streams arguments "".
    emptyArguments: '',
    toolCallsFinish: 'tool_calls',
    // The hermes parser re-serialises arguments with Python's json.dumps.
    escapeNonAscii: true,
    newCallId: (rng) => `chatcmpl-tool-${randomString(rng, HEX, 32)}`,
    newCompletionId: (rng) => `chatcmpl-${randomString(rng, HEX, 32)}`,
  },
  ollama: {
    name: 'ollama',
    reasoningField: 'reasoning',
    continuousUsage: false,
    emptyArguments: '{}',
    // Quirk 15: tool calls with finish_reason "stop".
    toolCallsFinish: 'stop',
    escapeNonAscii: false,
    newCallId: (rng) => `call_${randomString(rng, LOWER_ALNUM, 8)}`,
    // Ollama's compat layer uses small random numbers for completion ids.
    newCompletionId: (rng) => `chatcmpl-${1 + Math.floor(rng() * 999)}`,
  },
  groq: {
    name: 'groq',
    reasoningField: 'reasoning',
    continuousUsage: false,
    emptyArguments: '{}',
    toolCallsFinish: 'tool_calls',
    escapeNonAscii: false,
    newCallId: (rng) => `call_${randomString(rng, LOWER_ALNUM, 4)}`,
    newCompletionId: (rng) => `chatcmpl-${uuidLike(rng)}`,
  },
  mistral: {
    name: 'mistral',
    reasoningField: null,
    continuousUsage: false,
    emptyArguments: '{}',
    toolCallsFinish: 'tool_calls',
    escapeNonAscii: false,
    // Mistral's tool call ids are exactly 9 alphanumerics.
    newCallId: (rng) => randomString(rng, ALNUM, 9),
    newCompletionId: (rng) => randomString(rng, HEX, 32),
  },
  'gemini-compat': {
    name: 'gemini-compat',
    reasoningField: null,
    continuousUsage: false,
    emptyArguments: '{}',
    // Quirk 15: Gemini's compat layer ends tool calls with "stop".
    toolCallsFinish: 'stop',
    escapeNonAscii: false,
    newCallId: (rng) => `function-call-${randomString(rng, DIGITS, 19)}`,
    newCompletionId: (rng) => `chatcmpl-${randomString(rng, ALNUM, 24)}`,
  },
  lmstudio: {
    name: 'lmstudio',
    reasoningField: 'reasoning_content',
    continuousUsage: false,
    emptyArguments: '{}',
    toolCallsFinish: 'tool_calls',
    escapeNonAscii: false,
    // LM Studio's ids are decimal strings.
    newCallId: (rng) => randomString(rng, DIGITS, 9),
    newCompletionId: (rng) => `chatcmpl-${randomString(rng, LOWER_ALNUM, 22)}`,
  },
  litellm: {
    name: 'litellm',
    reasoningField: 'reasoning_content',
    continuousUsage: false,
    emptyArguments: '{}',
    toolCallsFinish: 'tool_calls',
    escapeNonAscii: false,
    newCallId: (rng) => `call_${uuidLike(rng)}`,
    newCompletionId: (rng) => `chatcmpl-${uuidLike(rng)}`,
  },
  'legacy-functions': {
    name: 'legacy-functions',
    reasoningField: null,
    continuousUsage: false,
    emptyArguments: '{}',
    toolCallsFinish: 'tool_calls',
    escapeNonAscii: false,
    ...openaiIds,
  },
};

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

/** One choice of a streamed chunk. */
export interface StreamChoice {
  index: 0;
  delta: DeltaLike;
  finish_reason: string | null;
}

/** A chunk body without its envelope. */
export interface StreamFrame {
  choices: StreamChoice[];
  usage?: UsageLike;
  /** Groq's extension: request id on the first chunk, usage on the last. */
  x_groq?: { id: string; usage?: UsageLike };
}

/** Options of {@link renderStream}. */
export interface RenderOptions {
  profile: ProfileName;
  promptTokens: number;
  /** `stream_options.include_usage`: a last chunk with `choices:[]` and usage. */
  includeUsage: boolean;
  /** Usage (cumulative) on every chunk, vLLM's continuous usage stats. */
  continuousUsage: boolean;
  /** The `no-finish` fault: no finish_reason anywhere. */
  omitFinish: boolean;
  rng: Rng;
}

interface Draft {
  delta: DeltaLike;
  /** Completion tokens this chunk accounts for. */
  pieces: number;
  finish: string | null;
}

/** Usage with totals. */
export function usageOf(promptTokens: number, completionTokens: number): Required<UsageLike> {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

/** The final usage of a plan, honouring the script's override. */
export function finalUsage(plan: ReplyPlan, promptTokens: number): Required<UsageLike> {
  if (plan.usageOverride !== undefined) {
    return usageOf(plan.usageOverride.prompt_tokens, plan.usageOverride.completion_tokens);
  }
  return usageOf(promptTokens, plan.completionTokens);
}

/**
 * Renders a plan as a profile streams it.
 *
 * @example renderStream(plan, { profile: 'ollama', promptTokens: 12, includeUsage: true, continuousUsage: false, omitFinish: false, rng })
 */
export function renderStream(plan: ReplyPlan, options: RenderOptions): StreamFrame[] {
  const { profile } = options;
  const info = PROFILES[profile];
  const legacy = plan.mode === 'functions';
  const drafts: Draft[] = [];
  const first = plan.steps[0];
  // OpenAI puts the role into the first tool-call chunk (with content null)
  // when a reply opens with a call; Ollama repeats the role on every chunk.
  const mergeRole =
    first?.kind === 'call' && (legacy || profile === 'openai' || profile === 'legacy-functions');
  if (!mergeRole && profile !== 'ollama') {
    drafts.push({ delta: { role: 'assistant', content: '' }, pieces: 0, finish: null });
  }
  // Reasoning the profile hides still costs tokens; they ride on the next chunk.
  let hidden = 0;
  const push = (delta: DeltaLike, pieces: number): void => {
    drafts.push({ delta, pieces: pieces + hidden, finish: null });
    hidden = 0;
  };
  let ordinal = 0;
  for (const step of plan.steps) {
    if (step.kind === 'text') {
      for (const piece of step.pieces) push({ content: piece }, 1);
    } else if (step.kind === 'reasoning') {
      const field = info.reasoningField;
      for (const piece of step.pieces) {
        if (field === null) hidden++;
        else push({ [field]: piece }, 1);
      }
    } else {
      const frames = legacy ? legacyFrames(step.call) : callFrames(profile, step.call, ordinal);
      ordinal++;
      frames.forEach((frame, i) => {
        const delta =
          mergeRole && step === first && i === 0
            ? { role: 'assistant', content: null, ...frame.delta }
            : frame.delta;
        push(delta, frame.pieces);
      });
    }
  }

  // LiteLLM (quirk 17) sends no finish_reason at all before [DONE].
  const finish = options.omitFinish || profile === 'litellm' ? null : plan.finishReason;
  if (profile === 'vllm-hermes' && drafts.length > 0) {
    // Quirk 12: vLLM puts the finish reason on the chunk carrying the last
    // content or arguments fragment instead of on an empty closing chunk.
    const last = drafts[drafts.length - 1] as Draft;
    last.finish = finish;
    last.pieces += hidden;
  } else if (finish !== null) {
    drafts.push({ delta: {}, pieces: hidden, finish });
  } else if (hidden > 0) {
    drafts.push({ delta: {}, pieces: hidden, finish: null });
  }

  if (profile === 'ollama') {
    for (const d of drafts) {
      d.delta = { role: 'assistant', content: '', ...d.delta };
    }
  }

  const frames: StreamFrame[] = [];
  let cumulative = 0;
  for (const d of drafts) {
    cumulative += d.pieces;
    const frame: StreamFrame = { choices: [{ index: 0, delta: d.delta, finish_reason: d.finish }] };
    if (options.continuousUsage) frame.usage = usageOf(options.promptTokens, cumulative);
    frames.push(frame);
  }
  const usage = finalUsage(plan, options.promptTokens);
  if (profile === 'groq' && frames.length > 0) {
    const requestId = `req_${randomString(options.rng, LOWER_ALNUM, 26)}`;
    (frames[0] as StreamFrame).x_groq = { id: requestId };
    const last = frames[frames.length - 1] as StreamFrame;
    last.x_groq = { id: requestId, usage };
  }
  if (options.includeUsage) frames.push({ choices: [], usage });
  return frames;
}

interface CallFrame {
  delta: DeltaLike;
  pieces: number;
}

function toolDelta(entry: ToolCallDeltaLike, extra: DeltaLike = {}): DeltaLike {
  return { ...extra, tool_calls: [entry] };
}

/** Legacy `functions` format: `function_call` fragments, no id, one call. */
function legacyFrames(call: PlannedCall): CallFrame[] {
  return [
    { delta: { function_call: { name: call.name, arguments: '' } }, pieces: 0 },
    ...call.fragments.map((f) => ({ delta: { function_call: { arguments: f } }, pieces: 1 })),
  ];
}

/** How each profile streams one tool call; `k` is its 0-based position in the reply. */
function callFrames(profile: ProfileName, call: PlannedCall, k: number): CallFrame[] {
  const { id, name, fragments } = call;
  const whole = call.arguments;
  switch (profile) {
    case 'openai':
    case 'legacy-functions':
      // Reference: id, type and name first with arguments "", then fragments
      // carrying only index and arguments (split mid-key and mid-escape).
      return [
        {
          delta: toolDelta({ index: k, id, type: 'function', function: { name, arguments: '' } }),
          pieces: 0,
        },
        ...fragments.map((f) => ({
          delta: toolDelta({ index: k, function: { arguments: f } }),
          pieces: 1,
        })),
      ];
    case 'vllm-hermes': {
      // First delta without `arguments` (exclude_none); continuations repeat
      // the name (vLLM #13078, #14951), carry `id:null` or no id at all
      // (vLLM #42167) and omit `type`.
      const frames: CallFrame[] = [
        { delta: toolDelta({ index: k, id, type: 'function', function: { name } }), pieces: 0 },
      ];
      const rest = fragments.length > 0 ? fragments : [''];
      rest.forEach((f, j) => {
        const entry: ToolCallDeltaLike =
          j % 2 === 0
            ? { index: k, id: null, function: { name, arguments: f } }
            : { index: k, function: { name, arguments: f } };
        frames.push({ delta: toolDelta(entry), pieces: f === '' ? 0 : 1 });
      });
      return frames;
    }
    case 'ollama':
      // Quirk 11: the whole call in one chunk; quirk 2 (Ollama #15457): index
      // always 0 even for parallel calls, which differ only by id.
      return [
        {
          delta: toolDelta({
            id,
            index: 0,
            type: 'function',
            function: { name, arguments: whole },
          }),
          pieces: fragments.length,
        },
      ];
    case 'groq':
      // Quirk 11: the whole call in one chunk, with a proper index and id.
      return [
        {
          delta: toolDelta({
            id,
            type: 'function',
            function: { name, arguments: whole },
            index: k,
          }),
          pieces: fragments.length,
        },
      ];
    case 'mistral':
      // Quirk 11 (old Mistral): the whole call in one chunk with content ""
      // beside it; no `type` (quirk 10), 9-character ids.
      return [
        {
          delta: toolDelta({ id, function: { name, arguments: whole }, index: k }, { content: '' }),
          pieces: fragments.length,
        },
      ];
    case 'gemini-compat':
      // Quirk 1 (openai-python #2806): no `index` at all; quirk 4 (LiteLLM
      // #20480): the same full id on every chunk of the call — name first,
      // then the whole arguments in one chunk.
      return [
        { delta: toolDelta({ id, type: 'function', function: { name } }), pieces: 0 },
        { delta: toolDelta({ id, function: { arguments: whole } }), pieces: fragments.length },
      ];
    case 'lmstudio': {
      // Quirk 8 (LM Studio #649): the first delta has name "" and the real
      // name follows; continuations carry name "". Quirk 10 (vLLM #16340):
      // `type` arrives only with the last arguments fragment.
      const frames: CallFrame[] = [
        { delta: toolDelta({ index: k, id, function: { name: '', arguments: '' } }), pieces: 0 },
        { delta: toolDelta({ index: k, function: { name, arguments: '' } }), pieces: 0 },
      ];
      fragments.forEach((f, j) => {
        const entry: ToolCallDeltaLike = { index: k, function: { name: '', arguments: f } };
        const isLast = j === fragments.length - 1;
        frames.push({
          delta: toolDelta(
            isLast ? { index: k, type: 'function', function: entry.function } : entry,
          ),
          pieces: 1,
        });
      });
      if (fragments.length === 0) {
        frames.push({ delta: toolDelta({ index: k, type: 'function' }), pieces: 0 });
      }
      return frames;
    }
    case 'litellm': {
      // Quirk 3 (LiteLLM #11407, #5231): indexes 1, 3, 5…; quirk 4 (LiteLLM
      // #20480): the full id on every chunk; quirk 13 (vercel/ai #3953): a
      // trailing arguments "" after the call looked complete.
      const index = 1 + 2 * k;
      return [
        {
          delta: toolDelta({ index, id, type: 'function', function: { name, arguments: '' } }),
          pieces: 0,
        },
        ...fragments.map((f) => ({
          delta: toolDelta({ index, id, function: { arguments: f } }),
          pieces: 1,
        })),
        { delta: toolDelta({ index, id, function: { arguments: '' } }), pieces: 0 },
      ];
    }
  }
}

/** A non-streamed assistant message. */
export interface CompletionMessage {
  role: 'assistant';
  content: string | null;
  reasoning_content?: string;
  reasoning?: string;
  tool_calls?: Array<{
    id: string;
    type: 'function';
    function: { name: string; arguments: string };
  }>;
  function_call?: { name: string; arguments: string };
}

/**
 * Renders a plan as one non-streamed message.
 *
 * @example renderMessage(plan, 'openai').content
 */
export function renderMessage(plan: ReplyPlan, profile: ProfileName): CompletionMessage {
  const info = PROFILES[profile];
  let text = '';
  let reasoning = '';
  const calls: PlannedCall[] = [];
  for (const step of plan.steps) {
    if (step.kind === 'text') text += step.pieces.join('');
    else if (step.kind === 'reasoning') reasoning += step.pieces.join('');
    else calls.push(step.call);
  }
  const message: CompletionMessage = {
    role: 'assistant',
    content: text === '' && calls.length > 0 ? null : text,
  };
  if (reasoning !== '' && info.reasoningField !== null) message[info.reasoningField] = reasoning;
  const firstCall = calls[0];
  if (plan.mode === 'functions' && firstCall !== undefined) {
    message.function_call = { name: firstCall.name, arguments: firstCall.arguments };
  } else if (calls.length > 0) {
    message.tool_calls = calls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));
  }
  return message;
}
