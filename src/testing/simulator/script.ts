/**
 * Simulator scripts: what the fake LLM answers, chosen by matching the
 * conversation a request carries. Scripts are plain JSON so the CLI can load
 * them from a file; `parseSimScript` validates them with zod.
 */
import { z } from 'zod';
import type { ChatMessage } from '../../llm/chunk.js';
import { ConfigError } from '../../errors.js';
import { BACKGROUND_RESULT_PREFIX } from '../../tools/background.js';
import { formatPath } from '../../tools/preview.js';
import { improvise, summarizeToolResult, type OfferedTool } from './improvise.js';

/** Conditions a rule needs; every given field must match. */
export interface SimWhen {
  /** Case-insensitive substring of the latest real user message's text. */
  user?: string;
  /** Assistant messages after that user message (0 = first request of the turn). */
  round?: number;
  /** Case-insensitive substring of any tool result after that user message. */
  toolResult?: string;
  /** Substring of a system (or developer) message. */
  system?: string;
  /** Whether the request offers tools (a `tool_choice` of `none` offers none). */
  tools?: boolean;
  /**
   * Whether the request's last message hands over a background tool's result
   * (a user-role message starting with `[Background tool result]`): the
   * follow-up in which the character tells the user. Such messages count as
   * tool results, not as the user's words.
   */
  background?: boolean;
}

/**
 * One piece of a scripted reply, emitted in order. In `text`, `{{toolResult}}`
 * becomes the tool results received this turn, in words
 * (`temperature 5, conditions light rain`), and `{{toolResult.temperature}}`
 * one field of the last result.
 */
export type SimPart =
  | { text: string }
  | { reasoning: string }
  | {
      toolCall: {
        name: string;
        /** A string passes through as given; an object is JSON-stringified. */
        arguments: string | Record<string, unknown>;
        /** Defaults to an id in the profile's format. */
        id?: string;
      };
    };

/** A scripted reply. */
export interface SimReply {
  parts: SimPart[];
  /** Replaces the finish reason the profile would send (e.g. `length`). */
  finishReason?: string;
  /**
   * Send the tool calls even when the request offers no tools or forbids
   * them (`tool_choice:"none"`): a model or proxy that ignores the request.
   */
  ignoreToolChoice?: boolean;
  /** Replaces the computed token counts. */
  usage?: { prompt_tokens: number; completion_tokens: number };
}

/** A rule: the first one whose `when` matches answers the request. */
export interface SimRule {
  /** Absent: matches every request. */
  when?: SimWhen;
  reply: SimReply;
}

/** What the simulator answers; JSON-serialisable. */
export interface SimScript {
  /** Free text for humans; ignored. */
  description?: string;
  rules: SimRule[];
  /**
   * When no rule matches, improvise from the request's tools: call the tool
   * the user's words name with arguments valid for its schema, then answer
   * from its result (see improvise.ts). @defaultValue false
   */
  improvise?: boolean;
  /** Answer when no rule matches. @defaultValue {@link DEFAULT_FALLBACK_REPLY} */
  fallback?: SimReply;
}

/** Text of the default fallback reply. */
export const DEFAULT_FALLBACK_TEXT = 'This is the Troupe LLM simulator; no script rule matched.';

/** The reply when no rule matches and the script has no fallback. */
export const DEFAULT_FALLBACK_REPLY: SimReply = { parts: [{ text: DEFAULT_FALLBACK_TEXT }] };

/** Sent instead when a reply holds only tool calls but the request allows none. */
export const TOOLS_DISABLED_TEXT = '(simulator: tools are disabled for this request)';

/** Prompt-based tool mode feeds tool results back as user messages starting with this. */
export const PROMPT_TOOL_RESULT_PREFIX = 'TOOL_RESULT';

const partSchema = z.union(
  [
    z.strictObject({ text: z.string() }),
    z.strictObject({ reasoning: z.string() }),
    z.strictObject({
      toolCall: z.strictObject({
        name: z.string().min(1),
        arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
        id: z.string().min(1).optional(),
      }),
    }),
  ],
  {
    error:
      'a part must be {"text": string}, {"reasoning": string} or {"toolCall": {"name", "arguments", "id"?}}',
  },
);

