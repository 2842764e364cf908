/**
 * The offline demo: loads the characters in characters/, starts the LLM
 * simulator on loopback, and talks to four of them through the turn engine,
 * printing each reply as it streams and a line per tool call. No network, no
 * model, no keys.
 */
import { formatCheckReport, reportOf } from '../characters/check.js';
import { openConversation } from '../characters/conversation.js';
import { loadCharacters } from '../characters/registry.js';
import type { LoadedCharacter } from '../characters/types.js';
import { createLlmClient, type LlmClient } from '../llm/client.js';
import { runTurn } from '../llm/turn-runner.js';
import { createMemoryLogger } from '../testing/memory-logger.js';
import { startSimulator, type SimReply, type SimScript } from '../testing/simulator/index.js';

const say = (text: string): SimReply => ({ parts: [{ text }] });
const call = (text: string, name: string, args: Record<string, unknown>): SimReply => ({
  parts: [{ text }, { toolCall: { name, arguments: args } }],
});

/** What the simulated model answers; rules are matched on the latest user message. */
const script: SimScript = {
  rules: [
    { when: { user: 'weather in glasgow' }, reply: say('Sure — in celsius or fahrenheit?') },
    {
      when: { user: 'celsius', round: 0 },
      reply: call('Checking Glasgow. ', 'get_current_weather', {
        location: 'Glasgow, Scotland',
        format: 'celsius',
      }),
    },
    { when: { user: 'celsius' }, reply: say("That's the weather in Glasgow right now.") },
    {
      when: { user: 'kelvin', round: 0 },
      reply: call('', 'get_current_weather', { location: 'Mars', format: 'kelvin' }),
    },
    { when: { user: 'kelvin' }, reply: say('I can only do celsius or fahrenheit. Which one?') },
    {
      when: { user: 'dragon', round: 0 },
      reply: call(
        'The dragon woke beneath the mountain, and the village bells began to ring. ',
        'log_story_event',
        { event: 'The dragon woke' },
      ),
    },
    { when: { user: 'dragon' }, reply: say('What will our hero do next?') },
    {
      when: { user: 'ada', round: 0 },
      reply: call('', 'sayHello', { personName: 'Ada' }),
    },
    { when: { user: 'ada' }, reply: say('I just said hello to Ada for you.') },
    {
      when: { user: 'quiz', round: 0 },
      reply: call("Let's play! ", 'start_quiz', { topic: 'geography' }),
    },
    { when: { user: 'quiz' }, reply: say('First question: what is the capital of France?') },
    { when: { user: 'paris', round: 0 }, reply: call('', 'answer', { answer: 'Paris' }) },
    { when: { user: 'paris' }, reply: say('Correct! How many legs does a spider have?') },
  ],
};

/** Who the demo talks to, with which tool variant, and what the user says. */
const CONVERSATIONS: { id: string; variant?: string; lines: string[] }[] = [
  {
    id: 'weather',
    lines: ["What's the weather in Glasgow?", 'Celsius, please.', 'And on Mars, in kelvin?'],
  },
  { id: 'narrator', lines: ['Tell me a story about a dragon.'] },
  { id: 'hello', variant: 'b', lines: ['Say hello to Ada.'] },
  { id: 'quizmaster', lines: ["Let's do a quiz!", 'Paris'] },
];

const out = process.stdout;
const bold = (s: string) => `\x1b[1m${s}\x1b[0m`;
const dim = (s: string) => `\x1b[2m${s}\x1b[0m`;
const cyan = (s: string) => `\x1b[36m${s}\x1b[0m`;

async function converse(
  llm: LlmClient,
  character: LoadedCharacter,
  variant: string | undefined,
  lines: string[],
): Promise<void> {
  const session = { id: `demo-${character.id}`, character: character.id, state: {} };
  const opening = await openConversation(character, {
    now: new Date(),
    sessionId: session.id,
    metadata: {},
    ...(variant ? { variant } : {}),
  });
  const history = opening.messages;
  out.write(bold(`── ${character.name} (${character.id}, tool variant ${opening.variant}) ──\n`));
  if (character.greeting) out.write(`${bold(`${character.name}:`)} ${character.greeting}\n`);
  for (const user of lines) {
    out.write(`${bold('you:')} ${user}\n${bold(`${character.name}:`)} `);
    history.push({ role: 'user', content: user });
    const turn = runTurn({
      llm,
      messages: history,
      toolset: opening.toolset,
      signal: new AbortController().signal,
      session,
      log: createMemoryLogger(),
      ...opening.turn,
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
          `\n  ${cyan(`[tool ${r.name} → ${r.outcome} in ${r.durationMs.toFixed(1)} ms: ${r.output}]`)}`,
        );
        pendingBreak = true;
      } else if (e.type === 'finish') {
        history.push(...e.summary.messages);
        out.write(
          `\n  ${dim(`(${e.summary.status}; ${e.summary.requests} requests, ${e.summary.toolRounds} tool rounds, first text after ${e.summary.ttftMs?.toFixed(0)} ms)`)}\n`,
        );
      }
    }
  }
  out.write('\n');
}

async function main(): Promise<void> {
  const characters = await loadCharacters({ dir: 'characters' });
  out.write(`${formatCheckReport(reportOf(characters))}\n\n`);
  const sim = await startSimulator({
    script,
    profile: 'vllm-hermes',
    latency: { ttftMs: 150, tokensPerSec: 40 },
  });
  const llm = await createLlmClient({ baseURL: sim.url });
  out.write(`LLM simulator at ${sim.url} (model ${llm.model}, vLLM-style chunks)\n\n`);
  for (const { id, variant, lines } of CONVERSATIONS) {
    const character = characters.get(id);
    if (character === undefined) {
      out.write(`(skipping ${id}: it did not load, see the errors above)\n\n`);
      continue;
    }
    await converse(llm, character, variant, lines);
  }
  await sim.close();
  await characters.close();
  out.write('Write your own character: characters/README.md. Run the tests: npm test\n');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
