/**
 * The two layouts a character module may have: a default export (Troupe's),
 * or the named exports of an Unmute character file in TypeScript dress. Both
 * become one plain character object for validation.
 */
import type { FieldPath, FieldProblem } from './validate.js';

/** The named exports of an Unmute-style character and the field each becomes. */
const UNMUTE_FIELDS = {
  CHARACTER_NAME: 'name',
  DESCRIPTION: 'description',
  VOICE_SOURCE: 'voice',
  INSTRUCTIONS: 'instructions',
  PromptGenerator: 'makeSystemPrompt',
  TOOLS: 'tools',
  handleToolCall: 'handleToolCall',
  GREETING: 'greeting',
  HANDOFFS: 'handoffs',
  MAX_TOOL_ROUNDS: 'maxToolRounds',
  TOOL_MODE: 'toolMode',
  METADATA: 'metadata',
} as const;

const FIELD_TO_EXPORT = new Map<PropertyKey, string>(
  Object.entries(UNMUTE_FIELDS).map(([exported, field]) => [field, exported]),
);

/** A module read as a character object, with how to name its fields in errors. */
export interface ModuleCharacter {
  layout: 'troupe' | 'unmute';
  value: unknown;
  problems: FieldProblem[];
  /** Maps a path in the character object back to what the author wrote. */
  authorPath(path: FieldPath): FieldPath;
}

/**
 * Reads a module namespace as a character.
 *
 * @example
 * const { value, problems } = fromModule(await import('./characters/narrator.ts'));
 */
export function fromModule(ns: Record<string, unknown>): ModuleCharacter {
  if (ns.default !== undefined) {
    return { layout: 'troupe', value: ns.default, problems: [], authorPath: (p) => p };
  }
  if (!Object.keys(UNMUTE_FIELDS).some((name) => ns[name] !== undefined)) {
    return {
      layout: 'troupe',
      value: undefined,
      authorPath: (p) => p,
      problems: [
        {
          kind: 'shape',
          path: [],
          detail:
            'exports no character; write export default defineCharacter({ name, instructions, … }) ' +
            '(or the Unmute-style exports CHARACTER_NAME, VOICE_SOURCE, INSTRUCTIONS, PromptGenerator)',
        },
      ],
    };
  }
  return fromUnmuteExports(ns);
}

function fromUnmuteExports(ns: Record<string, unknown>): ModuleCharacter {
  const problems: FieldProblem[] = [];
  const value: Record<string, unknown> = {};
  for (const [exported, field] of Object.entries(UNMUTE_FIELDS)) {
    if (ns[exported] !== undefined) value[field] = ns[exported];
  }
  value.voice = unmuteVoice(ns.VOICE_SOURCE, problems);
  if (value.voice === undefined) delete value.voice;

  const Generator = ns.PromptGenerator;
  const proto = (Generator as { prototype?: Record<string, unknown> } | undefined)?.prototype;
  if (typeof Generator !== 'function' || typeof proto?.makeSystemPrompt !== 'function') {
    problems.push({
      kind: Generator === undefined ? 'shape' : 'handler_type',
      path: ['PromptGenerator'],
      detail:
        (Generator === undefined
          ? 'missing; '
          : 'is not a class with a makeSystemPrompt() method; ') +
        'write export class PromptGenerator { constructor(instructions) { … } makeSystemPrompt(ctx) { return "You are …"; } }',
    });
    // Keep validating the other fields without also reporting a missing generator.
    value.makeSystemPrompt = () => '';
  } else {
    type GeneratorClass = new (instructions: unknown) => {
      makeSystemPrompt(ctx: unknown): unknown;
    };
    const PromptGenerator = Generator as GeneratorClass;
    value.makeSystemPrompt = (instructions: unknown, ctx: unknown) =>
      new PromptGenerator(instructions).makeSystemPrompt(ctx);
  }
  return {
    layout: 'unmute',
    value,
    problems,
    authorPath: (path) => {
      const [head, ...rest] = path;
      const exported = FIELD_TO_EXPORT.get(head as PropertyKey);
      return exported === undefined ? path : [exported, ...rest];
    },
  };
}

/**
 * Unmute's VOICE_SOURCE is `{source_type, path_on_server, description}`; it
 * names a Kyutai TTS voice. A string or a per-provider map is taken as is.
 */
function unmuteVoice(source: unknown, problems: FieldProblem[]): unknown {
  if (source === undefined || typeof source === 'string') {
    return source === undefined ? undefined : { kyutai: source };
  }
  if (typeof source === 'object' && source !== null) {
    const s = source as Record<string, unknown>;
    if (typeof s.path_on_server === 'string') return { kyutai: s.path_on_server };
    if (s.source_type === undefined) return source;
  }
  problems.push({
    kind: 'shape',
    path: ['VOICE_SOURCE'],
    detail:
      'expected a voice such as { source_type: "file", path_on_server: "voices/narrator.wav" } or { espeak: "en-us" }',
  });
  return undefined;
}
