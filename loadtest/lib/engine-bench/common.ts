/**
 * What every part of the engine bench shares: the scripted tool turn (one
 * weather call, then a short answer), its handler, and the numbers' helpers.
 */
import { z } from 'zod';
import type { ChatMessage } from '../../../src/llm/chunk.js';
import type { SimScript } from '../../../src/testing/simulator/index.js';
import { percentile } from '../stats.js';

export const MODEL = 'sim-model';
export const SYSTEM_PROMPT = 'You are a weather assistant. Use the tool to look the weather up.';
export const USER_PROMPT = 'What is the weather in Paris right now?';
export const FINAL_TEXT = 'It is 22 degrees and sunny in Paris.';
const WEATHER_ARGS = { location: 'Paris', format: 'celsius' } as const;
export const WEATHER_TOOL_NAME = 'get_current_weather';
export const WEATHER_TOOL_DESCRIPTION = 'Get the current weather in a given location';

/**
 * The scripted two-round turn. Round 1 matches on the tool result, so an
 * engine that never ran the tool (or mangled its output) gets the fallback
 * text and fails its check instead of passing silently.
 */
export const BENCH_SCRIPT: SimScript = {
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

export const weatherParameters = z.object({
  location: z.string().describe('City name'),
  format: z.enum(['celsius', 'fahrenheit']),
});
export type WeatherArgs = z.output<typeof weatherParameters>;

/** The 0 ms handler shared by all engines; counts its calls for the sanity checks. */
let weatherCalls = 0;
export function weatherHandler(args: WeatherArgs): {
  location: string;
  temperature: number;
  unit: string;
} {
  weatherCalls++;
  return { location: args.location, temperature: 22, unit: args.format };
}

export const BENCH_MESSAGES: readonly ChatMessage[] = [
  { role: 'system', content: SYSTEM_PROMPT },
  { role: 'user', content: USER_PROMPT },
];

/** How many times {@link weatherHandler} has run. */
export function weatherCallCount(): number {
  return weatherCalls;
}

export interface Percentiles {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  min: number;
}

/** Nearest-rank percentiles. */
export function percentiles(values: readonly number[]): Percentiles {
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

export function median(values: readonly number[]): number {
  return percentiles(values).p50;
}

export function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

export function fmt(n: number, digits = 2): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '—';
}

export function pad(s: string, width: number, right = false): string {
  return right ? s.padStart(width) : s.padEnd(width);
}
