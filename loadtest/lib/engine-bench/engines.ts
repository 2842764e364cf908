/**
 * Engine bench: the three engines that run the same two-round tool turn —
 * Troupe's runTurn, openai-node's runTools and the AI SDK's streamText —
 * and the check each of their turns must pass.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { createLlmClient, type LlmClient } from '../../../src/llm/client.js';
import { runTurn, type TurnSummary } from '../../../src/llm/turn-runner.js';
import { createToolset, defineTool, type Toolset } from '../../../src/tools/index.js';
import { createMemoryLogger } from '../../../src/testing/memory-logger.js';
import {
  BENCH_MESSAGES,
  FINAL_TEXT,
  MODEL,
  SYSTEM_PROMPT,
  USER_PROMPT,
  WEATHER_TOOL_DESCRIPTION,
  WEATHER_TOOL_NAME,
  weatherCallCount,
  weatherHandler,
  weatherParameters,
  type WeatherArgs,
} from './common.js';

export function troupeToolset(): Toolset {
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
export async function troupeTurn(llm: LlmClient, toolset: Toolset): Promise<TurnSummary> {
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

export interface Engine {
  key: 'troupe' | 'runTools' | 'streamText';
  label: string;
  turn: EngineTurn;
}

export async function createEngines(url: string): Promise<Engine[]> {
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
export async function checkedTurn(turn: EngineTurn): Promise<string | null> {
  const callsBefore = weatherCallCount();
  try {
    const r = await turn();
    const ran = weatherCallCount() - callsBefore;
    if (ran !== 1) return `tool ran ${ran} times`;
    if (r.requests !== 2) return `${r.requests} LLM requests`;
    if (r.text !== FINAL_TEXT) return `final text ${JSON.stringify(r.text.slice(0, 60))}`;
    return null;
  } catch (err) {
    return `threw: ${(err as Error)?.message ?? String(err)}`;
  }
}
