/**
 * The offline demo: starts the LLM simulator on loopback and runs a scripted
 * conversation through the turn engine, printing the reply as it streams and a
 * line per tool call. No network, no model, no keys.
 */
import { z } from 'zod';
import type { ChatMessage } from '../llm/chunk.js';
import { createLlmClient } from '../llm/client.js';
import { runTurn } from '../llm/turn-runner.js';
import { createToolset, defineTool, type OpenAiToolJson } from '../tools/index.js';
import { createMemoryLogger } from '../testing/memory-logger.js';
import { startSimulator, type SimScript } from '../testing/simulator/index.js';

const weather: OpenAiToolJson = {
  type: 'function',
  function: {
    name: 'get_current_weather',
    description: 'Get the current weather',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string', description: 'City name' },
        format: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['location', 'format'],
    },
  },
};

const logStoryEvent = defineTool({
  name: 'log_story_event',
  description: 'Log an important story event for the developer to see',
  parameters: z.object({
    event: z.string().describe('What happened'),
    importance: z.enum(['low', 'medium', 'high']).default('medium'),
  }),
  handler: ({ event, importance }) => `Logged: ${event} (${importance})`,
});

const script: SimScript = {
  rules: [
    {
      when: { user: 'mars', round: 0 },
      reply: {
        parts: [
          {
            toolCall: {
              name: 'get_current_weather',
              arguments: { location: 'Mars', format: 'kelvin' },
            },
          },
        ],
      },
    },
    {
      when: { user: 'mars' },
      reply: {
        parts: [
          { text: 'I can only give the weather in celsius or fahrenheit — which would you like?' },
        ],
      },
    },
    {
      when: { user: 'weather', round: 0 },
      reply: {
        parts: [
          { text: 'Let me check Paris and Rome for you. ' },
          {
            toolCall: {
              name: 'get_current_weather',
              arguments: { location: 'Paris', format: 'celsius' },
            },
          },
          {
            toolCall: {
              name: 'get_current_weather',
              arguments: { location: 'Rome', format: 'celsius' },
            },
          },
        ],
      },
    },
    {
      when: { user: 'weather' },
      reply: {
        parts: [
          { text: 'Paris is 18 °C and cloudy; Rome is 24 °C and sunny. Pack a light jacket.' },
        ],
      },
    },
    {
      when: { user: 'story', round: 0 },
      reply: {
        parts: [
          { text: 'The dragon woke beneath the mountain, and the village bells began to ring. ' },
          {
            toolCall: {
              name: 'log_story_event',
              arguments: { event: 'The dragon woke', importance: 'high' },
            },
          },
        ],
      },
    },
    { when: { user: 'story' }, reply: { parts: [{ text: 'What will our hero do next?' }] } },
  ],
};

const FORECAST: Record<string, { temperature: number; sky: string }> = {
  Paris: { temperature: 18, sky: 'cloudy' },
  Rome: { temperature: 24, sky: 'sunny' },
};

async function main(): Promise<void> {
  const sim = await startSimulator({
    script,
    profile: 'vllm-hermes',
    latency: { ttftMs: 150, tokensPerSec: 40 },
  });
  const llm = await createLlmClient({ baseURL: sim.url });
  const toolset = createToolset([weather, logStoryEvent], {
    handleToolCall: (_name, args) => ({
      location: args.location,
      unit: args.format,
      ...FORECAST[String(args.location)],
    }),
  });
  const out = process.stdout;
  out.write(`Troupe demo: LLM simulator at ${sim.url} (model ${llm.model}, vLLM-style chunks)\n\n`);

  const history: ChatMessage[] = [
    { role: 'system', content: 'You are a helpful storyteller who can check the weather.' },
  ];
  for (const user of [
    'What is the weather in Paris and Rome?',
    'Tell me a story about a dragon.',
    'And the weather on Mars, in kelvin?',
  ]) {
    out.write(`\x1b[1myou:\x1b[0m ${user}\n\x1b[1mcharacter:\x1b[0m `);
    history.push({ role: 'user', content: user });
    const turn = runTurn({
      llm,
      messages: history,
      toolset,
      signal: new AbortController().signal,
      session: { id: 'demo', character: 'demo', state: {} },
      log: createMemoryLogger(),
    });
    let pendingBreak = false;
    for await (const e of turn) {
      if (e.type === 'text.delta') {
        if (pendingBreak) out.write('\n  ');
        pendingBreak = false;
        out.write(e.delta);
      } else if (e.type === 'tool.result') {
        const r = e.result;
        out.write(
          `\n  \x1b[36m[tool ${r.name} → ${r.outcome} in ${r.durationMs.toFixed(1)} ms: ${r.output}]\x1b[0m`,
        );
        pendingBreak = true;
      } else if (e.type === 'finish') {
        history.push(...e.summary.messages);
        out.write(
          `\n  \x1b[2m(${e.summary.status}; ${e.summary.requests} requests, ${e.summary.toolRounds} tool rounds, ` +
            `first text after ${e.summary.ttftMs?.toFixed(0)} ms)\x1b[0m\n\n`,
        );
      }
    }
  }
  await sim.close();
  out.write('Run the tests with: npm test\n');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
