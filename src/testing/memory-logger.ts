import type { ToolLogger } from '../tools/types.js';

/** One recorded log call. */
export interface LogEntry {
  level: 'debug' | 'info' | 'warn' | 'error';
  msg: string | undefined;
  fields: Record<string, unknown>;
}

/** A logger that keeps entries in memory, for tests and the author kit. */
export interface MemoryLogger extends ToolLogger {
  readonly entries: LogEntry[];
  child(fields: object): MemoryLogger;
}

/**
 * Creates a pino-shaped logger that records instead of printing.
 *
 * @example
 * const log = createMemoryLogger();
 * log.info({ tool: 'x' }, 'tool ran');
 * expect(log.entries[0]?.msg).toBe('tool ran');
 */
export function createMemoryLogger(
  bound: Record<string, unknown> = {},
  entries: LogEntry[] = [],
): MemoryLogger {
  const record =
    (level: LogEntry['level']) =>
    (obj: object, msg?: string): void => {
      entries.push({ level, msg, fields: { ...bound, ...(obj as Record<string, unknown>) } });
    };
  return {
    entries,
    debug: record('debug'),
    info: record('info'),
    warn: record('warn'),
    error: record('error'),
    child: (fields) =>
      createMemoryLogger({ ...bound, ...(fields as Record<string, unknown>) }, entries),
  };
}
