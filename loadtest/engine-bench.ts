/**
 * Engine bench: how fast the turn engine's hot parts are, and what a tool turn
 * costs in CPU next to openai-node's `runTools` and the AI SDK's `streamText`.
 *
 * 1. StreamAssembler throughput on in-memory chunk sequences (openai, vLLM shapes).
 * 2. Tool round overhead: stream end of round 0 → request of round 1, minus handler time.
 * 3. CPU and wall time per two-round tool turn, Troupe vs runTools vs streamText.
 * 4. MCP call overhead: a trivial tool on an stdio MCP server vs a local tool (lib/mcp-call-bench.ts).
 *
 * Prints a table and writes loadtest/reports/engine-bench.json. Targets are
 * printed as PASS/FAIL; the exit code only says whether the bench itself ran.
 *
 * Section 3 starts each engine's own code from a cold JIT: with a longer
 * warm-up every engine's CPU per turn falls by ~25%, the ratios barely move.
 * For steady-state numbers run longer:
 *
 * @example npm run bench
 * @example npm run bench -- --warmup 1000 --turns 600
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { StreamAssembler } from '../src/llm/assembler.js';
import type { ChatMessage, ChunkLike } from '../src/llm/chunk.js';
import { createLlmClient, type LlmClient } from '../src/llm/client.js';
import { runTurn, type TurnSummary } from '../src/llm/turn-runner.js';
import { createToolset, defineTool, type Toolset } from '../src/tools/index.js';
import { createMemoryLogger } from '../src/testing/memory-logger.js';
import { createRng, startSimulator } from '../src/testing/simulator/index.js';
import { benchHandoff, formatHandoffBench } from './handoff-bench.js';
import type { SimScript } from '../src/testing/simulator/index.js';
import { HELP_FLAG, readCommandLine, type CommandInfo } from '../src/cli/command-line.js';
import { benchBackgroundResult } from './background-bench.js';
import { startSimChild } from './lib/children.js';
import { benchMcpCalls, mcpBenchLines } from './lib/mcp-call-bench.js';
import { percentile } from './lib/stats.js';
import { engineBenchSection } from './report/engine-section.js';
import { renderHtmlReport } from './report/html.js';
import { reportMachine } from './report/machine.js';

const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPORT_PATH = path.join(ROOT_DIR, 'loadtest', 'reports', 'engine-bench.json');
const HTML_PATH = path.join(ROOT_DIR, 'loadtest', 'reports', 'engine-bench.html');

/** Section 1: text chunks before the tool calls. */
const ASM_TEXT_CHUNKS = 200;
/** Section 1: whole-sequence passes before measuring (lets V8 optimise push). */
const ASM_WARMUP_PASSES = 3_000;
/** Section 1: measured samples per shape; the median is reported. */
const ASM_SAMPLES = 5;
/** Section 1: length of one sample. */
const ASM_SAMPLE_MS = 250;

/** Section 2: turns measured / warm-up turns, per simulator placement. */
const OVERHEAD_TURNS = 1_000;
const OVERHEAD_WARMUP_TURNS = 50;
/** Section 2 target: p99 of the tool round overhead. */
const OVERHEAD_TARGET_P99_MS = 2;

/** Section 3: turns measured per engine, split into interleaved blocks (flags: --turns, --blocks, --warmup). */
const H2H_TURNS = 300;
const H2H_BLOCKS = 6;
const H2H_WARMUP_TURNS = 30;
/** Section 3 target: Troupe's CPU per turn ÷ the better of the other two. */
const H2H_TARGET_RATIO = 0.5;

const MODEL = 'sim-model';
const SYSTEM_PROMPT = 'You are a weather assistant. Use the tool to look the weather up.';
const USER_PROMPT = 'What is the weather in Paris right now?';
const FINAL_TEXT = 'It is 22 degrees and sunny in Paris.';
const WEATHER_ARGS = { location: 'Paris', format: 'celsius' } as const;
const WEATHER_TOOL_NAME = 'get_current_weather';
const WEATHER_TOOL_DESCRIPTION = 'Get the current weather in a given location';

