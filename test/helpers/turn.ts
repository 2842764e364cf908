import { createLlmClient, type LlmClient, type LlmTransport } from '../../src/llm/client.js';
import type { ChatMessage } from '../../src/llm/chunk.js';
import {
  runTurn,
  type TurnEvent,
  type TurnOptions,
  type TurnSummary,
} from '../../src/llm/turn-runner.js';
import { NO_TOOLS } from '../../src/tools/library.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';

/** Runs a turn to its end and returns every event and the summary. */
export async function collectTurn(
  options: Partial<TurnOptions> &
    Pick<TurnOptions, 'llm' | 'messages'> & {
      /** Sees each event of the stream as the reader takes it. */
      onEvent?: (event: TurnEvent) => void;
    },
): Promise<{ events: TurnEvent[]; summary: TurnSummary; text: string }> {
  const events: TurnEvent[] = [];
  const { onEvent, ...turnOptions } = options;
  const gen = runTurn({
    toolset: NO_TOOLS,
    signal: new AbortController().signal,
    session: { id: 'sess-1', character: 'test', state: {} },
    log: createMemoryLogger(),
    ...turnOptions,
  });
  let step = await gen.next();
  while (!step.done) {
    events.push(step.value);
    onEvent?.(step.value);
    step = await gen.next();
  }
  const text = events.flatMap((e) => (e.type === 'text.delta' ? [e.delta] : [])).join('');
  return { events, summary: step.value, text };
}

/** A client for the simulator with retries off (faults stay visible). */
export function simClient(
  url: string,
  extra: { maxRetries?: number; transport?: LlmTransport; timeoutMs?: number } = {},
): Promise<LlmClient> {
  return createLlmClient({
    baseURL: url,
    apiKey: 'test',
    model: 'sim-model',
    maxRetries: 0,
    ...extra,
  });
}

/** Both ways of streaming chat completions; integration suites run over each. */
export const TRANSPORTS: readonly LlmTransport[] = ['http', 'openai'];

/** A conversation: the system prompt and one user message. */
export function conversation(user: string, system = 'You are a test character.'): ChatMessage[] {
  return [
    { role: 'system', content: system },
    { role: 'user', content: user },
  ];
}

/** The event types in order, for asserting the shape of a turn. */
export function types(events: readonly TurnEvent[]): string[] {
  return events.map((e) => e.type);
}
