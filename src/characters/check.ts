/**
 * `troupe check`: load every character of a directory the way the server
 * does and report each one and every error, for authors and CI.
 */
import type { CharacterError } from '../errors.js';
import { handoffToolName } from './handoffs.js';
import { characterId, shownPath } from './load.js';
import { loadCharacters, type CharacterRegistry } from './registry.js';

/** One character file in the report. */
export interface CheckRow {
  id: string;
  /** `null` when the file did not load. */
  name: string | null;
  tools: readonly string[];
  /** `ok`, or the kinds of error found in its file. */
  status: string;
}

/** What `troupe check` found. */
export interface CheckReport {
  dir: string;
  rows: CheckRow[];
  errors: readonly CharacterError[];
  /** Things that are not errors but are likely mistakes (an empty folder). */
  warnings: string[];
}

/** Options of {@link checkCharacters}. */
export interface CheckOptions {
  /**
   * The setting that named the directory, for the message when it does not
   * exist (`CHARACTERS_DIR`); absent when the user gave the path itself.
   */
  dirSetting?: string;
}

/**
 * Loads a characters directory and reports on it. Never throws for bad
 * characters (they are in `errors`); throws a ConfigError when `dir` is not a directory.
 *
 * @example
 * const report = await checkCharacters('characters');
 * process.exitCode = report.errors.length ? 1 : 0;
 */
export async function checkCharacters(
  dir: string,
  options: CheckOptions = {},
): Promise<CheckReport> {
  const registry = await loadCharacters({
    dir,
    dirHint: options.dirSetting
      ? `set ${options.dirSetting} to the folder holding your character files`
      : 'give the folder holding your character files',
  });
  await registry.close();
  return reportOf(registry);
}

/** The report of what a registry holds now: its characters and the files that failed. */
export function reportOf(registry: CharacterRegistry): CheckReport {
  // A character that loaded without some MCP tools is an error here: check is where authors look.
  const mcpProblems = registry.warnings();
  const errors = [...registry.errors(), ...mcpProblems];
  const warned = new Map<string, Set<string>>();
  for (const w of mcpProblems) {
    const id = characterId(w.file);
    warned.set(id, (warned.get(id) ?? new Set()).add(w.kind));
  }
  const rows: CheckRow[] = registry.list().map((c) => ({
    id: c.id,
    name: c.name,
    // Transfers are tools the model is offered too.
    tools: [...c.tools, ...c.handoffs.map(handoffToolName)],
    status: warned.has(c.id) ? `error: ${[...warned.get(c.id)!].join(', ')}` : 'ok',
  }));
  const failed = new Map<string, Set<string>>();
  for (const e of registry.errors()) {
    const id = characterId(e.file);
    failed.set(id, (failed.get(id) ?? new Set()).add(e.kind));
  }
  for (const [id, kinds] of failed) {
    rows.push({ id, name: null, tools: [], status: `error: ${[...kinds].join(', ')}` });
  }
  rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const dir = shownPath(registry.dir);
  const warnings =
    rows.length === 0
      ? [
          `no character files in ${dir}: a character is a .ts, .js or .mjs file at the top of ` +
            'the folder (not a test, not starting with _ or .); see characters/README.md',
        ]
      : [];
  return { dir, rows, errors, warnings };
}

/** The report as text: a table, then every error. */
export function formatCheckReport(report: CheckReport): string {
  const header: CheckRow = { id: 'id', name: 'name', tools: [], status: 'status' };
  const cells = (r: CheckRow, isHeader = false) => [
    r.id,
    r.name ?? '-',
    isHeader ? 'tools' : r.tools.join(', ') || '-',
    r.status,
  ];
  const table = [cells(header, true), ...report.rows.map((r) => cells(r))];
  const widths = [0, 1, 2, 3].map((i) => Math.max(...table.map((row) => row[i]!.length)));
  const lines = table.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
  const ok = report.rows.filter((r) => r.status === 'ok').length;
  const out = [
    `Characters in ${report.dir}:`,
    '',
    ...lines,
    '',
    `${ok} ok, ${report.rows.length - ok} with errors, ${report.errors.length} error${report.errors.length === 1 ? '' : 's'}.`,
  ];
  if (report.errors.length > 0) {
    out.push('', ...report.errors.map((e) => `error [${e.kind}] ${e.message}`));
  }
  if (report.warnings.length > 0) out.push('', ...report.warnings.map((w) => `warning: ${w}`));
  return out.join('\n');
}
