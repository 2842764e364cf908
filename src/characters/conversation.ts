import type { ChatMessage } from '../llm/chunk.js';
import type { TurnOptions } from '../llm/turn-runner.js';
import type { Toolset } from '../tools/library.js';
import type { LoadedCharacter, PromptContext } from './types.js';

/** The turn-runner options a character sets for every turn. */
export type CharacterTurnSettings = Pick<
  TurnOptions,
  'toolMode' | 'toolFormat' | 'maxToolRounds' | 'request'
>;

/** What a conversation with a character starts from. */
export interface CharacterOpening {
  /** The variant serving the conversation (the character's first unless asked otherwise). */
  variant: string;
  systemPrompt: string;
  /** The system prompt, then the greeting (when the character has one) as the first assistant message. */
  messages: ChatMessage[];
  toolset: Toolset;
  /** Spread into every `runTurn` of the conversation. */
  turn: CharacterTurnSettings;
}

/**
 * Opens a conversation: runs the prompt generator, picks the tools of the
 * variant and gathers the character's turn settings.
 *
 * @example
 * const opening = await openConversation(character, { now: new Date(), sessionId, metadata: {} });
 * runTurn({ llm, messages: [...opening.messages, user], toolset: opening.toolset, ...opening.turn, … });
 */
export async function openConversation(
  character: LoadedCharacter,
  ctx: Omit<PromptContext, 'variant'> & { variant?: string },
): Promise<CharacterOpening> {
  const variant = ctx.variant ?? character.variants[0]!;
  const toolset = character.toolset(variant);
  const systemPrompt = await character.systemPrompt({ ...ctx, variant });
  const messages: ChatMessage[] = [{ role: 'system', content: systemPrompt }];
  if (character.greeting) messages.push({ role: 'assistant', content: character.greeting });
  const { llm } = character;
  return {
    variant,
    systemPrompt,
    messages,
    toolset,
    turn: {
      ...(character.toolMode ? { toolMode: character.toolMode } : {}),
      ...(character.toolFormat ? { toolFormat: character.toolFormat } : {}),
      ...(character.maxToolRounds ? { maxToolRounds: character.maxToolRounds } : {}),
      request: {
        ...(llm.model !== undefined ? { model: llm.model } : {}),
        ...(llm.temperature !== undefined ? { temperature: llm.temperature } : {}),
        ...(llm.maxTokens !== undefined ? { max_tokens: llm.maxTokens } : {}),
      },
    },
  };
}
