import type { ToolFormat, ToolMode } from '../llm/client.js';
import type { CharacterError } from '../errors.js';
import type { McpServerConfig, McpServerStatus } from '../mcp/types.js';
import type { HandleToolCall, ToolLibrary, ToolSpec, Toolset } from '../tools/library.js';

/** What the prompt generator gets at the start of every session. */
export interface PromptContext {
  /** When the session started. */
  now: Date;
  sessionId: string;
  /** The tool-library variant serving this session (A/B), `default` when none. */
  variant: string;
  /** Free-form data the client sent with the session (e.g. the user's name). */
  metadata: Record<string, unknown>;
}

/**
 * What a character's prompt generator works from. Any JSON-like value is
 * allowed (Unmute characters use `{type, text, language}` objects); a
 * `prompt` string is what the default generator uses.
 */
export type CharacterInstructions = { prompt?: string; language?: string; [key: string]: unknown };

/** The voice per TTS provider, e.g. `{ espeak: 'en-us', openai: 'alloy' }`. */
export type CharacterVoice = Record<string, string>;

/** Per-character overrides of the LLM request. */
export interface CharacterLlmOverrides {
  model?: string;
  /** 0 to 2. */
  temperature?: number;
  /** Upper bound on tokens per model reply. */
  maxTokens?: number;
}

/**
 * A character as its author writes it: the default export of a module in
 * `characters/`. See characters/README.md.
 */
export interface Character<I = CharacterInstructions> {
  /** Shown to users. */
  name: string;
  /** One line shown in character lists. */
  description?: string;
  voice?: CharacterVoice;
  instructions: I;
  /**
   * The prompt generator, called at the start of every session. May be async.
   * @defaultValue returns `instructions.prompt` (or `instructions` when it is a string)
   */
  makeSystemPrompt?: (instructions: I, ctx: PromptContext) => string | Promise<string>;
  /** zod tools from `defineTool`, or OpenAI-JSON tools served by `handleToolCall`. */
  tools?: readonly ToolSpec[];
  /** Serves the OpenAI-JSON tools: `(name, args, ctx) => result`. */
  handleToolCall?: HandleToolCall;
  /**
   * Tool libraries that implement the tools (late binding). Each is one
   * variant; the first is the default, a session may ask for another (A/B).
   */
  toolLibraries?: readonly ToolLibrary[];
  /** Tool rounds per turn before the model must answer without tools. @defaultValue 10 */
  maxToolRounds?: number;
  /** `prompt` for models without native tool calling. @defaultValue the backend's */
  toolMode?: ToolMode;
  /** `functions` for servers that only speak the legacy format. @defaultValue the backend's */
  toolFormat?: ToolFormat;
  /** The first line the character says when a session starts. */
  greeting?: string;
  /**
   * Ids of the characters this one may hand the conversation to: the model
   * is offered a `transfer_to_<id>` tool for each. Checked at load.
   */
  handoffs?: readonly string[];
  llm?: CharacterLlmOverrides;
  /** Free-form data for whoever runs the character (dashboards, frontends); Troupe ignores it. */
  metadata?: Record<string, unknown>;
  /**
   * MCP servers whose tools the character offers too, listed at load.
   * @example [{ label: 'files', command: 'node', args: ['mcp/files.mjs'] }]
   */
  mcp?: readonly McpServerConfig[];
}

/** A character that passed validation, ready for sessions. Immutable. */
export interface LoadedCharacter {
  /** The file name without extension: `characters/narrator.ts` → `narrator`. */
  readonly id: string;
  /** Absolute path of the module. */
  readonly file: string;
  /** 1 for the first load, +1 on every successful reload. */
  readonly version: number;
  readonly loadedAt: Date;
  /** `troupe` (a default export) or `unmute` (Unmute's named exports). */
  readonly layout: 'troupe' | 'unmute';
  readonly name: string;
  readonly description: string | undefined;
  readonly voice: Readonly<CharacterVoice>;
  readonly instructions: unknown;
  readonly greeting: string | undefined;
  /** Ids this character may hand off to (`transfer_to_<id>` tools), in its order. */
  readonly handoffs: readonly string[];
  readonly maxToolRounds: number | undefined;
  readonly toolMode: ToolMode | undefined;
  readonly toolFormat: ToolFormat | undefined;
  readonly llm: Readonly<CharacterLlmOverrides>;
  readonly metadata: Readonly<Record<string, unknown>>;
  /** Tool names in the character's order. */
  readonly toolNames: readonly string[];
  /** The variants a session may ask for; the first is the default. */
  readonly variants: readonly string[];
  /** The system prompt for a session (the prompt generator, checked to return a string). */
  systemPrompt(ctx: PromptContext): Promise<string>;
  /**
   * The bound tools for a variant (the default when omitted). Throws a
   * ConfigError naming the known variants when the variant is unknown.
   */
  toolset(variant?: string): Toolset;
  /** Its MCP servers as loading found them: the tools each gave, or why none. */
  readonly mcpServers?: readonly McpServerStatus[];
  /** What loading found wrong that did not stop it (an unreachable MCP server): warnings at start, errors in `troupe check`. */
  readonly warnings?: readonly CharacterError[];
  /** Releases what the character holds (its MCP connections); the registry calls it when the character is replaced or removed. */
  release?(): Promise<void>;
}

/** One line of a character list (`GET /v1/characters`). */
export interface CharacterSummary {
  id: string;
  name: string;
  description: string | undefined;
  voice: Readonly<CharacterVoice>;
  tools: readonly string[];
  variants: readonly string[];
  greeting: string | undefined;
  /** Ids this character may hand off to. */
  handoffs: readonly string[];
  version: number;
}
