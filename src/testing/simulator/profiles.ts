/**
 * Vendor chunking profiles: which families of OpenAI-compatible servers the
 * simulator imitates, and the facts that set one apart (ids, reasoning field,
 * finish reason, argument encoding; see docs/llm-streams.md). A reply is
 * first planned (`reply-plan.ts`), then rendered for a profile (`render.ts`,
 * with each profile's tool-call chunks in `call-frames.ts`); the server adds
 * the envelope (`id`, `object`, `created`, `model`, `x_sim_sent_at`) at
 * write time.
 */
import { ALNUM, DIGITS, HEX, LOWER_ALNUM, randomString, uuidLike } from './rng.js';
import type { Rng } from './rng.js';

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

/** Per-profile facts; how each streams tool calls is in `call-frames.ts`. */
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
