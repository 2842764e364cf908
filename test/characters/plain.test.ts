import { afterEach, describe, expect, it } from 'vitest';
import { says, testCharacter, type CharacterTestSession } from '../../src/testing/index.js';

const script = [{ when: { user: 'capital of france' }, reply: says('Paris.') }];

describe('the plain character', () => {
  let chat: CharacterTestSession | undefined;
  afterEach(async () => chat?.close());

  it('answers with the scripted text in one model request', async () => {
    chat = await testCharacter('characters/plain.ts', { script });
    const turn = await chat.say('What is the capital of France?');
    expect(turn.text).toBe('Paris.');
    expect(turn.toolCalls).toEqual([]);
    expect(turn.summary).toMatchObject({ status: 'completed', requests: 1, toolRounds: 0 });
  });

  it('offers the model no tools at all', async () => {
    chat = await testCharacter('characters/plain.ts', { script });
    await chat.say('What is the capital of France?');
    const chatRequests = chat.simulator.requests.filter((r) =>
      r.path.endsWith('/chat/completions'),
    );
    expect(chatRequests).toHaveLength(1);
    const body = chatRequests[0]?.body as Record<string, unknown>;
    expect(body).not.toHaveProperty('tools');
    expect(body).not.toHaveProperty('tool_choice');
    expect(body).not.toHaveProperty('functions');
    expect(body.messages).toEqual([
      { role: 'system', content: chat.systemPrompt },
      { role: 'assistant', content: 'Hello! What can I help you with?' },
      { role: 'user', content: 'What is the capital of France?' },
    ]);
  });
});
