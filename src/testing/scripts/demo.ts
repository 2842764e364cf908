/**
 * The demo's simulator script: every seed character gets lines that make it
 * use its tools, and answers from what its tools returned. Rules match on the
 * latest user message, so the phrases are distinct across characters; tests
 * and the demo share them. Any other character improvises: a line that names
 * one of its tools (or that tool's parameters) calls it, and the reply says
 * what it returned.
 */
import type { SimReply, SimScript } from '../simulator/script.js';

const say = (text: string): SimReply => ({ parts: [{ text }] });
const call = (text: string, name: string, args: Record<string, unknown>): SimReply => ({
  parts: [...(text ? [{ text }] : []), { toolCall: { name, arguments: args } }],
});

/** How the concierge's system prompt begins: its rules match on it. */
const CONCIERGE_PROMPT = 'You are the concierge';

/** What to type to each seed character in the demo, with the tools each line uses. */
export const DEMO_LINES: Readonly<Record<string, readonly string[]>> = {
  weather: [
    "What's the weather in Glasgow?",
    'Celsius, please.',
    'And the forecast for 3 days?',
    'And on Mars, in kelvin?',
  ],
  narrator: ['Tell me a story about a dragon.'],
  hello: ['Say hello to Ada.'],
  quizmaster: ["Let's do a quiz!", 'Paris', "What's my score?"],
  plain: ['Hello there!'],
  // Handed to weather, which asks back; the next lines are weather's.
  concierge: ['Put me through for the weather in Glasgow.', 'Celsius, please.'],
  'travel-agent': ['Find flights from London to Lisbon next Friday.', 'A window seat, please.'],
  // Its conversions come from an MCP server (an mcp_call with server_label "units").
  kitchen: ['Bake at 350 °F: how hot is that in °C?', 'Scale 200 g of flour from 4 to 6 servings.'],
};

/** Said when no rule matches: what the demo understands. */
export const DEMO_FALLBACK_TEXT =
  'This is the offline demo: a simulated model that follows a script. Try ' +
  Object.values(DEMO_LINES)
    .map((lines) => `"${lines[0]}"`)
    .join(', ') +
  ' — or point LLM_BASE_URL at a real model.';

/** The demo's script (vLLM-style chunks by default). */
export const DEMO_SCRIPT: SimScript = {
  description: 'Troupe demo: every seed character uses its tools; others improvise from theirs.',
  improvise: true,
  rules: [
    // concierge: hands off at once; the character taking over answers the same message.
    {
      when: { system: CONCIERGE_PROMPT, user: 'weather', round: 0 },
      reply: call('', 'transfer_to_weather', { reason: 'wants the weather' }),
    },
    {
      when: { system: CONCIERGE_PROMPT, user: 'forecast', round: 0 },
      reply: call('', 'transfer_to_weather', { reason: 'wants a forecast' }),
    },
    {
      when: { system: CONCIERGE_PROMPT, user: 'quiz', round: 0 },
      reply: call('', 'transfer_to_quizmaster', { reason: 'wants a quiz' }),
    },
    {
      when: { system: CONCIERGE_PROMPT, user: 'story', round: 0 },
      reply: call('', 'transfer_to_narrator', { reason: 'wants a story' }),
    },
    {
      when: { system: CONCIERGE_PROMPT },
      reply: say('I can put you through to Weather, Quizmaster or Narrator. Which one?'),
    },
    // weather: a clarifying question, then its tools (the model must not guess the unit).
    { when: { user: 'weather in glasgow' }, reply: say('Sure — in celsius or fahrenheit?') },
    {
      when: { user: 'celsius', round: 0 },
      reply: call('Checking Glasgow. ', 'get_current_weather', {
        location: 'Glasgow, Scotland',
        format: 'celsius',
      }),
    },
    {
      when: { user: 'celsius' },
      reply: say(
        "It's {{toolResult.temperature}} °C and {{toolResult.conditions}} in Glasgow right now.",
      ),
    },
    {
      when: { user: 'forecast', round: 0 },
      reply: call('', 'get_n_day_weather_forecast', {
        location: 'Glasgow, Scotland',
        format: 'celsius',
        num_days: 3,
      }),
    },
    { when: { user: 'forecast' }, reply: say('The next three days: {{toolResult.days}}.') },
    {
      when: { user: 'kelvin', round: 0 },
      reply: call('', 'get_current_weather', { location: 'Mars', format: 'kelvin' }),
    },
    { when: { user: 'kelvin' }, reply: say('I can only do celsius or fahrenheit. Which one?') },
    // narrator
    {
      when: { user: 'dragon', round: 0 },
      reply: call(
        'The dragon woke beneath the mountain, and the village bells began to ring. ',
        'log_story_event',
        { event: 'The dragon woke', importance: 'high' },
      ),
    },
    { when: { user: 'dragon' }, reply: say('What will our hero do next?') },
    // hello
    {
      when: { user: 'hello to ada', round: 0 },
      reply: call('', 'sayHello', { personName: 'Ada' }),
    },
    { when: { user: 'hello to ada' }, reply: say('I just said hello to Ada for you.') },
    // quizmaster
    {
      when: { user: 'quiz', round: 0 },
      reply: call("Let's play! ", 'start_quiz', { topic: 'geography' }),
    },
    { when: { user: 'quiz' }, reply: say('First question: what is the capital of France?') },
    { when: { user: 'paris', round: 0 }, reply: call('', 'answer', { answer: 'Paris' }) },
    { when: { user: 'paris' }, reply: say('Correct! How many legs does a spider have?') },
    { when: { user: 'score', round: 0 }, reply: call('', 'score', {}) },
    { when: { user: 'score' }, reply: say('{{toolResult}}.') },
    // travel-agent: the flight search runs in the background; its result is told when it comes.
    {
      when: { background: true, toolResult: 'flights' },
      reply: say('Your search is back! The options: {{toolResult.flights}}.'),
    },
    {
      when: { user: 'find flights', round: 0 },
      reply: call('Let me search for you. ', 'search_flights', {
        from: 'London',
        to: 'Lisbon',
        date: 'next Friday',
      }),
    },
    {
      when: { user: 'find flights' },
      reply: say("I'm searching now; it takes a few seconds. Window or aisle?"),
    },
    {
      when: { user: 'window seat' },
      reply: say("A window seat it is. I'll tell you the flights as soon as the search is back."),
    },
    // kitchen: convert is a tool of its MCP server, scale_recipe its own
    {
      when: { user: '350 °f', round: 0 },
      reply: call('', 'convert', { value: 350, from: 'f', to: 'c' }),
    },
    { when: { user: '350 °f' }, reply: say('That is {{toolResult}}: a moderate oven.') },
    {
      when: { user: 'scale 200 g', round: 0 },
      reply: call('', 'scale_recipe', { amount: 200, servings: 4, wanted: 6 }),
    },
    {
      when: { user: 'scale 200 g' },
      reply: say('For 6 servings use {{toolResult.amount}} g of flour.'),
    },
    // A greeting, to any character: the plain one has no other line.
    { when: { user: 'hello there' }, reply: say('Hello! How can I help?') },
  ],
  fallback: say(DEMO_FALLBACK_TEXT),
};
