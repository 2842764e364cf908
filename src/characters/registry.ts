/**
 * The character registry: every character of a directory, loaded and
 * validated at startup, optionally kept fresh as files change. Sessions take
 * a {@link LoadedCharacter} from it when they start and keep that version
 * until they end.
 */
import { watch as chokidarWatch } from 'chokidar';
import { readdir, stat } from 'node:fs/promises';
import { extname, join, relative, resolve, sep } from 'node:path';
import {
  CHARACTER_ERROR_KINDS,
  CharacterCheckError,
  CharacterError,
  ConfigError,
  type CharacterErrorKind,
} from '../errors.js';
import type { ToolLogger } from '../tools/types.js';
import { CHARACTER_EXTENSIONS, RELOAD_DEBOUNCE_MS } from './constants.js';
import { handoffProblems } from './handoffs.js';
import type { McpMetrics } from '../mcp/metrics.js';
import { characterId, loadCharacterFile, shownPath } from './load.js';
import type { CharacterSummary, LoadedCharacter } from './types.js';

/** Counters the registry feeds; prom-client's Counter and Gauge fit. */
export interface CharacterMetrics {
  loadErrors: { inc(labels: { type: CharacterErrorKind }): void };
  reloads: { inc(labels: { outcome: 'ok' | 'failed' | 'removed' }): void };
  loaded: { set(value: number): void };
  /** Characters' MCP servers: calls, connections, tools. */
  mcp?: McpMetrics;
}

/** Options of {@link loadCharacters}. */
export interface CharacterRegistryOptions {
  /** The characters directory. Only this directory is ever read; clients cannot name another. */
  dir: string;
  /**
   * Fail on any error instead of skipping the bad file (CI, `troupe check`).
   * Applies to the first load; a failed reload always keeps the old version.
   * @defaultValue false
   */
  strict?: boolean;
  /**
   * What to tell the user when `dir` is not a directory.
   * @defaultValue 'set CHARACTERS_DIR to the folder holding your character files'
   */
  dirHint?: string;
  /** Reload characters when their files change. @defaultValue false */
  watch?: boolean;
  /**
   * Connect characters' MCP servers (an stdio server is a child process).
   * Off, characters load without their MCP tools. @defaultValue true
   */
  mcp?: boolean;
  log?: ToolLogger;
  metrics?: CharacterMetrics;
}

/** A change to the registry, for listeners. */
export type CharacterChange =
  | { type: 'added' | 'updated'; id: string; character: LoadedCharacter }
  | { type: 'removed'; id: string }
  /** A reload failed; the previous version (if any) stays. */
  | { type: 'failed'; id: string; errors: readonly CharacterError[] };

/** The characters of one directory. */
export interface CharacterRegistry {
  readonly dir: string;
  /** The characters, sorted by id. */
  list(): CharacterSummary[];
  /** The current version of a character, `undefined` for an unknown id. */
  get(id: string): LoadedCharacter | undefined;
  /** Errors of the files that are wrong right now, in file order. */
  errors(): readonly CharacterError[];
  /**
   * Problems of characters that loaded anyway (an unreachable MCP server,
   * whose tools are missing): warnings at start, errors in `troupe check`.
   */
  warnings(): readonly CharacterError[];
  /** Errors seen since startup, by kind (what the metrics count). */
  errorCounts(): Record<CharacterErrorKind, number>;
  /** Calls `listener` on every change; returns the function that stops it. */
  subscribe(listener: (change: CharacterChange) => void): () => void;
  /** Re-reads the whole directory now (what a change of a helper module triggers). */
  reload(): Promise<void>;
  /** Stops watching and waits for a reload in progress. */
  close(): Promise<void>;
}

/** A character loaded in this pass, not yet in the registry. */
interface Fresh {
  file: string;
  previous: LoadedCharacter | undefined;
  character: LoadedCharacter;
}

interface FSWatcher {
  close(): Promise<void>;
}

const NOT_CHARACTERS = /(\.test|\.spec|\.d)\.[cm]?[jt]s$/;