/**
 * The scripted two-round turn. Round 1 matches on the tool result, so an
 * engine that never ran the tool (or mangled its output) gets the fallback
 * text and fails its check instead of passing silently.
 */
const BENCH_SCRIPT: SimScript = {
  description: 'engine bench: one tool call, then a short answer',
  rules: [
    {
      when: { round: 0 },
      reply: { parts: [{ toolCall: { name: WEATHER_TOOL_NAME, arguments: { ...WEATHER_ARGS } } }] },
    },
    { when: { toolResult: '"temperature":22' }, reply: { parts: [{ text: FINAL_TEXT }] } },
  ],
  fallback: { parts: [{ text: 'BENCH SCRIPT MISMATCH' }] },
};

const weatherParameters = z.object({
  location: z.string().describe('City name'),
  format: z.enum(['celsius', 'fahrenheit']),
});
type WeatherArgs = z.output<typeof weatherParameters>;

/** The 0 ms handler shared by all engines; counts its calls for the sanity checks. */
let weatherCalls = 0;
function weatherHandler(args: WeatherArgs): {
  location: string;
  temperature: number;
  unit: string;
} {
  weatherCalls++;
  return { location: args.location, temperature: 22, unit: args.format };
}

const BENCH_MESSAGES: readonly ChatMessage[] = [
  { role: 'system', content: SYSTEM_PROMPT },
  { role: 'user', content: USER_PROMPT },
];

// ---------------------------------------------------------------------------
// Shared helpers

interface Percentiles {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  min: number;
}

/** Nearest-rank percentiles. */
function percentiles(values: readonly number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const at = (p: number): number => percentile(sorted, p) ?? NaN;
  const mean = n === 0 ? NaN : sorted.reduce((s, v) => s + v, 0) / n;
  return {
    n,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: sorted[n - 1] ?? NaN,
    min: sorted[0] ?? NaN,
    mean,
  };
}

function median(values: readonly number[]): number {
  return percentiles(values).p50;
}

/**
 * `global.gc` when node runs with --expose-gc, else none. Not forced on: a
 * full GC between blocks measurably raises the CPU per turn of every engine
 * after it (~1.5× here), so it is only used when asked for.
 */
function findGc(): { gc: (() => void) | null; how: string } {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return { gc: exposed, how: 'global.gc' };
  return { gc: null, how: 'none (run node with --expose-gc to force one)' };
}

function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function fmt(n: number, digits = 2): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '—';
}

function pad(s: string, width: number, right = false): string {
  return right ? s.padStart(width) : s.padEnd(width);
}

// ---------------------------------------------------------------------------
// 1. Assembler throughput

