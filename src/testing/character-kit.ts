/**
 * The authors' test kit: run a character against a scripted model (the LLM
 * simulator on loopback) through the real turn engine, and look at what its
 * tools were called with, what they returned and what the character said.
 */
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { CharacterCheckError } from '../errors.js';
import { openConversation } from '../characters/conversation.js';
import { transferTool, withTransfers } from '../characters/handoffs.js';
import { fromNamespace, loadCharacterFile } from '../characters/load.js';
import type { Character, LoadedCharacter } from '../characters/types.js';
import type { ChatMessage } from '../llm/chunk.js';
import { createLlmClient } from '../llm/client.js';
import { runTurn, type TurnEvent, type TurnSummary } from '../llm/turn-runner.js';
import { BackgroundCalls, backgroundResultMessage } from '../tools/background.js';
import type { ToolResult } from '../tools/types.js';
import { createMemoryLogger, type MemoryLogger } from './memory-logger.js';
import { startSimulator } from './simulator/server.js';
import type { Simulator } from './simulator/types.js';
import type { ProfileName } from './simulator/profiles.js';
import type { SimReply, SimRule, SimScript } from './simulator/script.js';

/** Options of {@link testCharacter}. */
export interface CharacterTestOptions {
  /** What the model answers: a script, or just its rules. */
  script: SimScript | readonly SimRule[];
  /** The tool-library variant to run (A/B). @defaultValue the character's first */
  variant?: string;
  /** How the simulated server chunks its stream. @defaultValue 'openai' */
  profile?: ProfileName;
  /** What the client would send with the session. @defaultValue {} */
  metadata?: Record<string, unknown>;
  /** The session's start time, for prompt generators that print it. @defaultValue new Date() */
  now?: Date;
  /** @defaultValue a random UUID */
  sessionId?: string;
  /** Id of an inline character (one passed as an object). @defaultValue 'inline' */
  id?: string;
}

/** One turn as the test sees it. */
export interface CharacterTurn {
  /** Everything the character said this turn. */
  text: string;
  /**
   * Each tool call with its `name`, validated `args`, `outcome` and `output`,
   * and the `serverLabel` clients see on its `mcp_call` item (the MCP
   * server's `label`, or the character's id for its own tools).
   */
  toolCalls: Array<ToolResult & { serverLabel: string }>;
  summary: TurnSummary;
  events: TurnEvent[];
  /**
   * The transfer the model made this turn (`transfer_to_<id>`), if any: the
   * turn ends after it, as in a session, where `to` would answer next.
   */
  handoff?: { to: string; reason: string };
}

/** A running test conversation with a character. */
export interface CharacterTestSession {
  readonly character: LoadedCharacter;
  readonly systemPrompt: string;
  /** The conversation so far, in the chat format sent to the model. */
  readonly history: ChatMessage[];
  /** The per-session state tools keep in `ctx.session.state`. */
  readonly state: Record<string, unknown>;
  /** Everything the character and its tools logged. */
  readonly log: MemoryLogger;
  /** The simulator: `simulator.requests` shows what the model was sent. */
  readonly simulator: Simulator;
  /** Sends a user message and runs the turn to its end. */
  say(text: string, options?: { signal?: AbortSignal }): Promise<CharacterTurn>;
  /** Every `ctx.progress(text)` of a background tool so far, in order. */
  readonly progress: Array<{ callId: string; name: string; text: string }>;
  /** The outcomes of background calls so far (`background: 'done'`), in the order they ended. */
  readonly backgroundResults: ToolResult[];
  /**
   * Waits for every running background call to end; their results join the
   * history (as the server adds them) and, when there were any, the
   * follow-up turn runs (the character tells the user) and is returned.
   */
  settle(): Promise<CharacterTurn | undefined>;
  /** Stops the simulator, and closes the character's MCP connections when the kit loaded it. */
  close(): Promise<void>;
}

/**
 * Starts a test conversation with a character: a file path, a loaded
 * character, or a character object.
 *
 * @example
 * const chat = await testCharacter('characters/hello.ts', {
 *   script: [
 *     { when: { round: 0 }, reply: callsTool('sayHello', { personName: 'Ada' }) },
 *     { when: { round: 1 }, reply: says('I said hello to Ada.') },
 *   ],
 * });
 * const turn = await chat.say('Greet Ada');
 * expect(turn.toolCalls[0]).toMatchObject({ outcome: 'ok', output: 'Hello, Ada! Nice to meet you.' });
 * await chat.close();
 *
 * @example
 * // A character with `handoffs: ['weather']` is offered transfer_to_weather:
 * const turn = await desk.say('What is the weather in Paris?');
 * expect(turn.handoff).toEqual({ to: 'weather', reason: 'wants the weather' });
 */
