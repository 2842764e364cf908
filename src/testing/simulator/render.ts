/**
 * Renders a planned reply as a profile sends it: the chunk bodies of a
 * stream (role chunk, text and reasoning pieces, tool-call chunks, finish
 * reason and usage where the profile puts them), or one whole message.
 */
import type { DeltaLike, UsageLike } from '../../llm/chunk.js';
import { callFrames, legacyFrames } from './call-frames.js';
import { PROFILES } from './profiles.js';
import type { ProfileName } from './profiles.js';
import type { PlannedCall, ReplyPlan } from './reply-plan.js';
import { LOWER_ALNUM, randomString } from './rng.js';
import type { Rng } from './rng.js';

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
