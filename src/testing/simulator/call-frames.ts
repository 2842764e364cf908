/**
 * How each profile streams one tool call: the chunk deltas, with the quirks
 * of each vendor (ids, indexes, names repeated or empty, whole or split
 * arguments), and the legacy `function_call` format.
 */
import type { DeltaLike, ToolCallDeltaLike } from '../../llm/chunk.js';
import type { ProfileName } from './profiles.js';
import type { PlannedCall } from './reply-plan.js';

/** One chunk's delta of a call, and the completion tokens it accounts for. */
export interface CallFrame {
  delta: DeltaLike;
  pieces: number;
}

function toolDelta(entry: ToolCallDeltaLike, extra: DeltaLike = {}): DeltaLike {
  return { ...extra, tool_calls: [entry] };
}

/** Legacy `functions` format: `function_call` fragments, no id, one call. */
export function legacyFrames(call: PlannedCall): CallFrame[] {
  return [
    { delta: { function_call: { name: call.name, arguments: '' } }, pieces: 0 },
    ...call.fragments.map((f) => ({ delta: { function_call: { arguments: f } }, pieces: 1 })),
  ];
}

/** How each profile streams one tool call; `k` is its 0-based position in the reply. */
export function callFrames(profile: ProfileName, call: PlannedCall, k: number): CallFrame[] {
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
