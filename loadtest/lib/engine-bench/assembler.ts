/**
 * Engine bench, section 1: StreamAssembler throughput on in-memory chunk
 * sequences of two vendors' shapes.
 */
import { StreamAssembler } from '../../../src/llm/assembler.js';
import type { ChunkLike } from '../../../src/llm/chunk.js';
import { createRng } from '../../../src/testing/simulator/index.js';
import { MODEL, median } from './common.js';

/** Section 1: text chunks before the tool calls. */
export const ASM_TEXT_CHUNKS = 200;
/** Section 1: whole-sequence passes before measuring (lets V8 optimise push). */
const ASM_WARMUP_PASSES = 3_000;
/** Section 1: measured samples per shape; the median is reported. */
const ASM_SAMPLES = 5;
/** Section 1: length of one sample. */
const ASM_SAMPLE_MS = 250;

export interface AssemblerResult {
  shape: string;
  chunksPerPass: number;
  passesPerSample: number[];
  /** Million chunks per second, median of the samples. */
  mChunksPerSec: number;
  samplesMChunksPerSec: number[];
}

const TEXT_WORDS = [
  'The ',
  'weather ',
  'in ',
  'Paris ',
  'is ',
  'mild ',
  'today, ',
  'with ',
  'a ',
  'light ',
  'breeze ',
  'from ',
  'the ',
  'west ',
  'and ',
  'some ',
  'clouds ',
  'over ',
  'the ',
  'Seine. ',
];
const ASM_CALLS = [
  {
    id: 'call_Xq3b9TnR2kLm',
    name: 'get_current_weather',
    args: '{"location":"Paris, France","format":"celsius"}',
  },
  {
    id: 'call_Vn8cW1pZ7yQa',
    name: 'get_current_weather',
    args: '{"location":"Tokyo, Japan","format":"fahrenheit"}',
  },
];

/** Splits argument text into fragments of 3–8 characters. */
function fragments(text: string, next: () => number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length;) {
    const n = 3 + Math.floor(next() * 6);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

function envelope(): Pick<ChunkLike, 'id' | 'object' | 'created' | 'model'> {
  return {
    id: 'chatcmpl-bench0001',
    object: 'chat.completion.chunk',
    created: 1_760_000_000,
    model: MODEL,
  };
}

/** OpenAI's shape: role chunk, text, then per call a header chunk and index+arguments fragments. */
export function openaiShapeChunks(): ChunkLike[] {
  const next = createRng(7);
  const chunks: ChunkLike[] = [
    {
      ...envelope(),
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
    },
  ];
  for (let i = 0; i < ASM_TEXT_CHUNKS; i++) {
    const content = TEXT_WORDS[i % TEXT_WORDS.length]!;
    chunks.push({
      ...envelope(),
      choices: [{ index: 0, delta: { content }, finish_reason: null }],
    });
  }
  ASM_CALLS.forEach((call, k) => {
    chunks.push({
      ...envelope(),
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [
              {
                index: k,
                id: call.id,
                type: 'function',
                function: { name: call.name, arguments: '' },
              },
            ],
          },
          finish_reason: null,
        },
      ],
    });
    for (const f of fragments(call.args, next)) {
      chunks.push({
        ...envelope(),
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index: k, function: { arguments: f } }] },
            finish_reason: null,
          },
        ],
      });
    }
  });
  chunks.push({ ...envelope(), choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] });
  chunks.push({
    ...envelope(),
    choices: [],
    usage: { prompt_tokens: 120, completion_tokens: 230, total_tokens: 350 },
  });
  return chunks;
}

/**
 * vLLM (hermes parser) shape: the name repeats on every tool chunk, `id:null`
 * on every other one, usage on every chunk, finish on the last data chunk.
 */