/** Whether a directory entry is a character module (top level, not a test or helper). */
export function isCharacterFileName(name: string): boolean {
  return (
    (CHARACTER_EXTENSIONS as readonly string[]).includes(extname(name)) &&
    !name.startsWith('.') &&
    !name.startsWith('_') &&
    !NOT_CHARACTERS.test(name)
  );
}

/**
 * Loads every character of a directory.
 *
 * @example
 * const characters = await loadCharacters({ dir: 'characters', watch: true, log });
 * const narrator = characters.get('narrator');
 */
export async function loadCharacters(
  options: CharacterRegistryOptions,
): Promise<CharacterRegistry> {
  const dir = resolve(options.dir);
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) {
    throw new ConfigError(
      `characters directory ${shownPath(dir)} does not exist or is not a directory; ` +
        `${options.dirHint ?? 'set CHARACTERS_DIR to the folder holding your character files'}.`,
    );
  }
  const registry = new DirectoryRegistry(dir, options);
  await registry.sync('all');
  if (options.strict) {
    const errors = registry.errors();
    if (errors.length > 0) throw new CharacterCheckError([...errors]);
  }
  if (registry.list().length === 0)
    options.log?.warn({ dir: shownPath(dir) }, 'no characters loaded');
  if (options.watch) await registry.watch();
  return registry;
}

/** The characters of one directory, as the passes over it left them. */
class DirectoryRegistry implements CharacterRegistry {
  readonly dir: string;
  readonly #o: CharacterRegistryOptions;
  readonly #characters = new Map<string, LoadedCharacter>();
  readonly #fileErrors = new Map<string, CharacterError[]>();
  readonly #counts = Object.fromEntries(CHARACTER_ERROR_KINDS.map((k) => [k, 0])) as Record<
    CharacterErrorKind,
    number
  >;
  readonly #listeners = new Set<(change: CharacterChange) => void>();
  #generation = 0;
  /** Reloads run one at a time, in the order changes arrive. */
  #queue: Promise<void> = Promise.resolve();
  #watcher: FSWatcher | undefined;

  constructor(dir: string, options: CharacterRegistryOptions) {
    this.dir = dir;
    this.#o = options;
  }

  list(): CharacterSummary[] {
    return this.#sorted().map(summarise);
  }

  get(id: string): LoadedCharacter | undefined {
    return this.#characters.get(id);
  }