interface AssemblerResult {
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
function openaiShapeChunks(): ChunkLike[] {
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
function vllmShapeChunks(): ChunkLike[] {
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
function benchAssembler(
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

// ---------------------------------------------------------------------------
// The three engines

function troupeToolset(): Toolset {
  return createToolset([
    defineTool({
      name: WEATHER_TOOL_NAME,
      description: WEATHER_TOOL_DESCRIPTION,
      parameters: weatherParameters,
      handler: (args) => weatherHandler(args),
    }),
  ]);
}

const benchSession = { id: 'bench', character: 'bench', state: {} };
const benchLog = createMemoryLogger();

/** Runs one Troupe turn to the end (events drained, none kept) and returns its summary. */
async function troupeTurn(llm: LlmClient, toolset: Toolset): Promise<TurnSummary> {
  const gen = runTurn({
    llm,
    messages: BENCH_MESSAGES,
    toolset,
    signal: new AbortController().signal,
    session: benchSession,
    log: benchLog,
  });
  let step = await gen.next();
  while (!step.done) step = await gen.next();
  return step.value;
}

/** What one engine turn produced, for the sanity checks. */
interface TurnCheck {
  text: string;
  requests: number;
}

type EngineTurn = () => Promise<TurnCheck>;

interface Engine {
  key: 'troupe' | 'runTools' | 'streamText';
  label: string;
  turn: EngineTurn;
}

async function createEngines(url: string): Promise<Engine[]> {
  const llm = await createLlmClient({ baseURL: url, apiKey: 'bench', model: MODEL, maxRetries: 0 });
  const toolset = troupeToolset();

  const openai = new OpenAI({ baseURL: url, apiKey: 'bench', maxRetries: 0 });
  const parameters = z.toJSONSchema(weatherParameters) as Record<string, unknown>;
  delete parameters.$schema;
  const openaiMessages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: USER_PROMPT },
  ];

  const provider = createOpenAICompatible({
    name: 'sim',
    baseURL: url,
    apiKey: 'bench',
    includeUsage: true,
  });
  const aiModel = provider.chatModel(MODEL);
  const aiTools = {
    [WEATHER_TOOL_NAME]: tool({
      description: WEATHER_TOOL_DESCRIPTION,
      inputSchema: weatherParameters,
      execute: (args: WeatherArgs) => weatherHandler(args),
    }),
  };

  return [
    {
      key: 'troupe',
      label: 'Troupe runTurn',
      turn: async function troupe() {
        const summary = await troupeTurn(llm, toolset);
        if (summary.status !== 'completed') throw new Error(`turn ${summary.status}`);
        return { text: summary.text, requests: summary.requests };
      },
    },
    {
      key: 'runTools',
      label: 'openai runTools',
      turn: async function openaiRunTools() {
        const runner = openai.chat.completions.runTools({
          model: MODEL,
          messages: openaiMessages,
          stream: true,
          stream_options: { include_usage: true },
          tools: [
            {
              type: 'function',
              function: {
                name: WEATHER_TOOL_NAME,
                description: WEATHER_TOOL_DESCRIPTION,
                parameters,
                // Same validation as the other two engines: JSON, then the zod schema.
                parse: (input: string) => weatherParameters.parse(JSON.parse(input)),
                function: (args: WeatherArgs) => weatherHandler(args),
              },
            },
          ],
        });
        for await (const _chunk of runner) {
          // Drained like a client forwarding deltas.
        }
        const text = (await runner.finalContent()) ?? '';
        return { text, requests: runner.allChatCompletions().length };
      },
    },
    {
      key: 'streamText',
      label: 'AI SDK streamText',
      turn: async function aiStreamText() {
        const result = streamText({
          model: aiModel,
          system: SYSTEM_PROMPT,
          messages: [{ role: 'user', content: USER_PROMPT }],
          tools: aiTools,
          stopWhen: stepCountIs(5),
          maxRetries: 0,
        });
        for await (const part of result.fullStream) {
          if (part.type === 'error') throw part.error;
        }
        const steps = await result.steps;
        return { text: await result.text, requests: steps.length };
      },
    },
  ];
}

/** Runs one turn and checks it: two requests, the tool ran once, the final text. */
async function checkedTurn(turn: EngineTurn): Promise<string | null> {
  const callsBefore = weatherCalls;
  try {
    const r = await turn();
    const ran = weatherCalls - callsBefore;
    if (ran !== 1) return `tool ran ${ran} times`;
    if (r.requests !== 2) return `${r.requests} LLM requests`;
    if (r.text !== FINAL_TEXT) return `final text ${JSON.stringify(r.text.slice(0, 60))}`;
    return null;
  } catch (err) {
    return `threw: ${(err as Error)?.message ?? String(err)}`;
  }
}

// ---------------------------------------------------------------------------
// 2. Tool round overhead

interface OverheadResult {
  label: string;
  formula: string;
  ms: Percentiles;
  failures: number;
  firstProblem: string | null;
}

/** The runner-side overhead of a summary: round 1 request start − round 0 end − handler time. */
function runnerSideOverhead(s: TurnSummary): number {
  const r0 = s.rounds[0]!;
  return s.rounds[1]!.requestAt - r0.lastChunkAt! - r0.handlerMs;
}

function checkSummary(s: TurnSummary, calls: number): string | null {
  if (s.status !== 'completed') return `turn ${s.status}`;
  if (s.rounds.length !== 2 || s.rounds[0]!.lastChunkAt === null)
    return `${s.rounds.length} rounds`;
  if (calls !== 1) return `tool ran ${calls} times`;
  if (s.text !== FINAL_TEXT) return `final text ${JSON.stringify(s.text.slice(0, 60))}`;
  return null;
}

async function overheadInProcess(): Promise<{
  simSide: OverheadResult;
  runnerSide: OverheadResult;
}> {
  const sim = await startSimulator({
    port: 0,
    profile: 'openai',
    script: BENCH_SCRIPT,
    latency: {},
  });
  try {
    const llm = await createLlmClient({
      baseURL: sim.url,
      apiKey: 'bench',
      model: MODEL,
      maxRetries: 0,
    });
    const toolset = troupeToolset();
    const simSide: number[] = [];
    const runnerSide: number[] = [];
    let failures = 0;
    let firstProblem: string | null = null;
    for (let i = 0; i < OVERHEAD_WARMUP_TURNS + OVERHEAD_TURNS; i++) {
      sim.clearRequests();
      const before = weatherCalls;
      const summary = await troupeTurn(llm, toolset);
      const chat = sim.requests.filter((r) => r.path === '/v1/chat/completions');
      const problem =
        checkSummary(summary, weatherCalls - before) ??
        (chat.length !== 2 ? `${chat.length} requests` : null);
      if (i < OVERHEAD_WARMUP_TURNS) continue;
      if (problem !== null) {
        failures++;
        firstProblem ??= problem;
        continue;
      }
      const r0 = summary.rounds[0]!;
      const receivedAt = chat[1]!.receivedAt;
      simSide.push(receivedAt - r0.lastChunkAt! - r0.handlerMs);
      runnerSide.push(runnerSideOverhead(summary));
    }
    return {
      simSide: {
        label: '(a) in-process sim',
        formula: 'sim receivedAt(round 1) − rounds[0].lastChunkAt − handlerMs',
        ms: percentiles(simSide),
        failures,
        firstProblem,
      },
      runnerSide: {
        label: "(a') in-process sim, runner side",
        formula: 'rounds[1].requestAt − rounds[0].lastChunkAt − handlerMs',
        ms: percentiles(runnerSide),
        failures,
        firstProblem,
      },
    };
  } finally {
    await sim.close();
  }
}

async function overheadChild(
  url: string,
): Promise<{ simSide: OverheadResult; runnerSide: OverheadResult }> {
  const llm = await createLlmClient({ baseURL: url, apiKey: 'bench', model: MODEL, maxRetries: 0 });
  const toolset = troupeToolset();
  const requestLog = `${url.replace(/\/v1\/?$/, '')}/sim/requests`;
  await fetch(requestLog, { method: 'DELETE' });
  const runnerSide: number[] = [];
  // Per measured turn: where its round-1 request sits in the simulator's log, and the runner's stamps.
  const pending: Array<{ index: number; lastChunkAt: number; handlerMs: number }> = [];
  let chatRequests = 0;
  let failures = 0;
  let firstProblem: string | null = null;
  for (let i = 0; i < OVERHEAD_WARMUP_TURNS + OVERHEAD_TURNS; i++) {
    const before = weatherCalls;
    const summary = await troupeTurn(llm, toolset);
    const first = chatRequests;
    chatRequests += summary.requests;
    const problem = checkSummary(summary, weatherCalls - before);
    if (i < OVERHEAD_WARMUP_TURNS) continue;
    if (problem !== null) {
      failures++;
      firstProblem ??= problem;
      continue;
    }
    const r0 = summary.rounds[0]!;
    pending.push({ index: first + 1, lastChunkAt: r0.lastChunkAt!, handlerMs: r0.handlerMs });
    runnerSide.push(runnerSideOverhead(summary));
  }
  // The simulator stamps arrivals on its own clock; both clocks are epoch ms
  // from performance.timeOrigin, so the difference is the time on the wire and in the client.
  const { requests } = (await (await fetch(requestLog)).json()) as {
    requests: Array<{ path: string; receivedAt: number }>;
  };
  const chat = requests.filter((r) => r.path === '/v1/chat/completions');
  const simSide = pending.flatMap((p) => {
    const arrived = chat[p.index]?.receivedAt;
    return arrived === undefined ? [] : [arrived - p.lastChunkAt - p.handlerMs];
  });
  return {
    simSide: {
      label: '(b) child-process sim',
      formula:
        'sim receivedAt(round 1) − rounds[0].lastChunkAt − handlerMs (two processes, one clock)',
      ms: percentiles(simSide),
      failures,
      firstProblem,
    },
    runnerSide: {
      label: "(b') child-process sim, runner side",
      formula: 'rounds[1].requestAt − rounds[0].lastChunkAt − handlerMs',
      ms: percentiles(runnerSide),
      failures,
      firstProblem,
    },
  };
}

// ---------------------------------------------------------------------------
// 3. CPU per turn, head to head

interface EngineResult {
  key: Engine['key'];
  label: string;
  cpuUs: Percentiles;
  wallMs: Percentiles;
  /** Mean CPU µs of each of the engine's blocks, in run order (shows warm-up drift). */
  cpuUsBlockMeans: number[];
  failures: number;
  firstProblem: string | null;
}

/** Every order of the items, in lexicographic order of their positions. */
function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

/** How long the head-to-head runs; defaults from the constants above, CLI flags override. */
interface HeadToHeadOptions {
  turns: number;
  warmupTurns: number;
  blocks: number;
}

async function headToHead(
  engines: readonly Engine[],
  gc: (() => void) | null,
  options: HeadToHeadOptions,
): Promise<{ results: EngineResult[]; order: string[][] }> {
  const cpu = new Map<string, number[]>();
  const wall = new Map<string, number[]>();
  const blockMeans = new Map<string, number[]>();
  const failures = new Map<string, { count: number; first: string | null }>();
  for (const e of engines) {
    cpu.set(e.key, []);
    wall.set(e.key, []);
    blockMeans.set(e.key, []);
    failures.set(e.key, { count: 0, first: null });
  }

  for (const e of engines) {
    const fail = failures.get(e.key)!;
    for (let i = 0; i < options.warmupTurns; i++) {
      // A broken engine is reported as FAILED in the table, not by stopping the bench.
      const problem = await checkedTurn(e.turn);
      if (problem !== null) {
        fail.count++;
        fail.first ??= `warm-up: ${problem}`;
      }
    }
  }

  // Each block runs the engines in another of their orders (all 6 for 3
  // engines), so each runs first, last and right after each of the others
  // equally often. Rotation alone (ABC, BCA, CAB) always puts A after C, and
  // an engine that follows the AI SDK inherits its heap and pays for its GC.
  const orders = permutations(engines);
  const perBlock = Math.ceil(options.turns / options.blocks);
  const order: string[][] = [];
  for (let b = 0; b < options.blocks; b++) {
    const n = Math.max(0, Math.min(perBlock, options.turns - b * perBlock));
    const blockOrder = orders[b % orders.length]!;
    order.push(blockOrder.map((e) => e.key));
    for (const e of blockOrder) {
      // Collect the previous engine's garbage so this block is not charged for it.
      gc?.();
      const cpuList = cpu.get(e.key)!;
      const wallList = wall.get(e.key)!;
      const fail = failures.get(e.key)!;
      const blockStart = cpuList.length;
      for (let i = 0; i < n; i++) {
        const c0 = cpuMicros();
        const t0 = performance.now();
        const problem = await checkedTurn(e.turn);
        const t1 = performance.now();
        const c1 = cpuMicros();
        if (problem !== null) {
          fail.count++;
          fail.first ??= problem;
          continue;
        }
        cpuList.push(c1 - c0);
        wallList.push(t1 - t0);
      }
      blockMeans.get(e.key)!.push(Math.round(percentiles(cpuList.slice(blockStart)).mean));
    }
  }
  return {
    results: engines.map((e) => ({
      key: e.key,
      label: e.label,
      cpuUs: percentiles(cpu.get(e.key)!),
      wallMs: percentiles(wall.get(e.key)!),
      cpuUsBlockMeans: blockMeans.get(e.key)!,
      failures: failures.get(e.key)!.count,
      firstProblem: failures.get(e.key)!.first,
    })),
    order,
  };
}

// ---------------------------------------------------------------------------
// Report

function machine(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cpuCount: cpus.length,
    availableParallelism: os.availableParallelism(),
    node: process.version,
    v8: process.versions.v8,
    platform: `${process.platform} ${os.release()}`,
    arch: process.arch,
    totalMemGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
  };
}

function printTable(report: {
  machine: Record<string, unknown>;
  gc: string;
  assembler: AssemblerResult[];
  overhead: { rows: OverheadResult[] };
  headToHead: HeadToHeadOptions & { results: EngineResult[]; ratios: Ratios };
}): void {
  const m = report.machine;
  const lines: string[] = [];
  lines.push(
    `Troupe engine bench — ${String(m.cpuModel)} × ${String(m.cpuCount)}, Node ${String(m.node)}, gc between blocks: ${report.gc}`,
  );
  lines.push('');
  lines.push(
    '1. Assembler throughput (StreamAssembler, chunks in memory, fresh assembler per pass)',
  );
  lines.push(`   ${pad('shape', 44)}${pad('chunks/pass', 13, true)}${pad('M chunks/s', 12, true)}`);
  for (const a of report.assembler) {
    lines.push(
      `   ${pad(a.shape, 44)}${pad(String(a.chunksPerPass), 13, true)}${pad(fmt(a.mChunksPerSec), 12, true)}`,
    );
  }
  lines.push('');
  lines.push(
    `2. Tool round overhead excl. handler (ms, ${OVERHEAD_TURNS} turns after ${OVERHEAD_WARMUP_TURNS} warm-up)   target p99 ≤ ${OVERHEAD_TARGET_P99_MS} ms`,
  );
  lines.push(
    `   ${pad('measure', 40)}${pad('p50', 8, true)}${pad('p90', 8, true)}${pad('p99', 8, true)}${pad('max', 8, true)}  target`,
  );
  for (const r of report.overhead.rows) {
    // The target is judged on (b): simulator in its own process, arrival stamped there.
    const info = !r.label.startsWith('(b) ');
    const verdict =
      r.failures > 0
        ? `FAILED (${r.failures} turns: ${r.firstProblem})`
        : info
          ? '(info)'
          : r.ms.p99 <= OVERHEAD_TARGET_P99_MS
            ? 'PASS'
            : 'FAIL';
    lines.push(
      `   ${pad(r.label, 40)}${pad(fmt(r.ms.p50, 3), 8, true)}${pad(fmt(r.ms.p90, 3), 8, true)}${pad(fmt(r.ms.p99, 3), 8, true)}${pad(fmt(r.ms.max, 3), 8, true)}  ${verdict}`,
    );
  }
  lines.push(
    '   (b) is the measure: last chunk of round 0 → round-1 request arriving at the simulator, in its own process.',
    "   (b') stops at the runner's own request call; (a) shares one event loop and heap with the simulator (GC of both).",
  );
  lines.push('');
  lines.push(
    `3. CPU per two-round tool turn (${report.headToHead.turns} turns each after ${report.headToHead.warmupTurns} warm-up, ${report.headToHead.blocks} interleaved blocks, child-process sim)`,
  );
  lines.push(
    `   ${pad('engine', 20)}${pad('CPU µs p50', 12, true)}${pad('mean', 8, true)}${pad('p90', 8, true)}${pad('wall ms p50', 13, true)}${pad('mean', 8, true)}${pad('p90', 8, true)}  check`,
  );
  for (const r of report.headToHead.results) {
    const check = r.failures > 0 ? `FAILED (${r.failures} turns: ${r.firstProblem})` : 'ok';
    lines.push(
      `   ${pad(r.label, 20)}${pad(fmt(r.cpuUs.p50, 0), 12, true)}${pad(fmt(r.cpuUs.mean, 0), 8, true)}${pad(fmt(r.cpuUs.p90, 0), 8, true)}${pad(fmt(r.wallMs.p50), 13, true)}${pad(fmt(r.wallMs.mean), 8, true)}${pad(fmt(r.wallMs.p90), 8, true)}  ${check}`,
    );
  }
  const q = report.headToHead.ratios;
  lines.push(
    `   Troupe ÷ runTools   (mean CPU): ${fmt(q.vsRunTools)}   (p50: ${fmt(q.vsRunToolsP50)})`,
  );
  lines.push(
    `   Troupe ÷ streamText (mean CPU): ${fmt(q.vsStreamText)}   (p50: ${fmt(q.vsStreamTextP50)})`,
  );
  lines.push(
    `   target Troupe ≤ ${H2H_TARGET_RATIO}× the better of the two (${q.betterEngine}, ${fmt(q.betterMeanUs, 0)} µs → ≤ ${fmt(q.betterMeanUs * H2H_TARGET_RATIO, 0)} µs): ${fmt(q.vsBetter)}× ${q.verdict}`,
  );
  console.log(lines.join('\n'));
}

interface Ratios {
  vsRunTools: number;
  vsStreamText: number;
  vsRunToolsP50: number;
  vsStreamTextP50: number;
  betterEngine: string;
  betterMeanUs: number;
  vsBetter: number;
  verdict: 'PASS' | 'FAIL' | 'FAILED';
}

function ratios(results: readonly EngineResult[]): Ratios {
  const get = (k: Engine['key']): EngineResult => results.find((r) => r.key === k)!;
  const troupe = get('troupe');
  const rt = get('runTools');
  const st = get('streamText');
  const better = rt.cpuUs.mean <= st.cpuUs.mean ? rt : st;
  const vsBetter = troupe.cpuUs.mean / better.cpuUs.mean;
  const anyFailed = results.some((r) => r.failures > 0);
  return {
    vsRunTools: troupe.cpuUs.mean / rt.cpuUs.mean,
    vsStreamText: troupe.cpuUs.mean / st.cpuUs.mean,
    vsRunToolsP50: troupe.cpuUs.p50 / rt.cpuUs.p50,
    vsStreamTextP50: troupe.cpuUs.p50 / st.cpuUs.p50,
    betterEngine: better.label,
    betterMeanUs: better.cpuUs.mean,
    vsBetter,
    verdict: anyFailed ? 'FAILED' : vsBetter <= H2H_TARGET_RATIO ? 'PASS' : 'FAIL',
  };
}

// ---------------------------------------------------------------------------

/** `npm run bench`: its help and flags. */
const BENCH_COMMAND: CommandInfo = {
  usage: 'npm run bench -- [flags]',
  summary:
    'The engine benchmark: assembler throughput, tool round overhead, CPU per tool turn next to openai runTools and the AI SDK, and MCP call overhead.',
  flags: [
    { name: 'turns', value: 'N', help: 'measured turns per engine in section 3 (default 300)' },
    { name: 'warmup', value: 'N', help: 'warm-up turns per engine in section 3 (default 30)' },
    { name: 'blocks', value: 'N', help: 'interleaved blocks in section 3 (default 6)' },
    HELP_FLAG,
  ],
  more: 'Writes loadtest/reports/engine-bench.json and .html.',
  helpCommand: 'npm run bench -- --help',
};

/** Section 3 length from the command line (`npm run bench -- --turns 900 --warmup 600`). */
function parseCli(argv: string[]): HeadToHeadOptions {
  readCommandLine(argv, BENCH_COMMAND, 'bench');
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      turns: { type: 'string' },
      warmup: { type: 'string' },
      blocks: { type: 'string' },
    },
  });
  const count = (flag: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) {
      throw new Error(`--${flag} must be an integer >= ${min} (got "${raw}").`);
    }
    return n;
  };
  return {
    turns: count('turns', values.turns, H2H_TURNS, 1),
    warmupTurns: count('warmup', values.warmup, H2H_WARMUP_TURNS, 0),
    blocks: count('blocks', values.blocks, H2H_BLOCKS, 1),
  };
}

