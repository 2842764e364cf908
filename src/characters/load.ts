/**
 * Loading one character file: import it, validate it, bind its tools for
 * every variant and try its prompt generator once, so that everything that
 * can be wrong with a character is found at load time, not in a session.
 */
import { readFile } from 'node:fs/promises';
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path';
import { CharacterError, ConfigError, ToolBindingError } from '../errors.js';
import { DEFAULT_VARIANT } from '../tools/constants.js';
import { createToolset, type ToolLibrary, type ToolSpec, type Toolset } from '../tools/library.js';
import { CHARACTER_ID_PATTERN, SYSTEM_PROMPT_TIMEOUT_MS } from './constants.js';
import { describeImportError, importFresh, stripFreshQuery } from './import-module.js';
import { handoffProblems } from './handoffs.js';
import { fromModule } from './layout.js';
import { withTimeout } from '../timeouts.js';
import type { Character, LoadedCharacter, PromptContext } from './types.js';
import { preview } from '../tools/preview.js';
import type { ToolLogger } from '../tools/types.js';
import type { McpMetrics } from '../mcp/metrics.js';
import { connectMcpServers, withMcpTools, type McpTools } from '../mcp/tools.js';
import { isZodToolEntry, toErrors, validateCharacter, type FieldProblem } from './validate.js';

/** What loading one file produced: a character, or the errors that stopped it. */
export type LoadResult =
  { ok: true; character: LoadedCharacter } | { ok: false; errors: CharacterError[] };

/** Options of {@link loadCharacterFile}. */
export interface LoadFileOptions {
  /** The characters directory; files it holds are re-imported fresh with the character. */
  root?: string;
  /** Makes the import URL new (hot reload). @defaultValue a new number per call */
  generation?: number;
  /** Version stamped on the loaded character. @defaultValue 1 */
  version?: number;
  /** Where the character's MCP connections log (an stdio server's stderr, reconnects). */
  log?: ToolLogger;
  /**
   * Connect the character's MCP servers and offer their tools. Off, the
   * character loads without them and no server is started (`CHARACTERS_MCP=false`).
   * @defaultValue true
   */
  mcp?: boolean;
  /** Where the character's MCP servers' calls and connections are recorded. */
  mcpMetrics?: McpMetrics;
  /**
   * The ids of the folder's characters. Given, a handoff naming none of them
   * is reported with the character's other handoff problems; absent, only
   * the registry checks that a handoff's character is there.
   */
  characterIds?: readonly string[];
}

let generations = 0;

/** Why a character's MCP servers have no tools when MCP is off. */
const MCP_OFF = 'not connected: MCP servers are off (CHARACTERS_MCP=false)';

/** The file as people should see it: relative to the working directory when inside it. */
export function shownPath(file: string): string {
  const rel = relative(process.cwd(), file);
  return rel && !rel.startsWith('..') && !rel.startsWith(sep) ? rel : file;
}

/** The id of a character file: its name without extension. */
export function characterId(file: string): string {
  return basename(file, extname(file));
}

/**
 * Imports and validates one character module.
 *
 * @example
 * const result = await loadCharacterFile('characters/narrator.ts');
 * if (!result.ok) console.error(result.errors.map((e) => e.message).join('\n'));
 */
export async function loadCharacterFile(
  file: string,
  options: LoadFileOptions = {},
): Promise<LoadResult> {
  const path = resolve(file);
  const shown = shownPath(path);
  const id = characterId(path);
  if (!CHARACTER_ID_PATTERN.test(id)) {
    return fail(
      new CharacterError(
        'file_name',
        shown,
        '',
        `"${id}" cannot be a character id (the file name is the id); use letters, digits, "_" or "-", starting with a letter or digit, such as narrator.ts`,
      ),
    );
  }
  if (extname(path) !== '.mjs' && (await packageType(dirname(path))) !== 'module') {
    return fail(
      new CharacterError(
        'import',
        shown,
        '',
        `is not inside an ES-module package, so it would load as CommonJS; put {"type":"module"} in a package.json in ${shownPath(dirname(path))} (or use the .mjs extension)`,
      ),
    );
  }
  let ns: Record<string, unknown>;
  try {
    ns = await importFresh(
      path,
      options.root ?? resolve(path, '..'),
      options.generation ?? ++generations,
    );
  } catch (err) {
    const detail = await describeImportError(err, path, shown);
    return fail(new CharacterError('import', shown, '', detail, { cause: err }));
  }
  return fromNamespace(ns, {
    id,
    file: path,
    version: options.version ?? 1,
    ...(options.log ? { log: options.log } : {}),
    ...(options.mcp === false ? { mcp: false } : {}),
    ...(options.mcpMetrics ? { mcpMetrics: options.mcpMetrics } : {}),
    ...(options.characterIds ? { characterIds: options.characterIds } : {}),
  });
}