export function vllmShapeChunks(): ChunkLike[] {
  const next = createRng(11);
  const chunks: ChunkLike[] = [];
  let completion = 0;
  const usage = (): ChunkLike['usage'] => ({
    prompt_tokens: 120,
    completion_tokens: completion,
    total_tokens: 120 + completion,
  });
  chunks.push({
    ...envelope(),
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
    usage: usage(),
  });
  for (let i = 0; i < ASM_TEXT_CHUNKS; i++) {
    completion++;
    const content = TEXT_WORDS[i % TEXT_WORDS.length]!;
    chunks.push({
      ...envelope(),
      choices: [{ index: 0, delta: { content }, finish_reason: null }],
      usage: usage(),
    });
  }
  ASM_CALLS.forEach((call, k) => {
    chunks.push({
      ...envelope(),
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [
              { index: k, id: call.id, type: 'function', function: { name: call.name } },
            ],
          },
          finish_reason: null,
        },
      ],
      usage: usage(),
    });
    fragments(call.args, next).forEach((f, j) => {
      completion++;
      const entry =
        j % 2 === 0
          ? { index: k, id: null, function: { name: call.name, arguments: f } }
          : { index: k, function: { name: call.name, arguments: f } };
      chunks.push({
        ...envelope(),
        choices: [{ index: 0, delta: { tool_calls: [entry] }, finish_reason: null }],
        usage: usage(),
      });
    });
  });
  const last = chunks[chunks.length - 1]!;
  last.choices![0]!.finish_reason = 'tool_calls';
  return chunks;
}

/** One pass: a fresh assembler over the whole sequence. Returns events seen (kept live). */
function assemblePass(chunks: readonly ChunkLike[]): number {
  const asm = new StreamAssembler();
  let events = 0;
  for (let i = 0; i < chunks.length; i++) events += asm.push(chunks[i]!).length;
  return events + asm.finish().toolCalls.length;
}

function checkAssembled(shape: string, chunks: readonly ChunkLike[]): void {
  const asm = new StreamAssembler();
  for (const c of chunks) asm.push(c);
  const done = asm.finish();
  const ok =
    done.toolCalls.length === ASM_CALLS.length &&
    done.toolCalls.every(
      (c, i) => c.id === ASM_CALLS[i]!.id && c.arguments === ASM_CALLS[i]!.args,
    ) &&
    done.text.length > 0 &&
    done.finishReason === 'tool_calls';
  if (!ok)
    throw new Error(
      `assembler bench: the ${shape} sequence did not assemble to the expected calls`,
    );
}

/** One timed sample: whole passes until {@link ASM_SAMPLE_MS} has gone by. */
function assemblerSample(chunks: readonly ChunkLike[]): {
  passes: number;
  mChunksPerSec: number;
  sink: number;
} {
  let passes = 0;
  let sink = 0;
  const start = performance.now();
  let elapsed = 0;
  // Check the clock every 50 passes: cheap next to 50 × ~220 pushes.
  while (elapsed < ASM_SAMPLE_MS) {
    for (let i = 0; i < 50; i++) sink += assemblePass(chunks);
    passes += 50;
    elapsed = performance.now() - start;
  }
  return { passes, mChunksPerSec: (passes * chunks.length) / (elapsed / 1000) / 1e6, sink };
}

/**
 * Warms every shape up first (push sees all of them before any is timed, as
 * in a server talking to several vendors), then alternates their samples so
 * a slow moment of the machine does not land on one shape only.
 */
export function benchAssembler(
  shapes: ReadonlyArray<{ shape: string; chunks: readonly ChunkLike[] }>,
): AssemblerResult[] {
  let sink = 0;
  for (const { shape, chunks } of shapes) checkAssembled(shape, chunks);
  for (let i = 0; i < ASM_WARMUP_PASSES; i++) {
    for (const { chunks } of shapes) sink += assemblePass(chunks);
  }
  const results: AssemblerResult[] = shapes.map(({ shape, chunks }) => ({
    shape,
    chunksPerPass: chunks.length,
    passesPerSample: [],
    mChunksPerSec: NaN,
    samplesMChunksPerSec: [],
  }));
  for (let s = 0; s < ASM_SAMPLES; s++) {
    shapes.forEach(({ chunks }, k) => {
      const sample = assemblerSample(chunks);
      sink += sample.sink;
      results[k]!.passesPerSample.push(sample.passes);
      results[k]!.samplesMChunksPerSec.push(sample.mChunksPerSec);
    });
  }
  if (sink === 0) throw new Error('assembler bench: no events (optimised away?)');
  for (const r of results) r.mChunksPerSec = median(r.samplesMChunksPerSec);
  return results;
}