async function main(): Promise<void> {
  const h2hOptions = parseCli(process.argv.slice(2));
  const started = performance.now();
  const { gc, how } = findGc();
  // The AI SDK prints warnings to the console by default; they would land in the table.
  globalThis.AI_SDK_LOG_WARNINGS = false;

  process.stderr.write('engine-bench: 1/3 assembler throughput…\n');
  const assembler = benchAssembler([
    { shape: `openai: ${ASM_TEXT_CHUNKS} text + 2 parallel calls`, chunks: openaiShapeChunks() },
    { shape: 'vllm: same, name + usage on every chunk', chunks: vllmShapeChunks() },
  ]);

  process.stderr.write('engine-bench: 2/3 tool round overhead (in-process simulator)…\n');
  const inProcess = await overheadInProcess();

  const sim = await startSimChild({
    profile: 'openai',
    script: BENCH_SCRIPT,
    // The overhead is read from the whole log of its turns (two requests a turn).
    keepRequests: (OVERHEAD_WARMUP_TURNS + OVERHEAD_TURNS) * 2 + 10,
  });
  let child: Awaited<ReturnType<typeof overheadChild>>;
  let h2h: Awaited<ReturnType<typeof headToHead>>;
  try {
    process.stderr.write('engine-bench: 2/3 tool round overhead (child-process simulator)…\n');
    child = await overheadChild(sim.url);
    process.stderr.write('engine-bench: 3/3 CPU per turn, head to head…\n');
    h2h = await headToHead(await createEngines(sim.url), gc, h2hOptions);
  } finally {
    await sim.close();
  }
  process.stderr.write('engine-bench: MCP call overhead (stdio server)…\n');
  const mcp = await benchMcpCalls();

  process.stderr.write('engine-bench: background tool result → client…\n');
  const background = await benchBackgroundResult();

  const report = {
    generatedAt: new Date().toISOString(),
    machine: machine(),
    gc: how,
    durationS: Number(((performance.now() - started) / 1000).toFixed(1)),
    assembler,
    overhead: {
      targetP99Ms: OVERHEAD_TARGET_P99_MS,
      turns: OVERHEAD_TURNS,
      warmupTurns: OVERHEAD_WARMUP_TURNS,
      rows: [child.simSide, child.runnerSide, inProcess.simSide, inProcess.runnerSide],
    },
    background,
    headToHead: {
      ...h2hOptions,
      blockOrders: h2h.order,
      targetRatio: H2H_TARGET_RATIO,
      results: h2h.results,
      ratios: ratios(h2h.results),
    },
    mcp,
  };
  printTable(report);
  console.log(['', ...mcpBenchLines(mcp)].join('\n'));
  // Issue 17: a handoff between characters, over a turn with one tool round.
  process.stderr.write('engine-bench: handoff between characters…\n');
  const handoff = await benchHandoff();
  console.log(`\n${formatHandoffBench(handoff)}`);
  const bgPass = background.p95Ms <= background.targetMs ? 'PASS' : 'FAIL';
  console.log(
    `\nbackground tool result → client (handler end → first follow-up text delta, idle, ${background.runs} runs): ` +
      `p50 ${fmt(background.p50Ms)} ms, p95 ${fmt(background.p95Ms)} ms, max ${fmt(background.maxMs)} ms ` +
      `(target p95 ≤ ${background.targetMs} ms: ${bgPass})`,
  );
  await mkdir(path.dirname(REPORT_PATH), { recursive: true });
  await writeFile(REPORT_PATH, `${JSON.stringify(report, null, 2)}\n`);
  // The same HTML report as the load test's (which shows the latest bench too).
  const section = engineBenchSection(JSON.parse(JSON.stringify(report)) as unknown);
  await writeFile(
    HTML_PATH,
    renderHtmlReport({
      kind: 'troupe-loadtest',
      version: 1,
      generatedAt: report.generatedAt,
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
      machine: reportMachine(),
      target: { url: 'in process: the engines against the LLM simulator', sim: null },
      phases: [],
      comparisons: [],
      targets: [],
      ...(section === undefined ? {} : { engineBench: section }),
    }),
  );
  console.log(
    `\nreport: ${path.relative(process.cwd(), REPORT_PATH)}, ${path.relative(process.cwd(), HTML_PATH)} (${report.durationS} s)`,
  );
}

main().catch((err: unknown) => {
  console.error('engine-bench failed:', err);
  process.exitCode = 1;
});