  errors(): readonly CharacterError[] {
    return [...this.#fileErrors.values()].flat();
  }

  warnings(): readonly CharacterError[] {
    return this.#sorted().flatMap((c) => c.warnings ?? []);
  }

  errorCounts(): Record<CharacterErrorKind, number> {
    return { ...this.#counts };
  }

  subscribe(listener: (change: CharacterChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  reload(): Promise<void> {
    return this.#enqueue('all');
  }

  async close(): Promise<void> {
    const closing = this.#watcher?.close();
    this.#watcher = undefined;
    await closing;
    await this.#queue;
    await Promise.all([...this.#characters.values()].map((c) => c.release?.()));
  }

  /** Starts watching the directory; resolves once the watch is in place. */
  async watch(): Promise<void> {
    this.#watcher = await watchDirectory(this.dir, (only) => this.#enqueue(only), this.#o.log);
  }

  /** Loads (or reloads) the ids given; `all` also drops characters whose files are gone. */
  async sync(only: ReadonlySet<string> | 'all'): Promise<void> {
    const { log, metrics } = this.#o;
    const found = await discover(this.dir).catch((err: unknown) => {
      log?.error({ err, dir: this.dir }, 'characters directory cannot be read');
      return undefined;
    });
    if (found === undefined) return;
    this.#generation++;
    this.#dropGone(found, only);
    const fresh: Fresh[] = [];
    for (const [id, files] of found) {
      if (only !== 'all' && !only.has(id)) continue;
      if (files.length > 1) {
        for (const file of files) this.#recordErrors(file, [duplicateIdError(id, file, files)]);
        const errors = files.flatMap((f) => this.#fileErrors.get(f) ?? []);
        this.#emit({ type: 'failed', id, errors });
        continue;
      }
      const loaded = await this.#load(id, files[0]!, [...found.keys()]);
      if (loaded) fresh.push(loaded);
    }
    // Handoffs name other characters: checked once every file of this pass is in.
    for (const f of this.#withHandoffsChecked(fresh)) this.#adopt(f);
    this.#warnDanglingHandoffs();
    metrics?.loaded.set(this.#characters.size);
  }

  #sorted(): LoadedCharacter[] {
    return [...this.#characters.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  #enqueue(only: ReadonlySet<string> | 'all'): Promise<void> {
    this.#queue = this.#queue
      .then(() => this.sync(only))
      .catch((err: unknown) => {
        this.#o.log?.error({ err }, 'character reload failed');
      });
    return this.#queue;
  }

  #emit(change: CharacterChange): void {
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch (err) {
        this.#o.log?.error({ err, id: change.id }, 'character change listener failed');
      }
    }
  }

  #recordErrors(file: string, errors: CharacterError[]): void {
    this.#fileErrors.set(file, errors);
    for (const e of errors) {
      this.#counts[e.kind]++;
      this.#o.metrics?.loadErrors.inc({ type: e.kind });
      this.#o.log?.error(
        { file: e.file, path: e.path, kind: e.kind, detail: e.detail },
        'character error',
      );
    }
  }

  /** Drops the characters (of those synced) whose files are gone, and their errors. */
  #dropGone(found: Map<string, string[]>, only: ReadonlySet<string> | 'all'): void {
    const { log, metrics } = this.#o;
    for (const [id, character] of [...this.#characters]) {
      if (!found.has(id) && (only === 'all' || only.has(id))) {
        this.#characters.delete(id);
        this.#fileErrors.delete(character.file);
        void character.release?.();
        metrics?.reloads.inc({ outcome: 'removed' });
        log?.info({ id, file: shownPath(character.file) }, 'character removed');
        this.#emit({ type: 'removed', id });
      }
    }
    for (const file of this.#fileErrors.keys()) {
      if (!found.has(characterId(file))) this.#fileErrors.delete(file);
    }
  }

  /** Loads one file; a failure is recorded and told, and the old version stays. */
  async #load(id: string, file: string, ids: readonly string[]): Promise<Fresh | undefined> {
    const { log, metrics } = this.#o;
    const previous = this.#characters.get(id);
    const result = await loadCharacterFile(file, {
      root: this.dir,
      generation: this.#generation,
      version: (previous?.version ?? 0) + 1,
      ...(log ? { log } : {}),
      ...(this.#o.mcp === false ? { mcp: false } : {}),
      ...(metrics?.mcp ? { mcpMetrics: metrics.mcp } : {}),
      characterIds: ids,
    });
    if (!result.ok) {
      this.#recordErrors(file, result.errors);
      if (previous) metrics?.reloads.inc({ outcome: 'failed' });
      this.#emit({ type: 'failed', id, errors: result.errors });
      return undefined;
    }
    return { file, previous, character: result.character };
  }

  /** Puts a character of this pass in the registry, in place of its previous version. */
  #adopt({ file, previous, character }: Fresh): void {
    const { log, metrics } = this.#o;
    const id = character.id;
    this.#fileErrors.delete(file);
    this.#characters.set(id, character);
    // Its MCP connections stay open when the new version uses them too (it holds them already).
    void previous?.release?.();
    for (const w of character.warnings ?? []) {
      this.#counts[w.kind]++;
      metrics?.loadErrors.inc({ type: w.kind });
      log?.warn(
        { file: w.file, path: w.path, kind: w.kind, detail: w.detail },
        'character warning',
      );
    }
    if (previous) metrics?.reloads.inc({ outcome: 'ok' });
    log?.info(
      { id, file: shownPath(file), version: character.version },
      previous ? 'character reloaded' : 'character loaded',
    );
    this.#emit({ type: previous ? 'updated' : 'added', id, character });
  }

  /**
   * The characters of a pass whose handoffs all name a character there is
   * (kept, or loaded in this pass); the others fail to load like any bad
   * file (a reload keeps the old version). Repeats until no more fail, since
   * a failed character is no target either.
   */
  #withHandoffsChecked(fresh: Fresh[]): Fresh[] {
    let ok = fresh;
    for (;;) {
      // A failed reload keeps the old version, so it is still there to hand off to.
      const known = [...new Set([...this.#characters.keys(), ...ok.map((f) => f.character.id)])];
      const failed = ok.flatMap((f) => {
        const errors = handoffProblems(f.character, shownPath(f.file), known);
        return errors.length ? [{ f, errors }] : [];
      });
      if (failed.length === 0) return ok;
      for (const { f, errors } of failed) {
        this.#recordErrors(f.file, errors);
        // Not kept: the MCP connections it opened are let go (the old version holds its own).
        void f.character.release?.();
        if (f.previous) this.#o.metrics?.reloads.inc({ outcome: 'failed' });
        this.#emit({ type: 'failed', id: f.character.id, errors });
      }
      ok = ok.filter((f) => !failed.some((x) => x.f === f));
    }
  }

  /**
   * A character removed (or broken) on reload leaves the characters that
   * hand off to it: their `transfer_to_` tool for it is withdrawn (sessions
   * offer only transfers to characters there are) and a warning says so.
   */
  #warnDanglingHandoffs(): void {
    for (const c of this.#characters.values()) {
      const missing = c.handoffs.filter((id) => !this.#characters.has(id));
      if (missing.length > 0) {
        this.#o.log?.warn(
          { id: c.id, file: shownPath(c.file), missing },
          'character hands off to characters that are gone; those transfers are withdrawn',
        );
      }
    }
  }
}

/** Top-level character files grouped by id; ids with several files are errors. */
async function discover(dir: string): Promise<Map<string, string[]>> {
  const entries = await readdir(dir, { withFileTypes: true });
  const byId = new Map<string, string[]>();
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (!entry.isFile() || !isCharacterFileName(entry.name)) continue;
    const file = join(dir, entry.name);
    const id = characterId(file);
    byId.set(id, [...(byId.get(id) ?? []), file]);
  }
  return byId;
}

/** The error of one of several files that share an id. */
function duplicateIdError(id: string, file: string, files: string[]): CharacterError {
  const others = files.filter((f) => f !== file).map(shownPath);
  return new CharacterError(
    'duplicate_id',
    shownPath(file),
    '',
    `duplicate character id "${id}" (also ${others.join(', ')}); the file name is the id, so rename or remove one`,
  );
}

function summarise(c: LoadedCharacter): CharacterSummary {
  return {
    id: c.id,
    name: c.name,
    description: c.description,
    voice: c.voice,
    tools: c.toolNames,
    variants: c.variants,
    greeting: c.greeting,
    handoffs: c.handoffs,
    version: c.version,
  };
}

/**
 * Watches the directory tree (chokidar: atomic saves, new subfolders). A
 * changed character file reloads that character; a change anywhere else (a
 * helper module, a tool library in a subfolder) reloads them all, since any
 * of them may import it. Resolves once the watch is in place.
 */
async function watchDirectory(
  dir: string,
  enqueue: (only: ReadonlySet<string> | 'all') => Promise<void>,
  log: ToolLogger | undefined,
): Promise<FSWatcher> {
  let pending = new Set<string>();
  let everything = false;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    const only = everything ? 'all' : pending;
    pending = new Set();
    everything = false;
    void enqueue(only);
  };
  const ignored = (path: string) =>
    relative(dir, path)
      .split(sep)
      .some((part) => part === 'node_modules' || part.startsWith('.'));
  const watcher = chokidarWatch(dir, { ignoreInitial: true, ignored });
  watcher.on('all', (_event, path) => {
    const name = relative(dir, path);
    if (!name.includes(sep) && isCharacterFileName(name)) pending.add(characterId(name));
    else everything = true;
    clearTimeout(timer);
    // Editors save in bursts (write, rename, chmod); reload once they are done.
    timer = setTimeout(flush, RELOAD_DEBOUNCE_MS);
  });
  watcher.on('error', (err) => log?.error({ err, dir }, 'characters directory watch failed'));
  await new Promise<void>((ready) => watcher.once('ready', ready));
  return {
    close: async () => {
      clearTimeout(timer);
      await watcher.close();
    },
  };
}