export async function testCharacter<I>(
  character: string | LoadedCharacter | Character<I>,
  options: CharacterTestOptions,
): Promise<CharacterTestSession> {
  const loaded = await resolveCharacter(character, options.id ?? 'inline');
  // A character the caller loaded is the caller's to release.
  const owned = !(typeof character === 'object' && 'toolset' in character);
  const sessionId = options.sessionId ?? randomUUID();
  const opening = await openConversation(loaded, {
    now: options.now ?? new Date(),
    sessionId,
    metadata: options.metadata ?? {},
    ...(options.variant ? { variant: options.variant } : {}),
  });
  const script: SimScript = isRuleList(options.script)
    ? { rules: [...options.script] }
    : options.script;
  const simulator = await startSimulator({ script, profile: options.profile ?? 'openai' });
  const llm = await createLlmClient({
    baseURL: simulator.url,
    apiKey: 'test',
    model: loaded.llm.model ?? 'sim-model',
    maxRetries: 0,
  });
  const log = createMemoryLogger({ session: sessionId, character: loaded.id });
  const state: Record<string, unknown> = {};
  const history: ChatMessage[] = opening.messages;
  // Transfers as a session offers them; the kit has no other characters, so each id is its name.
  let handoff: CharacterTurn['handoff'];
  const toolset = withTransfers(
    opening.toolset,
    loaded.handoffs.map((id) =>
      transferTool({ id, name: id, description: undefined }, (reason) => {
        if (handoff) throw new Error(`this reply already hands the user to ${handoff.to}`);
        handoff = { to: id, reason };
        return `Transferred to ${id}.`;
      }),
    ),
  );
  const progress: CharacterTestSession['progress'] = [];
  const backgroundResults: ToolResult[] = [];
  let untold = 0;
  const background = new BackgroundCalls({
    session: () => ({ id: sessionId, character: loaded.id, state }),
    log: () => log,
    onProgress: (p) => progress.push({ callId: p.callId, name: p.name, text: p.text }),
    onDone: ({ result }) => {
      backgroundResults.push(result);
      history.push({ role: 'user', content: backgroundResultMessage(result) });
      untold++;
    },
  });
  const run = async (signal: AbortSignal): Promise<CharacterTurn> => {
    const events: TurnEvent[] = [];
    handoff = undefined;
    const turn = runTurn({
      llm,
      messages: history,
      toolset,
      endTurn: () => handoff !== undefined,
      signal,
      session: { id: sessionId, character: loaded.id, state },
      log,
      background,
      ...opening.turn,
    });
    let step = await turn.next();
    while (!step.done) {
      events.push(step.value);
      step = await turn.next();
    }
    const summary = step.value;
    history.push(...summary.messages);
    const result: CharacterTurn = {
      text: summary.text,
      toolCalls: summary.toolCalls.map((call) => ({
        ...call,
        serverLabel: toolset.tools.get(call.name)?.serverLabel ?? loaded.id,
      })),
      summary,
      events,
    };
    if (handoff) result.handoff = handoff;
    return result;
  };

  return {
    character: loaded,
    systemPrompt: opening.systemPrompt,
    history,
    state,
    log,
    simulator,
    progress,
    backgroundResults,
    async say(text, sayOptions = {}) {
      history.push({ role: 'user', content: text });
      untold = 0;
      return run(sayOptions.signal ?? new AbortController().signal);
    },
    async settle() {
      await background.settled();
      if (untold === 0) return undefined;
      untold = 0;
      return run(new AbortController().signal);
    },
    close: async () => {
      background.close();
      await background.settled();
      await simulator.close();
      if (owned) await loaded.release?.();
    },
  };
}

/** A scripted reply that says `text`. */
export function says(text: string): SimReply {
  return { parts: [{ text }] };
}

/**
 * A scripted reply that calls tools; pass several `[name, args]` pairs for
 * parallel calls, and `text` to say something first.
 *
 * @example callsTool('get_current_weather', { location: 'Paris', format: 'celsius' })
 */
export function callsTool(
  name: string,
  args: Record<string, unknown> | string = {},
  ...more: [name: string, args: Record<string, unknown> | string][]
): SimReply {
  return {
    parts: [[name, args] as const, ...more].map(([n, a]) => ({
      toolCall: { name: n, arguments: a },
    })),
  };
}

async function resolveCharacter<I>(
  character: string | LoadedCharacter | Character<I>,
  id: string,
): Promise<LoadedCharacter> {
  if (typeof character === 'string') {
    const result = await loadCharacterFile(resolve(character));
    if (!result.ok) throw new CharacterCheckError(result.errors);
    return result.character;
  }
  if ('toolset' in character && typeof character.toolset === 'function') return character;
  const result = await fromNamespace({ default: character }, { id, file: `${id}.ts`, version: 1 });
  if (!result.ok) throw new CharacterCheckError(result.errors);
  return result.character;
}

function isRuleList(script: SimScript | readonly SimRule[]): script is readonly SimRule[] {
  return Array.isArray(script);
}