/**
 * Validates a module namespace (or `{ default: character }`) as the
 * character `id`. Used by the loader and by the test kit for inline characters.
 */
export async function fromNamespace(
  ns: Record<string, unknown>,
  where: {
    id: string;
    file: string;
    version: number;
    log?: ToolLogger;
    mcp?: boolean;
    mcpMetrics?: McpMetrics;
    characterIds?: readonly string[];
  },
): Promise<LoadResult> {
  const shown = shownPath(where.file);
  const mod = fromModule(ns);
  const checked = mod.value === undefined ? undefined : validateCharacter(mod.value);
  const problems = [...mod.problems, ...(checked?.problems ?? [])];
  if (problems.length > 0 || checked?.character === undefined) {
    return { ok: false, errors: toErrors(shown, authorPaths(problems, mod.authorPath)) };
  }
  const character = checked.character as unknown as Character<unknown>;
  const bound = bindVariants(character);
  if ('problems' in bound) {
    return { ok: false, errors: toErrors(shown, authorPaths(bound.problems, mod.authorPath)) };
  }
  const at = { ...where, layout: mod.layout, shown };
  const loaded = buildLoaded(character, bound.toolsets, at);
  // All of them at once; whether a named character also loads is the registry's to say.
  const handoffErrors = handoffProblems(loaded, shown, where.characterIds);
  if (handoffErrors.length > 0) return { ok: false, errors: handoffErrors };
  const sample = sampleContext(loaded.variants[0] ?? DEFAULT_VARIANT);
  try {
    await loaded.systemPrompt(sample);
  } catch (err) {
    const detail = err instanceof CharacterError ? err.detail : String(err);
    const problem: FieldProblem = {
      kind: 'system_prompt',
      path: ['makeSystemPrompt'],
      detail: `${detail} (called once at load with a sample context: ${JSON.stringify(sample)})`,
    };
    return { ok: false, errors: toErrors(shown, authorPaths([problem], mod.authorPath)) };
  }
  if (!character.mcp?.length) return { ok: true, character: loaded };
  if (where.mcp === false) {
    const off = character.mcp.map((c) => ({ label: c.label, tools: [], error: MCP_OFF }));
    const mcp: McpTools = { tools: [], servers: off, problems: [], leases: [] };
    return {
      ok: true,
      character: buildLoaded(character, bound.toolsets, at, { mcp, warnings: [] }),
    };
  }
  // Last, once nothing else can fail: the connections are the character's to release.
  const mcp = await connectMcpServers(character.mcp, {
    file: where.file,
    ownTools: loaded.toolNames,
    fresh: where.version > 1,
    ...(where.log ? { log: where.log } : {}),
    ...(where.mcpMetrics ? { metrics: where.mcpMetrics } : {}),
  });
  const toolsets = withMcpTools(bound.toolsets, mcp.tools);
  const warnings = toErrors(shown, authorPaths(mcp.problems, mod.authorPath));
  return { ok: true, character: buildLoaded(character, toolsets, at, { mcp, warnings }) };
}

/** The `type` of the package.json nearest to `dir`, as Node decides how to load .ts/.js files. */
async function packageType(dir: string): Promise<string | undefined> {
  for (let d = dir; ; d = dirname(d)) {
    const text = await readFile(join(d, 'package.json'), 'utf8').catch(() => undefined);
    if (text !== undefined) {
      try {
        return (JSON.parse(text) as { type?: string }).type;
      } catch {
        return undefined;
      }
    }
    if (dirname(d) === d) return undefined;
  }
}

function fail(error: CharacterError): LoadResult {
  return { ok: false, errors: [error] };
}

function authorPaths(
  problems: readonly FieldProblem[],
  authorPath: (p: FieldProblem['path']) => FieldProblem['path'],
): FieldProblem[] {
  return problems.map((p) => ({ ...p, path: authorPath(p.path) }));
}

/** The context the prompt generator is tried with at load time. */
function sampleContext(variant: string): PromptContext {
  return { now: new Date(0), sessionId: 'load-check', variant, metadata: {} };
}

