/**
 * Answers one accepted chat-completions request: picks the script's reply,
 * plans it for the profile and tool mode, then writes it as one JSON body or
 * hands it to the stream writer, applying the request's one-shot fault.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatMessage } from '../../llm/chunk.js';
import { sendJson, untilAborted, writeSplitUtf8 } from './http-io.js';
import { offeredTools } from './improvise.js';
import { PROFILES } from './profiles.js';
import type { ProfileName } from './profiles.js';
import { finalUsage, renderMessage, renderStream } from './render.js';
import { planReply, toolModeOf } from './reply-plan.js';
import type { ReplyPlan } from './reply-plan.js';
import { createRng } from './rng.js';
import type { Rng } from './rng.js';
import { contentText, selectReply } from './script.js';
import type { SimScript } from './script.js';
import { streamFrames } from './stream-reply.js';
import type { ChatContext, Envelope, SimLatency } from './types.js';

/**
 * What a reply is made from. The control surface (`setProfile`, …) changes
 * the first three at any time; a request reads them when it needs them.
 */
export interface ReplySettings {
  profile: ProfileName;
  script: SimScript;
  latency: Required<SimLatency>;
  /** Seed of splitting, jitter and ids. */
  readonly seed: number;
  /** Stamp every text fragment with its send time. */
  readonly stamp: boolean;
  /** vLLM-style usage on every chunk; undefined: the profile decides. */
  readonly continuousUsage: boolean | undefined;
}

/** Answers the `n`-th chat request (0-based) of this simulator. */
export async function answerChat(
  ctx: ChatContext,
  settings: ReplySettings,
  n: number,
): Promise<void> {
  const { body, fault } = ctx;
  const { seed, profile } = settings;
  // One generator per request, derived from the seed and the request's
  // position, so a given sequence of requests always gets the same bytes.
  const rng = createRng(Math.imul(seed, 0x9e3779b1) ^ Math.imul(n + 1, 0x85ebca6b));
  const messages = body.messages as ChatMessage[];
  const mode = toolModeOf(body);
  const reply = selectReply(settings.script, messages, mode !== 'none', offeredTools(body)).reply;
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
        : (settings.continuousUsage ?? info.continuousUsage);
    const frames = renderStream(plan, {
      profile,
      promptTokens,
      includeUsage: streamOptions.include_usage === true,
      continuousUsage: continuous,
      omitFinish: fault?.type === 'no-finish',
      rng,
    });
    await streamFrames(ctx, frames, envelope, rng, settings);
  } else {
    await answerWhole(ctx, plan, promptTokens, envelope, rng, settings);
  }
}

/** Writes the reply as one `chat.completion` body, after as long as streaming it would take. */
async function answerWhole(
  ctx: ChatContext,
  plan: ReplyPlan,
  promptTokens: number,
  envelope: Envelope,
  rng: Rng,
  settings: ReplySettings,
): Promise<void> {
  const { res, record, signal, fault } = ctx;
  const { latency } = settings;
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
    await untilAborted(signal);
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
        message: renderMessage(plan, settings.profile),
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