const replySchema = z.strictObject({
  parts: z.array(partSchema),
  finishReason: z.string().min(1).optional(),
  ignoreToolChoice: z.boolean().optional(),
  usage: z
    .strictObject({
      prompt_tokens: z.number().int().nonnegative(),
      completion_tokens: z.number().int().nonnegative(),
    })
    .optional(),
});

/** The zod schema of a {@link SimScript}; strict, so misspelt keys are reported. */
export const SIM_SCRIPT_SCHEMA: z.ZodType<SimScript> = z.strictObject({
  description: z.string().optional(),
  improvise: z.boolean().optional(),
  rules: z.array(
    z.strictObject({
      when: z
        .strictObject({
          user: z.string().optional(),
          round: z.number().int().nonnegative().optional(),
          toolResult: z.string().optional(),
          system: z.string().optional(),
          tools: z.boolean().optional(),
          background: z.boolean().optional(),
        })
        .optional(),
      reply: replySchema,
    }),
  ),
  fallback: replySchema.optional(),
});

/**
 * Validates a parsed JSON value as a script.
 *
 * @throws ConfigError naming the source and the first bad field.
 * @example parseSimScript(JSON.parse(text), 'scripts/weather.json')
 */
export function parseSimScript(value: unknown, source = 'script'): SimScript {
  const result = SIM_SCRIPT_SCHEMA.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const path = issue.path.length === 0 ? '(top level)' : formatPath(issue.path);
    return `${path}: ${issue.message}`;
  });
  throw new ConfigError(
    `Invalid simulator script ${source}: ${problems.join('; ')}. ` +
      'Fix the field named above (see src/testing/scripts/example.json for the format).',
  );
}

/** What rules match against, derived from a request's messages. */
export interface ConversationFacts {
  /** Text of the latest real user message, `null` when there is none. */
  user: string | null;
  /** Assistant messages after that user message. */
  round: number;
  /** Contents of tool/function messages (and prompt-mode TOOL_RESULT messages) after it. */
  toolResults: string[];
  /** Texts of system and developer messages. */
  system: string[];
  /** Whether the request offers tools; unknown (and no `tools` rule matches) when absent. */
  tools?: boolean;
  /** Whether the last message is a background tool's result. */
  background: boolean;
}

/** Text of a message's content: a string, or the text parts of an array. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts: string[] = [];
  for (const part of content) {
    if (isRecord(part) && part.type === 'text' && typeof part.text === 'string') {
      texts.push(part.text);
    }
  }
  return texts.join('\n');
}

function isPromptToolResult(message: ChatMessage): boolean {
  if (message.role !== 'user') return false;
  const text = contentText(message.content).trimStart();
  return text.startsWith(PROMPT_TOOL_RESULT_PREFIX) || text.startsWith(BACKGROUND_RESULT_PREFIX);
}

/** A background result message's output alone (between its first and last lines); other text as is. */
function backgroundOutput(text: string): string {
  if (!text.trimStart().startsWith(BACKGROUND_RESULT_PREFIX)) return text;
  const lines = text.trim().split('\n');
  return lines.length > 2 ? lines.slice(1, -1).join('\n') : text;
}

/** Extracts the facts rules match against. */
export function conversationFacts(messages: readonly ChatMessage[]): ConversationFacts {
  let userIndex = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m !== undefined && m.role === 'user' && !isPromptToolResult(m)) {
      userIndex = i;
      break;
    }
  }
  let round = 0;
  const toolResults: string[] = [];
  for (let i = userIndex + 1; i < messages.length; i++) {
    const m = messages[i];
    if (m === undefined) continue;
    if (m.role === 'assistant') round++;
    else if (m.role === 'tool' || m.role === 'function' || isPromptToolResult(m)) {
      toolResults.push(backgroundOutput(contentText(m.content)));
    }
  }
  const system = messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => contentText(m.content));
  const userMessage = userIndex >= 0 ? messages[userIndex] : undefined;
  const last = messages.at(-1);
  return {
    user: userMessage === undefined ? null : contentText(userMessage.content),
    round,
    toolResults,
    system,
    background:
      last?.role === 'user' &&
      contentText(last.content).trimStart().startsWith(BACKGROUND_RESULT_PREFIX),
  };
}

