/**
 * The travel agent's flight search runs in the background: the turn goes on
 * at once, the search reports progress, and when it ends the character tells
 * the user in a follow-up turn (the author kit's `settle()`).
 */
import { expect, it } from 'vitest';
import { callsTool, DEMO_SCRIPT, says, testCharacter } from '../../src/testing/index.js';

it('searches flights in the background and tells the result when it is back', async () => {
  const chat = await testCharacter('characters/travel-agent.ts', {
    script: [
      { when: { background: true }, reply: says('Found them: {{toolResult.flights}}.') },
      {
        when: { user: 'flights', round: 0 },
        reply: callsTool('search_flights', { from: 'London', to: 'Lisbon', date: 'Friday' }),
      },
      { when: { user: 'flights' }, reply: says('Searching now. Window or aisle?') },
    ],
  });
  const turn = await chat.say('Find flights from London to Lisbon on Friday');
  // The model was told at once that the search started, and the turn went on.
  expect(turn.toolCalls[0]).toMatchObject({ name: 'search_flights', background: 'started' });
  expect(turn.text).toBe('Searching now. Window or aisle?');
  expect(chat.backgroundResults).toEqual([]);

  const followUp = await chat.settle();
  expect(chat.progress).toEqual([
    expect.objectContaining({
      name: 'search_flights',
      text: expect.stringMatching(/^Still searching/),
    }),
  ]);
  expect(chat.backgroundResults[0]).toMatchObject({
    name: 'search_flights',
    outcome: 'ok',
    background: 'done',
  });
  const result = JSON.parse(chat.backgroundResults[0]!.output) as { flights: unknown[] };
  expect(result.flights).toHaveLength(2);
  expect(followUp?.text).toMatch(/^Found them: \(?airline /);
  // The result reached the model as a user-role message, never a second system message.
  expect(chat.history.filter((m) => m.role === 'system')).toHaveLength(1);
  expect(
    chat.history.some(
      (m) =>
        m.role === 'user' &&
        String(m.content).startsWith('[Background tool result] search_flights'),
    ),
  ).toBe(true);
  await chat.close();
});

it('has demo lines that start the search and tell its result', async () => {
  const chat = await testCharacter('characters/travel-agent.ts', { script: DEMO_SCRIPT });
  const turn = await chat.say('Find flights from London to Lisbon next Friday.');
  expect(turn.text).toMatch(/searching now/i);
  const followUp = await chat.settle();
  expect(followUp?.text).toMatch(/^Your search is back! The options: /);
  await chat.close();
});
