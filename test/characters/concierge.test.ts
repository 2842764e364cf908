/**
 * The concierge seed character: it hands the user to the character who can
 * help, with the reason, and answers nothing itself (author kit, demo lines).
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEMO_SCRIPT,
  callsTool,
  testCharacter,
  type CharacterTestSession,
} from '../../src/testing/index.js';

let chat: CharacterTestSession | undefined;
afterEach(async () => {
  await chat?.close();
  chat = undefined;
});

describe('the concierge', () => {
  it('is offered a transfer to each character it lists, with a reason', async () => {
    chat = await testCharacter('characters/concierge.ts', { script: DEMO_SCRIPT });
    expect(chat.character.handoffs).toEqual(['weather', 'quizmaster', 'narrator']);
    const turn = await chat.say('Put me through for the weather in Glasgow.');
    expect(turn.handoff).toEqual({ to: 'weather', reason: 'wants the weather' });
    expect(turn.toolCalls).toMatchObject([
      { name: 'transfer_to_weather', outcome: 'ok', output: 'Transferred to weather.' },
    ]);
    // The turn ends at the transfer: the character taking over answers.
    expect(turn.summary.requests).toBe(1);
    const offered = (
      chat.simulator.requests.at(-1)!.body as {
        tools: Array<{ function: { name: string; parameters: unknown } }>;
      }
    ).tools;
    expect(offered.map((t) => t.function.name)).toEqual([
      'transfer_to_weather',
      'transfer_to_quizmaster',
      'transfer_to_narrator',
    ]);
    expect(offered[0]!.function.parameters).toMatchObject({ required: ['reason'] });
  });

  it('hands a quiz to the quizmaster and a story to the narrator', async () => {
    chat = await testCharacter('characters/concierge.ts', { script: DEMO_SCRIPT });
    expect((await chat.say("Let's do a quiz!")).handoff?.to).toBe('quizmaster');
    expect((await chat.say('Tell me a story about a dragon.')).handoff?.to).toBe('narrator');
  });

  it('asks when it is not clear what the user wants', async () => {
    chat = await testCharacter('characters/concierge.ts', { script: DEMO_SCRIPT });
    const turn = await chat.say('Hi!');
    expect(turn.handoff).toBeUndefined();
    expect(turn.text).toBe('I can put you through to Weather, Quizmaster or Narrator. Which one?');
  });

  it('makes one transfer per reply: a second in the same reply is a tool error', async () => {
    chat = await testCharacter('characters/concierge.ts', {
      script: [
        {
          reply: callsTool('transfer_to_weather', { reason: 'a' }, [
            'transfer_to_narrator',
            { reason: 'b' },
          ]),
        },
      ],
    });
    const turn = await chat.say('Both!');
    expect(turn.handoff).toEqual({ to: 'weather', reason: 'a' });
    expect(turn.toolCalls.map((c) => c.outcome)).toEqual(['ok', 'error']);
    expect(turn.toolCalls[1]!.output).toMatch(/already hands the user to weather/);
  });
});