/** Whether a rule's conditions hold for these facts. */
export function ruleMatches(when: SimWhen | undefined, facts: ConversationFacts): boolean {
  if (when === undefined) return true;
  if (when.user !== undefined) {
    if (facts.user === null || !facts.user.toLowerCase().includes(when.user.toLowerCase())) {
      return false;
    }
  }
  if (when.round !== undefined && facts.round !== when.round) return false;
  if (when.toolResult !== undefined) {
    const needle = when.toolResult.toLowerCase();
    if (!facts.toolResults.some((r) => r.toLowerCase().includes(needle))) return false;
  }
  if (when.system !== undefined) {
    const needle = when.system;
    if (!facts.system.some((s) => s.includes(needle))) return false;
  }
  if (when.tools !== undefined && facts.tools !== when.tools) return false;
  if (when.background !== undefined && facts.background !== when.background) return false;
  return true;
}

/** The rule chosen for a request: its index, or `null` for the fallback. */
export interface ReplySelection {
  reply: SimReply;
  ruleIndex: number | null;
}

/**
 * Picks the reply for a conversation: the first matching rule, else (with
 * `improvise`) a reply improvised from the offered `tools`, else the fallback.
 *
 * @example selectReply(script, body.messages, toolModeOf(body) !== 'none', offeredTools(body)).reply.parts
 */
export function selectReply(
  script: SimScript,
  messages: readonly ChatMessage[],
  toolsOffered?: boolean,
  tools: readonly OfferedTool[] = [],
): ReplySelection {
  const facts = conversationFacts(messages);
  if (toolsOffered !== undefined) facts.tools = toolsOffered;
  for (let i = 0; i < script.rules.length; i++) {
    const rule = script.rules[i];
    if (rule !== undefined && ruleMatches(rule.when, facts)) {
      return { reply: fillToolResults(rule.reply, facts), ruleIndex: i };
    }
  }
  const fallback = fillToolResults(script.fallback ?? DEFAULT_FALLBACK_REPLY, facts);
  if (script.improvise) {
    const made = improvise(facts, toolsOffered === false ? [] : tools);
    if (made && 'reply' in made) return { reply: made.reply, ruleIndex: null };
    if (made) {
      return {
        reply: { ...fallback, parts: [...fallback.parts, { text: ` ${made.hint}` }] },
        ruleIndex: null,
      };
    }
  }
  return { reply: fallback, ruleIndex: null };
}

const PLACEHOLDER = /\{\{toolResult(?:\.([\w.]+))?\}\}/g;

/**
 * The reply with `{{toolResult}}` in its texts replaced by the tool results in
 * words, and `{{toolResult.a.b}}` by that field of the last JSON result.
 */
function fillToolResults(reply: SimReply, facts: ConversationFacts): SimReply {
  if (!reply.parts.some((p) => 'text' in p && p.text.includes('{{toolResult'))) return reply;
  const last = facts.toolResults.at(-1);
  const field = (path: string): string => {
    let value: unknown;
    try {
      value = JSON.parse(last ?? '');
    } catch {
      return 'no result';
    }
    for (const key of path.split('.')) value = isRecord(value) ? value[key] : undefined;
    return value === undefined ? 'no result' : summarizeToolResult(JSON.stringify(value));
  };
  const fill = (_: string, path: string | undefined) =>
    path ? field(path) : facts.toolResults.map(summarizeToolResult).join('; ') || 'no result';
  return {
    ...reply,
    parts: reply.parts.map((p) => ('text' in p ? { text: p.text.replace(PLACEHOLDER, fill) } : p)),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
