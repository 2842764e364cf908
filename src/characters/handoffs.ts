/**
 * Handoffs between characters: the `transfer_to_<id>` tool names, and the
 * checks that tie a character's `handoffs` to the characters there are.
 */
import { z } from 'zod';
import { CharacterError } from '../errors.js';
import { zodToParameters } from '../tools/zod-json.js';
import type { Toolset } from '../tools/library.js';
import type { RunnableTool } from '../tools/types.js';
import { closest } from './closest.js';
import type { LoadedCharacter } from './types.js';

/** The prefix of the tools that hand the conversation to another character. */
export const HANDOFF_TOOL_PREFIX = 'transfer_to_';

/**
 * Whether a `response.done` response handed the user to another character
 * (a transfer that went through): the new character's response follows.
 * For clients that wait for one reply per message.
 */
export function handsOff(response: unknown): boolean {
  const output = (response as { output?: unknown } | undefined)?.output;
  if (!Array.isArray(output)) return false;
  return output.some((i: { type?: unknown; name?: unknown; error?: unknown }) => {
    return (
      i?.type === 'mcp_call' &&
      typeof i.name === 'string' &&
      i.name.startsWith(HANDOFF_TOOL_PREFIX) &&
      (i.error === null || i.error === undefined)
    );
  });
}

/** The tool that hands the conversation to `id`: `transfer_to_weather`. */
export function handoffToolName(id: string): string {
  return HANDOFF_TOOL_PREFIX + id;
}

/**
 * Every problem of one character's `handoffs`, together: an id listed twice,
 * the character itself, a tool of its own named like the transfer, and,
 * when `known` is given, an id no character has (with the nearest known one).
 */
export function handoffProblems(
  character: Pick<LoadedCharacter, 'id' | 'handoffs' | 'toolNames'>,
  shown: string,
  known: readonly string[] | undefined,
): CharacterError[] {
  const errors: CharacterError[] = [];
  character.handoffs.forEach((id, i) => {
    const problem = handoffProblem(character, id, i, known);
    if (problem) errors.push(new CharacterError('handoff', shown, `handoffs[${i}]`, problem));
  });
  return errors;
}

/** What is wrong with `handoffs[i]`, or `undefined`; an id's later copies only say they repeat it. */
function handoffProblem(
  character: Pick<LoadedCharacter, 'id' | 'handoffs' | 'toolNames'>,
  id: string,
  i: number,
  known: readonly string[] | undefined,
): string | undefined {
  const first = character.handoffs.indexOf(id);
  if (first !== i) {
    return `lists "${id}" twice (handoffs[${first}] has it too); list each character once`;
  }
  if (id === character.id) {
    return `"${id}" is this character itself; a character cannot hand off to itself, so remove it`;
  }
  const clash = character.toolNames.indexOf(handoffToolName(id));
  if (clash !== -1) {
    return `hands off to "${id}" with a tool named "${handoffToolName(id)}", but tools[${clash}] has that name; rename the tool (names starting with "${HANDOFF_TOOL_PREFIX}" are Troupe's)`;
  }
  if (known === undefined || known.includes(id)) return undefined;
  const others = known.filter((k) => k !== character.id);
  const guess = closest(id, others);
  const list = others.length ? others.map((k) => `"${k}"`).join(', ') : 'none';
  return `no character "${id}"${guess ? `; did you mean "${guess}"?` : ''} (the characters are ${list}); a handoff names another character's file name without extension`;
}

/** The arguments of a transfer tool: why the user is handed over. */
export const TRANSFER_ARGS = z.object({
  reason: z
    .string()
    .describe('Why the user is handed over, in a few words, e.g. "wants the weather in Paris"'),
});

/** Where a transfer goes, as the model is told. */
export interface HandoffTarget {
  id: string;
  name: string;
  description: string | undefined;
}

/** A transfer the model asked for. */
export interface HandoffRequest {
  from: string;
  to: string;
  reason: string;
  callId: string;
}

/**
 * The `transfer_to_<id>` tool: its handler asks `transfer` to hand the
 * conversation over, and tells the model what came of it (what `transfer`
 * throws is a tool error the model reads).
 */
export function transferTool(
  target: HandoffTarget,
  transfer: (reason: string, callId: string) => string,
): RunnableTool {
  const about = target.description ? ` (${target.description.replace(/\.$/, '')})` : '';
  return {
    description: {
      name: handoffToolName(target.id),
      description:
        `Hand the conversation to ${target.name}${about}. Call it when the user wants what ` +
        `${target.name} does; ${target.name} then answers the user's latest message in your place.`,
      parameters: zodToParameters(TRANSFER_ARGS),
    },
    schema: TRANSFER_ARGS,
    handler: (args, ctx) => transfer((args as z.output<typeof TRANSFER_ARGS>).reason, ctx.callId),
  };
}

/** A toolset with transfer tools after the character's own. */
export function withTransfers(base: Toolset, transfers: readonly RunnableTool[]): Toolset {
  if (transfers.length === 0) return base;
  const tools = new Map(base.tools);
  for (const t of transfers) tools.set(t.description.name, t);
  return {
    variant: base.variant,
    tools,
    descriptions: [...base.descriptions, ...transfers.map((t) => t.description)],
  };
}
