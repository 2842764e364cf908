/**
 * What the simulated users say, and what the simulated model answers.
 *
 * Every scenario plays the same five-line conversation, so phases compare
 * like with like: `text` on a character without tools, `tools` on one with
 * them (the model calls one on two turns of five), `voice` spoken. With
 * `--sim` the simulator answers from {@link LOADTEST_SCRIPT}: the same text
 * whether or not tools are offered, so a tools turn differs from a plain one
 * only by its tool round.
 */
import type { SimScript } from '../../src/testing/simulator/index.js';

/** The scenarios `--scenario` takes. */
export const SCENARIOS = ['text', 'tools', 'voice'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/** A user line and, with the simulator, the reply it gets. */
export interface ScriptedTurn {
  user: string;
  /** Distinctive part of `user` the simulator's rules match on (lower case). */
  key: string;
  reply: string;
  /** The tool the model calls first when tools are offered. */
  toolCall?: { name: string; arguments: Record<string, unknown> };
}

/** The conversation; each session starts at a different line so load mixes. */
export const CONVERSATION: readonly ScriptedTurn[] = [
  {
    user: "Hi! I'm planning a trip next week. Can you help me get ready?",
    key: 'planning a trip',
    reply:
      "Of course! Tell me where you're going and when, and I'll help with the weather, what to pack and a rough plan for each day. Do you already have your flights and a place to stay?",
  },
  {
    user: "What's the weather in Paris right now, in celsius?",
    key: 'weather in paris',
    reply:
      "Right now in Paris it's 18 degrees and partly cloudy, with a light breeze from the west. It's a good afternoon for a walk along the river, but take a light jacket for the evening.",
    toolCall: {
      name: 'get_current_weather',
      arguments: { location: 'Paris, France', format: 'celsius' },
    },
  },
  {
    user: 'Nice. What should I pack for three days there?',
    key: 'what should i pack',
    reply:
      'Pack layers: two or three light tops, a warm sweater, comfortable walking shoes and a compact umbrella. Add one smarter outfit for dinner, a scarf, a power adapter and a small day bag for the museums.',
  },
  {
    user: 'And the forecast for Glasgow for the next three days, in fahrenheit?',
    key: 'forecast for glasgow',
    reply:
      "Glasgow looks changeable: about 54 degrees with light rain tomorrow, drier and windy on the second day, then clouds and 57 degrees on the third. Bring a waterproof coat and you'll be fine.",
    toolCall: {
      name: 'get_n_day_weather_forecast',
      arguments: { location: 'Glasgow, Scotland', format: 'fahrenheit', num_days: 3 },
    },
  },
  {
    user: "Great, thanks. That's everything for now.",
    key: "that's everything",
    reply:
      "You're welcome! Have a wonderful trip, and come back any time if the plans change or you want a fresh forecast before you leave.",
  },
];

/** What the simulator answers when it hears something else (a misheard spoken line). */
export const FALLBACK_REPLY =
  "Sorry, I didn't quite catch that. Could you say it once more, a little more slowly?";

/** The character each scenario talks to unless `--character` says otherwise. */
export const DEFAULT_CHARACTER: Record<ScenarioName, string> = {
  text: 'plain',
  tools: 'weather',
  voice: 'weather',
};

/**
 * The simulator's script for every scenario: a tool call first when the
 * request offers tools, then the same reply a request without tools gets.
 */
export const LOADTEST_SCRIPT: SimScript = {
  description: 'load test: the five-line trip conversation of loadtest/lib/scenarios.ts',
  rules: CONVERSATION.flatMap((turn) => [
    ...(turn.toolCall === undefined
      ? []
      : [
          {
            when: { user: turn.key, round: 0, tools: true },
            reply: { parts: [{ toolCall: { ...turn.toolCall } }] },
          },
        ]),
    { when: { user: turn.key }, reply: { parts: [{ text: turn.reply }] } },
  ]),
  fallback: { parts: [{ text: FALLBACK_REPLY }] },
};