/** Binds the tools once per variant; binding errors name the library at fault. */
function bindVariants(
  character: Character<unknown>,
): { toolsets: Map<string, Toolset> } | { problems: FieldProblem[] } {
  const specs = (character.tools ?? []).map((t) =>
    isZodToolEntry(t) && !('kind' in t) ? ({ ...(t as object), kind: 'zod' } as ToolSpec) : t,
  );
  const libraries: readonly (ToolLibrary | undefined)[] = character.toolLibraries?.length
    ? character.toolLibraries
    : [undefined];
  const toolsets = new Map<string, Toolset>();
  const problems: FieldProblem[] = [];
  libraries.forEach((library, i) => {
    const variant = library?.variant ?? DEFAULT_VARIANT;
    const path = library ? ['toolLibraries', i] : ['tools'];
    if (toolsets.has(variant)) {
      problems.push({
        kind: 'shape',
        path,
        detail: `a second tool library with variant "${variant}"; give each variant its own name`,
      });
      return;
    }
    try {
      const options = character.handleToolCall ? { handleToolCall: character.handleToolCall } : {};
      toolsets.set(variant, createToolset(specs, library ? { ...options, library } : options));
    } catch (err) {
      const kind = err instanceof ToolBindingError ? 'binding' : 'shape';
      problems.push({ kind, path, detail: (err as Error).message });
    }
  });
  return problems.length ? { problems } : { toolsets };
}

function buildLoaded(
  character: Character<unknown>,
  toolsets: Map<string, Toolset>,
  where: { id: string; file: string; version: number; layout: 'troupe' | 'unmute'; shown: string },
  extra?: { mcp: McpTools; warnings: CharacterError[] },
): LoadedCharacter {
  const variants = [...toolsets.keys()];
  const generator =
    character.makeSystemPrompt ??
    ((instructions: unknown) =>
      typeof instructions === 'string'
        ? instructions
        : String((instructions as { prompt: string }).prompt));
  const first = toolsets.values().next().value as Toolset;
  return Object.freeze({
    id: where.id,
    file: where.file,
    version: where.version,
    loadedAt: new Date(),
    layout: where.layout,
    name: character.name,
    description: character.description,
    voice: Object.freeze({ ...(character.voice ?? {}) }),
    instructions: character.instructions,
    greeting: character.greeting,
    handoffs: Object.freeze([...(character.handoffs ?? [])]),
    maxToolRounds: character.maxToolRounds,
    toolMode: character.toolMode,
    toolFormat: character.toolFormat,
    llm: Object.freeze({ ...(character.llm ?? {}) }),
    metadata: Object.freeze({ ...(character.metadata ?? {}) }),
    toolNames: Object.freeze(first.descriptions.map((d) => d.name)),
    variants: Object.freeze(variants),
    systemPrompt: (ctx: PromptContext) =>
      runPromptGenerator(where.shown, () => generator(character.instructions, ctx)),
    toolset: (variant?: string) => {
      const set = toolsets.get(variant ?? variants[0]!);
      if (set === undefined) {
        throw new ConfigError(
          `character "${where.id}" has no tool variant "${variant}"; it has ${variants.map((v) => `"${v}"`).join(', ')}.`,
        );
      }
      return set;
    },
    ...(extra && {
      mcpServers: Object.freeze(extra.mcp.servers),
      warnings: Object.freeze(extra.warnings),
      release: async () => {
        await Promise.all(extra.mcp.leases.map((lease) => lease.release()));
      },
    }),
  });
}

/** Runs the prompt generator (sync or async) under a time limit and checks it returns a string. */
async function runPromptGenerator(shown: string, generate: () => unknown): Promise<string> {
  const failed = (detail: string, cause?: unknown) =>
    new CharacterError('system_prompt', shown, 'makeSystemPrompt', detail, { cause });
  let result: unknown;
  try {
    result = await withTimeout(Promise.resolve().then(generate), SYSTEM_PROMPT_TIMEOUT_MS, () =>
      failed(`did not return within ${SYSTEM_PROMPT_TIMEOUT_MS} ms`),
    );
  } catch (err) {
    if (err instanceof CharacterError) throw err;
    // A thrown non-Error (a string, an object) is shown as it is, not as `[object Object]`.
    const detail =
      err instanceof Error ? `${err.name}: ${stripFreshQuery(err.message)}` : preview(err);
    throw failed(`threw ${detail}`, err);
  }
  if (typeof result !== 'string') {
    throw failed(`returned ${preview(result)}; it must return the system prompt as a string`);
  }
  return result;
}
